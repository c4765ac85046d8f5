"""Logs, says "ready", then sleeps until SIGTERM arrives (tests/sdk/test_health.py).

Usage: ``health_sigterm.py <data dir>``. The sleep outlasts the stall timeout, so the
stream records a stall in ``sleep`` before it is killed.
"""

from __future__ import annotations

import sys
import time

import rankwise

run = rankwise.init(
    project="sigterm",
    dir=sys.argv[1],
    stall_timeout=0.3,
    system_interval=0.2,
    settings={"flush_interval": 0.05, "heartbeat_interval": 0.2},
)
run.log({"x": 1.0})
assert run._writer is not None and run._writer.sync(timeout=60)  # in the file before "ready"
print("ready", flush=True)
time.sleep(120)  # SLEEP
