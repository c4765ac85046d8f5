"""A two-rank torchrun job that raises every alert event (tests/e2e/test_alerts_e2e.py).

* both ranks log ``loss`` = 20 (the rule ``loss > 10`` holds); rank 1 steps ten times
  slower than rank 0 (a straggler, over a short straggler window);
* rank 1 then logs a NaN loss (``nonfinite``) and rank 0 calls ``run.alert()``;
* rank 1 stops logging for longer than its stall timeout (``hang``) while rank 0 goes
  on a little, then SIGKILLs itself: no Finish, so its ``heartbeat`` stops and the run's
  first failure is a crash (``failed``); torchrun then stops rank 1, still stalled.

Usage: ``torchrun --nproc-per-node=2 alert_job.py <data dir>``.
"""

from __future__ import annotations

import os
import signal
import sys
import time

import rankwise

PHASE = 5.0  # seconds of steady logging, longer than the test's straggler window


def main() -> None:
    rank = int(os.environ["RANK"])
    run = rankwise.init(
        project="alerts",
        dir=sys.argv[1],
        run_mode="shared",
        console="off",
        system=False,
        stall_timeout=1.0,
        settings={"flush_interval": 0.05, "heartbeat_interval": 0.5},
    )
    start = time.monotonic()
    step = 0
    while time.monotonic() - start < PHASE:
        run.log({"loss": 20.0}, step=step)
        step += 1
        time.sleep(0.5 if rank == 1 else 0.05)
    if rank == 1:
        run.log({"loss": float("nan")}, step=step)
        time.sleep(30.0)  # no log(): the watchdog records a stall; torchrun ends it
        raise RuntimeError("rank 1 was not stopped")
    run.alert("checkpoint written", f"rank {rank} saved step {step}", "WARN", 0)
    run.alert("checkpoint written", "inside wait_duration: dropped", "WARN", 60)
    # Logging on (no stall of its own) while rank 1's stall is recorded and uploaded.
    end = time.monotonic() + 3.5
    while time.monotonic() < end:
        run.log({"loss": 20.0}, step=step)
        step += 1
        time.sleep(0.05)
    os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    main()
