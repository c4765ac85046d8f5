"""A DDP script in the style of W&B's ``pytorch-ddp/log-ddp.py``: every rank trains,
the loss is ``all_gather``-ed, and rank 0 alone logs it (only the import changed)."""

import argparse

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

import rankwise.wandb as wandb


def train(args, run=None):
    rank = dist.get_rank()
    world = dist.get_world_size()
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    if run:
        run.watch(model, log_freq=2)
    for step in range(args.steps):
        torch.manual_seed(100 * step + rank)  # each rank its own batch
        x = torch.randn(16, 4)
        loss = (model(x) - x.sum(dim=1, keepdim=True)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses = [torch.zeros_like(loss) for _ in range(world)]
        dist.all_gather(losses, loss.detach())
        if run:
            run.log({"loss": torch.stack(losses).mean(), "rank0_loss": losses[0], "step": step})


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=6)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    run = None
    if dist.get_rank() == 0:
        run = wandb.init(project="ddp-allgather", group="DDP", config=vars(args))
    train(args, run)
    if run:
        print(f"RUN {run.id}", flush=True)
        run.finish()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
