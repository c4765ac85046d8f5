"""The W&B distributed guide's first method: track one process (rank 0) only.

A copy of the guide's snippet with only the import changed. Ranks other than 0 never
call ``wandb.init``; their ``wandb.log`` is a no-op under rankwise (W&B would raise).
"""

import argparse
import os

import torch
import torch.distributed as dist

import rankwise.wandb as wandb

parser = argparse.ArgumentParser()
parser.add_argument("--project", default="guide")
args = parser.parse_args()

dist.init_process_group("gloo")
rank = dist.get_rank()
local_rank = int(os.environ["LOCAL_RANK"])

run = None
if local_rank == 0:
    run = wandb.init(
        entity="my-team",
        project=args.project,
        config={"lr": 0.01, "world": dist.get_world_size()},
    )

model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
torch.manual_seed(rank)
for step in range(5):
    loss = model(torch.ones(2, 4)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    if run is not None:
        run.log({"loss": loss.item(), "step_no": step})
    wandb.log({"rank_loss": loss.item()})  # rank 0: recorded; other ranks: a no-op

if run is not None:
    print(f"RUN {run.path}")
    run.finish()
dist.destroy_process_group()
