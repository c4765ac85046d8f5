"""The W&B guide's second method: one run per process, grouped with ``group`` and
``job_type`` (only the import changed)."""

import argparse

import torch.distributed as dist

import rankwise.wandb as wandb

parser = argparse.ArgumentParser()
parser.add_argument("--group", default="exp-1")
args = parser.parse_args()

dist.init_process_group("gloo")
rank = dist.get_rank()

run = wandb.init(
    project="guide",
    group=args.group,
    job_type="main" if rank == 0 else "worker",
    config={"rank": rank},
)
for i in range(3):
    run.log({"x": rank * 10 + i})
print(f"RUN {rank} {run.id}", flush=True)
run.finish()
dist.destroy_process_group()
