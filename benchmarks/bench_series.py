"""Series query latency: one metric of one stream, 10k to 10M points, max_points=2000.

For each length N a fresh store is filled through ``ingest`` (a random walk with spikes,
one ``Metrics`` record per step, in upload-sized batches) and compacted (what the
server's compactor does within ``RANKWISE_COMPACT_EVERY``), then ``store.series`` is timed
for the whole series and for a zoomed window of a tenth of it, and, at the longest
length, for several ``max_points``. Medians (p50) and p90 of the repeats are printed
with the number of points returned: the cost should follow what a chart draws, not the
length of the series.

    python benchmarks/bench_series.py [--sizes 10000,100000,1000000,10000000]
                                      [--pg-sizes 10000,100000,1000000] [--repeats 30]

PostgreSQL is measured when ``RANKWISE_TEST_POSTGRES`` is set (in a schema of its own).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Iterator

import numpy as np
from bench_ingest import postgres_store, sqlite_store

from rankwise.store.sql import SQLStore
from rankwise.stream import records as R
from rankwise.stream.identity import StreamId

KEY = StreamId("bench", "series", "rank-0", 0)
T0 = 1_700_000_000.0


def batches(n: int, size: int = 20_000) -> Iterator[list[R.AnyRecord]]:
    rng = np.random.default_rng(0)
    yield [R.StreamStart(seq=0, time=T0, project=KEY.project, run_id=KEY.run_id,
                         label=KEY.label, incarnation=0)]  # fmt: skip
    for a in range(0, n, size):
        b = min(n, a + size)
        y = np.cumsum(rng.normal(0, 1, b - a)) + (a * 0.001)
        y[rng.integers(0, b - a, 3)] += 1e3  # spikes a chart must not lose
        ys, ts = y.tolist(), (T0 + np.arange(a, b) * 0.01).tolist()
        yield [
            R.Metrics(seq=s + 1, time=ts[s - a], step=s, values={"loss": ys[s - a]})
            for s in range(a, b)
        ]


def fill(st: SQLStore, n: int) -> float:
    spent = 0.0  # in ingest only, not in building the records
    for recs in batches(n):
        t = time.perf_counter()
        st.ingest([(KEY, recs)])
        spent += time.perf_counter() - t
    compact = getattr(st, "compact", None)
    if compact is not None:  # what the background compactor does within its interval:
        t = time.perf_counter()  # the reads below are of the stored series
        compact()
        spent += time.perf_counter() - t
    return spent


def timed(st: SQLStore, repeats: int, **kw: object) -> tuple[float, float, int]:
    times, points = [], 0
    for _ in range(repeats):
        t = time.perf_counter()
        (s,) = st.series(KEY.project, KEY.run_id, "loss", **kw)  # type: ignore[arg-type]
        times.append(time.perf_counter() - t)
        points = len(s.x)
    times.sort()
    return statistics.median(times) * 1e3, times[int(0.9 * (len(times) - 1))] * 1e3, points


def run(name: str, opener: object, sizes: list[int], repeats: int) -> None:
    for n in sizes:
        with opener() as st:  # type: ignore[operator]
            fill_s = fill(st, n)
            print(f"{name:8s} N={n:>11,}  (ingest took {fill_s:.1f} s)")
            cases: list[tuple[str, dict[str, object]]] = [
                ("whole series", {"max_points": 2000}),
                ("a tenth, zoomed", {"max_points": 2000, "lo": n * 0.45, "hi": n * 0.55}),
            ]
            if n == max(sizes):
                cases += [(f"max_points={m}", {"max_points": m}) for m in (500, 8000)]
            for label, kw in cases:
                p50, p90, pts = timed(st, repeats, **kw)
                print(f"    {label:18s} p50 {p50:7.2f} ms  p90 {p90:7.2f} ms  {pts:5d} points")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="10000,100000,1000000,10000000")
    ap.add_argument("--pg-sizes", default="10000,100000,1000000")
    ap.add_argument("--repeats", type=int, default=30)
    args = ap.parse_args()
    run("sqlite", sqlite_store, [int(s) for s in args.sizes.split(",")], args.repeats)
    dsn = os.environ.get("RANKWISE_TEST_POSTGRES")
    if dsn:
        sizes = [int(s) for s in args.pg_sizes.split(",")]
        run("postgres", lambda: postgres_store(dsn), sizes, args.repeats)
    else:
        print("postgres skipped: set RANKWISE_TEST_POSTGRES=postgresql://... to measure it")


if __name__ == "__main__":
    main()
