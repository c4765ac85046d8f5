"""A shared run whose last step is partial while the test looks (torchrun, gloo, CPU).

Every rank logs ``score = 10 * rank + step`` with ``weight = rank + 1`` for ``--steps``
steps and sets ``run.summary["who"]``; ranks other than the last then log one more step,
so that step is reached by only some live ranks. All ranks write ``READY.<rank>`` and
wait for ``GO`` in ``--sync`` before finishing.

    torchrun --nproc-per-node=3 tests/scripts/story_job.py --dir D --sync S --steps 5
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch.distributed as dist

import rankwise


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--dir", required=True)
    p.add_argument("--sync", required=True)
    p.add_argument("--steps", type=int, default=5)
    a = p.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    run = rankwise.init(project="story", id="job", dir=a.dir, run_mode="shared")
    for step in range(a.steps):
        loss = 2.0 / (1.0 + 0.3 * step) + 0.4 * rank  # a curve, for the screenshot
        run.log({"score": 10.0 * rank + step, "train/loss": loss}, step=step, weight=rank + 1.0)
    run.summary["who"] = f"rank {rank}"
    if rank != world - 1:
        # Ranks ahead of the last one: the mean of this step would jump (one rank's value).
        run.log({"score": 1000.0 + rank, "train/loss": 4.0}, step=a.steps, weight=rank + 1.0)
    sync = Path(a.sync)
    assert run._writer is not None and run._writer.sync(timeout=60)  # all of it on disk
    (sync / f"READY.{rank}").touch()
    deadline = time.monotonic() + 90
    while not (sync / "GO").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    run.finish()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
