"""A torchrun job of four ranks, each in trouble its own way (tests/sdk/test_health.py).

* rank 0 steps steadily;
* rank 1 is a straggler: its steps take four times as long;
* rank 2 blocks forever in an ``all_reduce`` that no other rank joins (a hang);
* rank 3 waits until rank 2's stall is on disk and rank 1 has had time to fall behind,
  then SIGKILLs itself (a crash). torchrun then stops the rest of the job with SIGTERM.

With a second argument ``telemetry`` (tests/e2e/test_health_e2e.py), every rank also prints a
line per step to stdout (and a warning to stderr every ten steps, rank 0's in colour),
and console capture and system sampling are on with short intervals.

Usage: ``torchrun --nproc-per-node=4 health_job.py <data dir> [telemetry]``.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist

import rankwise
from rankwise.stream import records as R
from rankwise.stream.frames import scan

STEP = 0.02
LIMIT = 60.0  # nobody runs longer than this, whatever happens


def stalled(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return any(type(r) is R.Stall for r in scan(f.read()).records)
    except OSError:
        return False


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=LIMIT))
    rank = dist.get_rank()
    # "telemetry": every rank also prints, with console capture and fast system sampling.
    telemetry = sys.argv[2:] == ["telemetry"]
    run = rankwise.init(
        project="telemetry" if telemetry else "health",
        dir=sys.argv[1],
        run_mode="shared",
        console="wrap" if telemetry else "off",
        system=telemetry,
        stall_timeout=1.0,
        settings={"flush_interval": 0.05, "heartbeat_interval": 0.5, "system_interval": 0.2},
    )
    start = time.monotonic()
    step = 0
    while time.monotonic() - start < LIMIT:
        loss = 1.0 / (step + 1)
        run.log({"loss": loss})
        if telemetry:
            print(f"rank {rank} step {step} loss {loss:.4f}", flush=True)
            if step % 10 == 0:
                colour = "\x1b[33m" if rank == 0 else ""
                print(f"{colour}WARNING rank {rank} step {step}: <slow> & steady", file=sys.stderr)
        step += 1
        if rank == 2 and step == 5:
            dist.all_reduce(torch.ones(1))  # HANG: no other rank ever joins
        if (
            rank == 3
            and step % 10 == 0
            and time.monotonic() - start > 2.5
            and stalled(os.path.join(run.dir, "streams", "rank-2.0.rwlog"))
        ):
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(STEP * 4 if rank == 1 else STEP)


if __name__ == "__main__":
    main()
