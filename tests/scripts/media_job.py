"""A rank that logs an image, a table with image cells and a histogram at each step.

Under torchrun (``--torch``: gloo on CPU) every rank records into one shared run; the
pixel values, table rows and histogram values are derived from the rank and the step,
so the test can recompute exactly what each rank logged. ``--kill-after N`` SIGKILLs the
process right after its N-th log() call (no finish, no flush).
"""

from __future__ import annotations

import argparse
import os
import signal

import numpy as np

import rankwise


def image(rank: int, step: int) -> np.ndarray:
    return ((np.arange(12 * 10 * 3).reshape(12, 10, 3) + 7 * rank + step) % 256).astype(np.uint8)


def values(rank: int, step: int) -> np.ndarray:
    return np.random.default_rng(100 * rank + step).normal(rank, 1.0, 500)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--torch", action="store_true")
    p.add_argument("--kill-after", type=int, default=0)
    args = p.parse_args()
    if args.torch:
        import torch.distributed as dist

        dist.init_process_group("gloo")
    run = rankwise.init(project="media", run_mode="shared")
    rank = int(os.environ.get("RANK", "0"))
    for step in range(args.steps):
        table = rankwise.Table(columns=["rank", "step", "image", "score"])
        for i in range(3):
            table.add_data(rank, step, rankwise.Image(image(rank, step + i)), float(i) / 2)
        run.log(
            {
                "loss": float(rank + step),
                "sample": rankwise.Image(image(rank, step), caption=f"r{rank}s{step}"),
                "predictions": table,
                "weights": rankwise.Histogram(values(rank, step), num_bins=16),
            },
            step=step,
        )
        if args.kill_after and step + 1 >= args.kill_after:
            os.kill(os.getpid(), signal.SIGKILL)
    if args.torch:
        import torch.distributed as dist

        dist.barrier()
        dist.destroy_process_group()
    run.finish()


if __name__ == "__main__":
    main()
