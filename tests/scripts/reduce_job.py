"""Every rank logs its own throughput, memory, latency and loss into one shared run;
``define_metric`` chooses each metric's cross-rank line (``tests/e2e/test_reduce_torchrun.py``).

Rank r logs ``samples_per_s = 100 (r + 1) + step`` (the job's total is the line),
``mem/peak_gb = 1 + r`` (a glob: the max), ``mem/free_gb = 8 - r`` (an exact definition
beats the glob: the min), ``lat = 5 - r + step / 10`` (the min), ``loss = 1 / (step + 1) +
r`` with ``weight = r + 1`` (the weighted mean) and ``acc`` (left to the mean).
"""

from __future__ import annotations

import argparse

import rankwise

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=6)
a = p.parse_args()

run = rankwise.init(project="reduce", run_mode="shared", system=False)
rank = run.rank
if rank == 0:  # the primary's definitions are the run's
    run.define_metric("samples_per_s", reduce="sum")
    run.define_metric("mem/*", reduce="max")
    run.define_metric("lat", reduce="min", goal="minimize")
    run.define_metric("loss", reduce="wmean", summary="min")
# Every rank, through the module: an exact definition beats the glob above.
rankwise.define_metric("mem/free_gb", reduce="min")
for step in range(a.steps):
    run.log(
        {
            "samples_per_s": 100.0 * (rank + 1) + step,
            "mem/peak_gb": 1.0 + rank,
            "mem/free_gb": 8.0 - rank,
            "lat": 5.0 - rank + step / 10,
            "loss": 1.0 / (step + 1) + rank,
            "acc": 0.5 + 0.1 * rank,
        },
        weight=rank + 1,
    )
run.finish()
