"""``torch.multiprocessing.spawn`` of N children, each calling ``rankwise.init()``.

Usage: ``spawn_job.py DIR REPORT NPROCS before|after``. Each child sets MASTER_ADDR and
MASTER_PORT itself (as the PyTorch DDP tutorial does) and calls ``rankwise.init()``
*before* or *after* ``init_process_group``; no RANK, WORLD_SIZE or run id is in its
environment. It logs ``rank * 1000 + i + 0.25`` for 5 steps in shared mode and reports
what its run looked like to ``REPORT/<i>.json``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from tests.helpers.env import free_port  # the repository is on PYTHONPATH (job_env)


def child(i: int, port: int, data: str, report: str, nprocs: int, when: str) -> None:
    import rankwise

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    if when == "before":
        run = rankwise.init(project="spawn", run_mode="shared", dir=data)
    dist.init_process_group("gloo", rank=i, world_size=nprocs)
    if when == "after":
        run = rankwise.init(project="spawn", run_mode="shared", dir=data)
    total = torch.tensor([1.0])
    dist.all_reduce(total)
    logged = []
    for step in range(5):
        value = run.rank * 1000 + step + 0.25
        run.log({"value": value})
        logged.append(value)
    info = {
        "i": i,
        "id": run.id,
        "label": run.label,
        "rank": run.rank,
        "world_size": run.world_size,
        "local_rank": run.local_rank,
        "is_primary": run.is_primary,
        "logged": logged,
    }
    Path(report, f"{i}.json").write_text(json.dumps(info))
    dist.barrier()
    run.finish()
    dist.destroy_process_group()


if __name__ == "__main__":
    data, report, nprocs, when = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    Path(report).mkdir(parents=True, exist_ok=True)
    mp.spawn(child, args=(free_port(), data, report, nprocs, when), nprocs=nprocs)  # type: ignore[attr-defined]
