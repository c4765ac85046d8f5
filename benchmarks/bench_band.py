"""Aggregate band latency: a 64-rank run × 100,000 steps of one metric, max_points=2000.

Every rank logs ``loss`` at every step (6.4M points); the ranks are ingested the way
uploads arrive, batch by batch and rank by rank, so the per-step aggregates are merged
64 times over. ``store.band`` is then timed over the whole run, over a zoomed tenth, and
by wall time; p50 and p90 of the repeats are printed with the points returned.

    python benchmarks/bench_band.py [--ranks 64] [--steps 100000] [--repeats 30]

PostgreSQL is measured when ``RANKWISE_TEST_POSTGRES`` is set (in a schema of its own).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any

import numpy as np
from bench_ingest import postgres_store, sqlite_store

from rankwise.store.sql import SQLStore
from rankwise.stream import records as R
from rankwise.stream.identity import StreamId

T0 = 1_700_000_000.0


def fill(st: SQLStore, ranks: int, steps: int, batch: int = 10_000) -> float:
    rng = np.random.default_rng(0)
    keys = [StreamId("bench", "band", f"rank-{r}", 0) for r in range(ranks)]
    for r, k in enumerate(keys):
        start = R.StreamStart(seq=0, time=T0, project=k.project, run_id=k.run_id,
                              label=k.label, incarnation=0, rank=r, world_size=ranks)  # fmt: skip
        st.ingest([(k, [start])])
    spent = 0.0  # in ingest only, not in building the records
    for a in range(0, steps, batch):
        b = min(steps, a + batch)
        base = 2.0 * np.exp(-np.arange(a, b) / steps * 3)
        times = (T0 + np.arange(a, b) * 0.1).tolist()
        for r, k in enumerate(keys):
            ys = (base + rng.normal(0, 0.05, b - a) + r * 0.001).tolist()
            recs: list[R.AnyRecord] = [
                R.Metrics(seq=s + 1, time=times[s - a], step=s, values={"loss": ys[s - a]})
                for s in range(a, b)
            ]
            t = time.perf_counter()
            st.ingest([(k, recs)])
            spent += time.perf_counter() - t
    return spent


def timed(st: SQLStore, repeats: int, **kw: Any) -> tuple[float, float, int]:
    times, points = [], 0
    for _ in range(repeats):
        t = time.perf_counter()
        band = st.band("bench", "band", "loss", **kw)
        times.append(time.perf_counter() - t)
        points = len(band.x)
    times.sort()
    return statistics.median(times) * 1e3, times[int(0.9 * (len(times) - 1))] * 1e3, points


def run(name: str, opener: Any, ranks: int, steps: int, repeats: int) -> None:
    with opener() as st:
        fill_s = fill(st, ranks, steps)
        pts = ranks * steps
        print(
            f"{name:8s} {ranks} ranks x {steps:,} steps ({pts:,} points; ingest took "
            f"{fill_s:.1f} s, {pts / fill_s:,.0f} points/s, one rank's 10,000 records a call)"
        )
        cases = [
            ("whole run", {"max_points": 2000}),
            ("a tenth, zoomed", {"max_points": 2000, "lo": steps * 0.45, "hi": steps * 0.55}),
            ("x=time, whole", {"max_points": 2000, "x": "time"}),
        ]
        for label, kw in cases:
            p50, p90, n = timed(st, repeats, **kw)
            print(f"    {label:18s} p50 {p50:7.2f} ms  p90 {p90:7.2f} ms  {n:5d} points")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--steps", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=30)
    args = ap.parse_args()
    run("sqlite", sqlite_store, args.ranks, args.steps, args.repeats)
    dsn = os.environ.get("RANKWISE_TEST_POSTGRES")
    if dsn:
        run("postgres", lambda: postgres_store(dsn), args.ranks, args.steps, args.repeats)
    else:
        print("postgres skipped: set RANKWISE_TEST_POSTGRES=postgresql://... to measure it")


if __name__ == "__main__":
    main()
