"""A small training loop for the upload tests: known values on every rank.

Run under ``torchrun --nproc-per-node=N`` (gloo on CPU, one all_reduce per step so the
ranks move in lockstep like real data-parallel training) or as plain processes with
``RANK``/``WORLD_SIZE`` set. Every rank logs into one run (``run_mode="shared"``):
``loss`` with ``weight=rank + 1`` and ``lr`` without a weight, at every step. The server
and the settings come from the environment (``RANKWISE_SERVER``, ``RANKWISE_*``).
Rank 0 writes the last step it logged to ``--progress``; every rank prints how long
``finish()`` took.
"""

from __future__ import annotations

import argparse
import math
import os
import time
from pathlib import Path
from typing import Any

import rankwise


def value(rank: int, step: int) -> float:
    return math.sin(0.7 * step + 1.3 * rank) + 0.01 * rank * step


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--sleep", type=float, default=0.0)
    p.add_argument("--project", default="up")
    p.add_argument("--progress", default=None)
    p.add_argument("--torch", action="store_true", help="init a gloo process group")
    args = p.parse_args()

    dist: Any = None
    if args.torch:
        import torch
        import torch.distributed as dist

        dist.init_process_group("gloo")
    rank = int(os.environ.get("RANK", "0"))
    run = rankwise.init(project=args.project, run_mode="shared", config={"steps": args.steps})
    for step in range(args.steps):
        if dist is not None:
            t = torch.tensor([value(rank, step)])
            dist.all_reduce(t)
        run.log({"loss": value(rank, step)}, step=step, weight=rank + 1)
        run.log({"lr": 0.1 / (step + 1) + rank}, step=step)
        if args.progress and rank == 0:
            Path(args.progress).write_text(str(step))
        if args.sleep:
            time.sleep(args.sleep)
    t0 = time.monotonic()
    run.finish()
    print(f"rank {rank} finish took {time.monotonic() - t0:.3f}", flush=True)
    if dist is not None:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
