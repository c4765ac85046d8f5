"""Many writers at once: P processes × S steps × 10 scalars into one shared-mode run.

Each process is a rank (RANK/WORLD_SIZE set, as a launcher would) logging as fast as it
can — far faster than any training loop — then finishing. Reported: wall time, the
per-process log() loop and finish() times, every point read back through
``rankwise.Api``, and each process's peak RSS, for two run lengths, to show that the
writer's memory does not grow with the length of the run.

    python benchmarks/bench_writers.py [--procs 8] [--steps 20000]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = r"""
import json, os, sys, time
import rankwise

def hwm_kb():  # peak RSS of this process image (reset by exec, unlike ru_maxrss)
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])

steps = int(sys.argv[1])
run = rankwise.init(project="bench", run_mode="shared")
base_rss = hwm_kb()
t0 = time.perf_counter()
for step in range(steps):
    run.log({f"m{i}": step * 0.001 + i for i in range(10)})
t1 = time.perf_counter()
run.finish()
t2 = time.perf_counter()
print(json.dumps({"log_s": t1 - t0, "finish_s": t2 - t1, "base_rss_kb": base_rss,
                  "peak_rss_kb": hwm_kb()}))
"""


def launch(procs: int, steps: int, root: Path) -> dict[str, float]:
    env_base = {
        **os.environ,
        "RANKWISE_DIR": str(root),
        "RANKWISE_RUN_ID": f"w{procs}x{steps}",
        "WORLD_SIZE": str(procs),
        "LOCAL_WORLD_SIZE": str(procs),
    }
    t0 = time.perf_counter()
    children = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, str(steps)],
            env={**env_base, "RANK": str(r), "LOCAL_RANK": str(r)},
            stdout=subprocess.PIPE,
            text=True,
        )
        for r in range(procs)
    ]
    results = []
    for child in children:
        out, _ = child.communicate()
        assert child.returncode == 0, f"a writer failed ({child.returncode})"
        results.append(json.loads(out))
    wall = time.perf_counter() - t0

    import rankwise

    t0 = time.perf_counter()
    info = rankwise.Api(root).run(f"w{procs}x{steps}", project="bench")
    rows = info.history()
    read_s = time.perf_counter() - t0
    points = sum(len(r) - 3 for r in rows)
    return {
        "wall_s": wall,
        "log_s": statistics.median(r["log_s"] for r in results),
        "finish_s": statistics.median(r["finish_s"] for r in results),
        "rss_growth_mb": max(r["peak_rss_kb"] - r["base_rss_kb"] for r in results) / 1024,
        "peak_rss_mb": max(r["peak_rss_kb"] for r in results) / 1024,
        "points": points,
        "expected": procs * steps * 10,
        "read_s": read_s,
        "dropped": sum(s.dropped for s in info.streams),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--procs", type=int, default=8)
    parser.add_argument("--steps", type=int, default=20_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for steps in (args.steps, args.steps * 5):
            r = launch(args.procs, steps, Path(tmp))
            print(f"{args.procs} processes x {steps} steps x 10 scalars")
            print(f"  wall {r['wall_s']:.2f} s (process start, import, log, finish)")
            print(f"  per process: log loop {r['log_s']:.2f} s, finish {r['finish_s']:.2f} s")
            print(
                f"  read back {r['points']} of {r['expected']} points in {r['read_s']:.2f} s;"
                f" dropped {r['dropped']}"
            )
            print(
                f"  peak RSS {r['peak_rss_mb']:.0f} MB; growth during logging "
                f"{r['rss_growth_mb']:.0f} MB"
            )


if __name__ == "__main__":
    main()
