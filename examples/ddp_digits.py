"""A real DDP training, tracked by rankwise on every rank.

A small MLP learns scikit-learn's digits data set (it ships with the package: nothing
is downloaded). Run it with torchrun::

    torchrun --nproc-per-node=2 examples/ddp_digits.py --epochs 10

Every rank logs into one run (``run_mode="shared"``): its own training loss (weighted by
its batch size, so the cross-rank mean is the true mean over samples), its throughput and,
once per epoch, the test accuracy measured on its shard of the test set. gloo is used on
CPU and nccl on GPU.
"""

from __future__ import annotations

import argparse
import gc
import os
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

import rankwise


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--project", default="digits")
    p.add_argument("--run-mode", default="shared", choices=["auto", "shared", "new"])
    p.add_argument("--step-sleep", type=float, default=0.0, help="seconds to sleep per step")
    return p.parse_args()


def datasets(seed: int) -> tuple[TensorDataset, TensorDataset]:
    x, y = load_digits(return_X_y=True)
    x = x / 16.0
    x_train, x_test, y_train, y_test = train_test_split(
        x, y, test_size=0.25, random_state=seed, stratify=y
    )

    def ds(a, b):  # type: ignore[no-untyped-def]
        return TensorDataset(torch.tensor(a, dtype=torch.float32), torch.tensor(b))

    return ds(x_train, y_train), ds(x_test, y_test)


def main() -> None:
    args = parse_args()
    use_cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if use_cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    device = torch.device(f"cuda:{local_rank}" if use_cuda else "cpu")
    if use_cuda:
        torch.cuda.set_device(device)
    torch.manual_seed(args.seed)

    run = rankwise.init(
        project=args.project,
        run_mode=args.run_mode,
        job_type="train",
        tags=["digits", "ddp"],
        config={**vars(args), "world_size": world, "backend": dist.get_backend()},
    )
    # Each rank logs its own throughput; the run page's line is the job's total.
    run.define_metric("train/samples_per_s", reduce="sum")

    train, test = datasets(args.seed)
    train_sampler = DistributedSampler(train, shuffle=True, seed=args.seed)
    test_sampler = DistributedSampler(test, shuffle=False)
    train_loader = DataLoader(train, batch_size=args.batch_size, sampler=train_sampler)
    test_loader = DataLoader(test, batch_size=256, sampler=test_sampler)

    model = nn.Sequential(nn.Linear(64, args.hidden), nn.ReLU(), nn.Linear(args.hidden, 10)).to(
        device
    )
    model = DDP(model, device_ids=[local_rank] if use_cuda else None)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)

    step = 0
    for epoch in range(args.epochs):
        model.train()
        train_sampler.set_epoch(epoch)
        for xb, yb in train_loader:
            t0 = time.perf_counter()
            xb, yb = xb.to(device), yb.to(device)
            loss = F.cross_entropy(model(xb), yb)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            if args.step_sleep:
                time.sleep(args.step_sleep)
            elapsed = time.perf_counter() - t0
            run.log(
                {
                    "train/loss": loss.detach(),
                    "train/samples_per_s": len(xb) / elapsed,
                    "epoch": epoch,
                },
                step=step,
                weight=len(xb),
            )
            step += 1

        model.eval()
        correct = total = 0
        with torch.no_grad():
            for xb, yb in test_loader:
                pred = model(xb.to(device)).argmax(dim=1)
                correct += int((pred == yb.to(device)).sum())
                total += len(yb)
        run.log({"test/accuracy": correct / max(total, 1)}, step=step, weight=total)

    run.summary["final_step"] = step
    run.finish()
    # Drop what holds the gloo process group (the DDP wrapper, the optimizer) and end the
    # group while the interpreter is alive: left to its teardown, gloo's threads can abort
    # the process ("terminate called without an active exception").
    del model, optimizer
    gc.collect()
    dist.destroy_process_group()
    if rank == 0:
        print(f"run {run.project}/{run.id}: {step} steps on {world} ranks, dir {run.dir}")


if __name__ == "__main__":
    main()
