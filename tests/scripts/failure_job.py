"""A torchrun job (3 CPU ranks, gloo, shared mode) whose rank 1 fails first
(tests/e2e/test_failure_story.py).

Every rank logs ``loss`` and prints a line a step; from step ``COLLECTIVE`` on, every step
also ends in an ``all_reduce``.

* ``raise``: rank 1 first stops logging for longer than its ``stall_timeout`` (a stall
  that clears), then raises ``RuntimeError("boom on rank 1 at step 8")`` at step 8; the
  other ranks then fail inside the ``all_reduce`` (gloo: the peer is gone) or are stopped
  by torchrun.
* ``kill``: rank 1 SIGKILLs itself at step 8 instead, with most of its stream not yet
  uploaded (its ``upload_interval`` is long): a surviving rank uploads it.
* ``sigkill``: as ``kill``, with no server and a 30 s heartbeat, so that only the dead
  pid can tell that rank 1 crashed when torchrun has just exited (a late heartbeat would
  say so after a minute).

Usage: ``torchrun --nproc-per-node=3 failure_job.py <data dir> raise|kill|sigkill``.
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

FAIL_AT = 8
COLLECTIVE = 6
STALL_AT = 2


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=30))
    rank = dist.get_rank()
    mode = sys.argv[2]
    run = rankwise.init(
        project=f"failures-{mode}",
        dir=sys.argv[1],
        run_mode="shared",
        console="wrap",
        system=False,
        # Only rank 1 stalls on purpose; the others wait for it in a collective, which is
        # not what this job is about.
        stall_timeout=0.4 if rank == 1 else 60.0,
        settings={
            "flush_interval": 0.02,
            "heartbeat_interval": 30.0 if mode == "sigkill" else 0.5,
            # kill: rank 1 uploads its first batch only, so that what it leaves behind in
            # its file must be uploaded by a surviving sibling.
            "upload_interval": 60.0 if rank == 1 and mode == "kill" else 0.05,
        },
    )
    for step in range(40):
        run.log({"loss": 1.0 / (step + 1)}, step=step)
        print(f"rank {rank} step {step}", flush=True)
        if rank == 1 and step == STALL_AT and mode == "raise":
            time.sleep(1.5)  # the watchdog fires at 0.4 s and clears when logging resumes
        if rank == 1 and step == FAIL_AT:
            assert run._writer is not None and run._writer.sync(timeout=60)  # step 8 on disk
            if mode in ("kill", "sigkill"):
                os.kill(os.getpid(), signal.SIGKILL)
            raise RuntimeError(f"boom on rank 1 at step {step}")
        if step >= COLLECTIVE:
            dist.all_reduce(torch.ones(1))
        time.sleep(0.02)
    run.finish()


if __name__ == "__main__":
    main()
