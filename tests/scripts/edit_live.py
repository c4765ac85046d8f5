"""A 2-rank torchrun job (gloo on CPU) that edits its run while it runs.

Every rank logs ``loss`` into one run (``run_mode="shared"``: a stream per rank); at
step 2 rank 0 sets ``run.name`` and ``run.tags``, rank 1 sets ``run.notes`` (W&B's live
edits), and rank 0 later adds a tag.
Then both finish. The data directory comes from ``RANKWISE_DIR``.
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist

import rankwise


def main() -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    run = rankwise.init(
        project="live", name="first-name", tags=["start"], config={"lr": 0.1}, run_mode="shared"
    )
    for step in range(6):
        t = torch.tensor([float(rank + step)])
        dist.all_reduce(t)
        run.log({"loss": 1.0 / (1 + step + rank)}, step=step)
        if step == 2 and rank == 0:
            run.name = "renamed-live"
            run.tags = ["start", "live"]
        if step == 2 and rank == 1:
            run.notes = "set by **rank 1**"
        if step == 4 and rank == 0:
            run.tags = [*run.tags, "late"]
        dist.barrier()
    print(f"rank {rank} sees name={run.name} tags={list(run.tags)} pid={os.getpid()}")
    rankwise.finish()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
