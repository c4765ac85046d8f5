"""Logs for a moment with fast system sampling (tests/sdk/test_system.py).

Usage: ``health_system.py <data dir> [init() keyword arguments as JSON]``. Runs as one
process or under torchrun (every rank records: run_mode="shared"). With
``HEALTH_NO_PYNVML=1`` importing ``pynvml`` fails as if it were not installed.
"""

from __future__ import annotations

import json
import os
import sys
import time

import rankwise

if os.environ.get("HEALTH_NO_PYNVML") == "1":
    sys.modules["pynvml"] = None  # type: ignore[assignment]

kwargs = {
    "run_mode": "shared",
    "console": "off",
    "stall_timeout": 0,
    "system_interval": 0.2,
    "settings": {"flush_interval": 0.05},
}
kwargs.update(json.loads(sys.argv[2]) if len(sys.argv) > 2 else {})
run = rankwise.init(project="system", dir=sys.argv[1], **kwargs)
deadline = time.monotonic() + float(os.environ.get("HEALTH_SECONDS", "1.0"))
step = 0
while time.monotonic() < deadline:
    run.log({"x": step})
    step += 1
    time.sleep(0.02)
run.finish()
print(f"RUN {run.project}/{run.id}", flush=True)
