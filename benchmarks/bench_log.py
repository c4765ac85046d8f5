"""Per-call cost of ``run.log()`` with 10 float scalars, against the floor.

The floor is what log() cannot avoid: copying the caller's dict and appending it to a
deque. Both are measured in the same process, interleaved in rounds, so machine noise
hits them alike. Every call is timed on its own (less the clock's own cost), so p99 shows
the calls that waited for the GIL while the writer thread encoded — in this tight loop
the writer is busier than in any training loop.

    python benchmarks/bench_log.py [--calls 200000]
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import tempfile
import time
from collections import deque

import rankwise


def per_call_ns(fn, data, calls: int) -> list[float]:  # type: ignore[no-untyped-def]
    """Each call timed on its own, less the cost of reading the clock twice."""
    clock = time.perf_counter_ns
    overhead = []
    for _ in range(10_000):
        t0 = clock()
        overhead.append(clock() - t0)
    base = statistics.median(overhead)
    out = [0.0] * calls
    for i in range(calls):
        t0 = clock()
        fn(data)
        out[i] = clock() - t0 - base
    return out


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    data = {f"metric_{i}": float(i) * 0.5 for i in range(10)}
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["RANKWISE_DIR"] = tmp
        run = rankwise.init(project="bench", settings={"max_queue": 10_000_000})
        sink: deque = deque()

        def floor(d):  # type: ignore[no-untyped-def]
            sink.append(dict(d))

        log = run.log
        results: dict[str, list[float]] = {"log": [], "floor": []}
        gc.disable()
        try:
            for _ in range(args.rounds):
                results["floor"] += per_call_ns(floor, data, args.calls)
                sink.clear()
                results["log"] += per_call_ns(log, data, args.calls)
        finally:
            gc.enable()
        t0 = time.perf_counter()
        run.finish()
        drain = time.perf_counter() - t0
        api = rankwise.Api(tmp)
        rows = len(api.run(run.id, project="bench").history())

    f50, f99 = pct(results["floor"], 0.5), pct(results["floor"], 0.99)
    l50, l99 = pct(results["log"], 0.5), pct(results["log"], 0.99)
    total = args.calls * args.rounds
    print(f"log() of 10 float scalars, {total} calls in {args.rounds} rounds")
    print(f"  floor (dict copy + deque append): p50 {f50 / 1000:.3f} us  p99 {f99 / 1000:.3f} us")
    print(f"  run.log():                        p50 {l50 / 1000:.3f} us  p99 {l99 / 1000:.3f} us")
    print(f"  p50 ratio log/floor: {l50 / f50:.2f}x")
    print(f"  finish() drained the queue in {drain:.2f} s; rows read back: {rows} of {total}")
    print(f"  mean of all batches: log {statistics.fmean(results['log']) / 1000:.3f} us")


if __name__ == "__main__":
    main()
