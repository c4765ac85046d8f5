"""A small real DDP job for the dashboard test: run it under torchrun (gloo, CPU).

Every rank records into one run per trial (``run_mode="shared"``), so the dashboard has
cross-rank bands and per-rank lines to show, and two runs to compare. Trials run one after
the other in one launch (torchrun starts once). Names, tags, config values and a metric
key carry HTML on purpose: the dashboard must show them as text, never run them.

    torchrun --nproc-per-node=2 tests/scripts/dashboard_train.py --prefix dash --steps 40
"""

from __future__ import annotations

import argparse
import gc
import os
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

import rankwise

XSS_NAME = '<img src=x onerror="window.__xss=1">trial-b'
XSS_TAG = "<b>tag</b>"
XSS_CONFIG = "<script>window.__xss=2</script>"
XSS_KEY = "debug/<img src=x onerror=window.__xss=3>"


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--prefix", required=True, help="run ids are PREFIX-a and PREFIX-b")
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--project", default="dash")
    a = p.parse_args()

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(rank)
    x = torch.randn(512, 16)
    y = (x[:, :4].sum(dim=1) > 0).long()
    shard_x, shard_y = x[rank::world], y[rank::world]
    batch = 16 + 8 * rank  # unequal batches: the weighted mean differs from the plain one

    for trial, lr in (("a", 0.05), ("b", 0.2)):
        torch.manual_seed(0)
        model = DDP(nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2)))
        opt = torch.optim.SGD(model.parameters(), lr=lr)
        run = rankwise.init(
            project=a.project,
            id=f"{a.prefix}-{trial}",
            name=XSS_NAME if trial == "b" else "trial-a",
            group=f"{a.prefix}-sweep",
            job_type="train",
            tags=["ddp", XSS_TAG] if trial == "b" else ["ddp"],
            config={
                "lr": lr,
                "trial": trial,
                "world_size": world,
                "html": XSS_CONFIG,
                "optimizer": {"name": "sgd", "momentum": 0.0},
            },
            run_mode="shared",
        )
        for step in range(a.steps):
            t0 = time.perf_counter()
            i = (step * batch) % (shard_x.shape[0] - batch)
            xb, yb = shard_x[i : i + batch], shard_y[i : i + batch]
            out = model(xb)
            loss = F.cross_entropy(out, yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            acc = (out.argmax(1) == yb).float().mean()
            values = {
                "train/loss": loss.detach(),
                "train/accuracy": acc,
                "train/lr": lr,
                "train/samples_per_s": batch / max(time.perf_counter() - t0, 1e-6),
            }
            if step % 10 == 9:
                values["val/loss"] = loss.item() * 1.1
                values[XSS_KEY] = float(step)
            run.log(values, step=step, weight=batch)
        run.summary["final_loss"] = loss.item()
        run.finish()
    # Drop what holds the gloo process group (the DDP wrapper, the optimizer) and end the
    # group while the interpreter is alive: left to its teardown, gloo's threads can abort
    # the process ("terminate called without an active exception").
    del model, opt, out, loss
    gc.collect()
    dist.destroy_process_group()
    if rank == 0:
        print(
            f"dashboard_train: runs {a.prefix}-a, {a.prefix}-b in {os.environ.get('RANKWISE_DIR')}"
        )


if __name__ == "__main__":
    main()
