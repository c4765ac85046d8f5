"""Per-call cost of ``run.log()`` with 10 float scalars, against the floor.

The floor is what log() cannot avoid: copying the caller's dict and appending it to a
deque. Both are measured in the same process, interleaved in rounds, so machine noise
hits them alike. Every call is timed on its own (less the clock's own cost), so p99 shows
the calls that waited for the GIL while the writer thread encoded.

Two settings are measured. With the writer idle during timing (it drains at finish(),
timed separately), the figures are the training thread's own cost. With the writer
draining concurrently, this tight loop keeps it busier than any training loop would, so
its GIL hand-offs and cache traffic land on the timed calls: an upper bound.

``--flush-interval 0.25 0.1 0.05`` repeats the concurrent setting with each writer wake-up
interval (the SIGKILL loss window, README "What a SIGKILL can lose") and prints each one's
stream bytes per call, so the cost of a shorter default can be read off one run.

With ``--paced RATE`` it instead logs RATE calls a second (a training loop's pace, where
a shorter interval means more, smaller frames) for ``--seconds`` per interval, and prints
the process's CPU time per wall second and the stream bytes per call.

    python benchmarks/bench_log.py [--calls 200000] [--flush-interval 0.25 0.05]
    python benchmarks/bench_log.py --paced 1000 --flush-interval 0.25 0.05 0.25 0.05
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


def measure(
    data: dict[str, float],
    calls: int,
    rounds: int,
    writer_idle: bool,
    flush_interval: float | None = None,
) -> None:
    """Interleaved rounds of the floor and of log(); prints figures for one setting."""
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["RANKWISE_DIR"] = tmp
        # A bound no round reaches: the writer-idle rounds queue every call.
        opts: dict[str, object] = {"max_queue_bytes": 2**40, "stall_timeout": 0}
        if writer_idle:
            # The writer sleeps through the measurement and drains at finish(): what is
            # timed is the training thread's own cost; the writer's is timed at finish.
            opts.update(flush_interval=3600.0, heartbeat_interval=3600.0)
        elif flush_interval is not None:
            opts.update(flush_interval=flush_interval)
        run = rankwise.init(project="bench", settings=opts, system=False, console="off")
        sink: deque[dict[str, float]] = deque()

        def floor(d: dict[str, float]) -> None:
            sink.append(dict(d))

        results: dict[str, list[float]] = {"log": [], "floor": []}
        ratios = []
        gc.disable()
        try:
            for _ in range(rounds):
                floor_ns = per_call_ns(floor, data, calls)
                sink.clear()
                log_ns = per_call_ns(run.log, data, calls)
                ratios.append(statistics.median(log_ns) / statistics.median(floor_ns))
                results["floor"] += floor_ns
                results["log"] += log_ns
        finally:
            gc.enable()
        t0 = time.perf_counter()
        run.finish()
        drain = time.perf_counter() - t0
        rows = len(rankwise.Api(tmp).run(run.id, project="bench").history())
        size = run.path.stat().st_size if run.path is not None else 0

    f50, f99 = pct(results["floor"], 0.5), pct(results["floor"], 0.99)
    l50, l99 = pct(results["log"], 0.5), pct(results["log"], 0.99)
    total = calls * rounds
    what = "writer idle during timing" if writer_idle else "writer draining concurrently"
    if flush_interval is not None:
        what += f", flush_interval {flush_interval:g} s"
    print(f"log() of 10 float scalars, {total} calls in {rounds} rounds ({what})")
    print(f"  floor (dict copy + deque append): p50 {f50 / 1000:.3f} us  p99 {f99 / 1000:.3f} us")
    print(f"  run.log():                        p50 {l50 / 1000:.3f} us  p99 {l99 / 1000:.3f} us")
    per_round = ", ".join(f"{r:.2f}" for r in ratios)
    print(f"  p50 ratio log/floor per round: {per_round} (median {statistics.median(ratios):.2f}x)")
    if writer_idle:
        print(
            f"  writer thread: {drain / total * 1e6:.2f} us per call (drained {total} in "
            f"{drain:.2f} s at finish)"
        )
    print(f"  rows read back: {rows} of {total}; stream file {size / total:.1f} bytes per call")


def paced(data: dict[str, float], rate: float, seconds: float, flush_interval: float) -> None:
    """log() at ``rate`` calls a second; the CPU the whole process spent doing it."""
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["RANKWISE_DIR"] = tmp
        opts: dict[str, object] = {"stall_timeout": 0, "flush_interval": flush_interval}
        run = rankwise.init(project="bench", settings=opts, system=False, console="off")
        calls = int(rate * seconds)
        cpu0, t0 = time.process_time(), time.perf_counter()
        for i in range(calls):
            run.log(data)
            ahead = t0 + (i + 1) / rate - time.perf_counter()
            if ahead > 0:
                time.sleep(ahead)
        run.finish()
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
        size = run.path.stat().st_size if run.path is not None else 0
    print(
        f"paced {rate:g} calls/s for {wall:.1f} s, flush_interval {flush_interval:g} s: "
        f"CPU {cpu / wall * 100:.2f}% of a core, {size / calls:.1f} stream bytes per call"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--flush-interval",
        type=float,
        nargs="+",
        default=None,
        help="only the concurrent setting, once per writer wake-up interval given",
    )
    parser.add_argument("--paced", type=float, default=None, help="log() calls per second")
    parser.add_argument("--seconds", type=float, default=5.0, help="per --paced measurement")
    args = parser.parse_args()
    data = {f"metric_{i}": float(i) * 0.5 for i in range(10)}
    if args.paced:
        for interval in args.flush_interval or [0.25]:
            paced(data, args.paced, args.seconds, interval)
        return
    if args.flush_interval:
        for interval in args.flush_interval:
            measure(data, args.calls, args.rounds, writer_idle=False, flush_interval=interval)
        return
    measure(data, args.calls, args.rounds, writer_idle=True)
    measure(data, args.calls, args.rounds, writer_idle=False)


if __name__ == "__main__":
    main()
