"""Two ranks (gloo) record one shared run from inside a git repository the test made
(``tests/e2e/test_provenance.py``); the command line carries a secret flag value."""

from __future__ import annotations

import argparse

import torch
import torch.distributed as dist

import rankwise

p = argparse.ArgumentParser()
p.add_argument("--api-key", default="")
p.add_argument("--steps", type=int, default=3)
a = p.parse_args()

dist.init_process_group("gloo")
run = rankwise.init(project="prov", run_mode="shared", system=False)
for step in range(a.steps):
    t = torch.tensor([float(step)])
    dist.all_reduce(t)
    run.log({"loss": 1.0 / (step + 1), "sum": t.item()}, step=step)
if run.rank == 0:
    run.log_code(".").wait(60)  # the repository's *.py files, as a code artifact
run.finish()
dist.destroy_process_group()
