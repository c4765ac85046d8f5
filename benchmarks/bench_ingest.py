"""Ingest throughput of the stores, in points (metric values) per second.

A shared-mode run of R ranks × S steps × M scalars per ``log()``, cut into upload-sized
batches of B records per stream: one ``ingest`` call carries the next batch of every rank
(as the local tailer can), or with ``--per-stream`` one rank's batch (as one HTTP upload
does). Two figures per store:

* ``store.ingest`` alone (records already decoded), and
* frames → store: ``frames.scan`` of the uploaded bytes, then ``ingest``.

Records are built before the clock starts. Each round uses a fresh database; medians of
the rounds are printed. PostgreSQL is measured when ``RANKWISE_TEST_POSTGRES`` is set
(in a schema of its own, dropped afterwards).

    python benchmarks/bench_ingest.py [--ranks 8] [--steps 6250] [--metrics 20]
                                      [--batch 500] [--rounds 3] [--per-stream]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rankwise.store.sql import SQLStore
from rankwise.stream import records as R
from rankwise.stream.frames import MAGIC, encode_frame, scan
from rankwise.stream.identity import StreamId


def build(ranks: int, steps: int, metrics: int) -> dict[StreamId, list[R.AnyRecord]]:
    t0 = 1_700_000_000.0
    out: dict[StreamId, list[R.AnyRecord]] = {}
    for rank in range(ranks):
        key = StreamId("bench", "ingest", f"rank-{rank}", 0)
        recs: list[R.AnyRecord] = [
            R.StreamStart(seq=0, time=t0, project=key.project, run_id=key.run_id,
                          label=key.label, incarnation=0, rank=rank, world_size=ranks)
        ]  # fmt: skip
        for s in range(steps):
            values = {f"train/m{i}": (s * 0.001 + i + rank) * 1.0001 for i in range(metrics)}
            recs.append(R.Metrics(seq=s + 1, time=t0 + s * 0.01, step=s, values=values))
        out[key] = recs
    return out


def batches(
    streams: dict[StreamId, list[R.AnyRecord]], size: int
) -> list[list[tuple[StreamId, list[R.AnyRecord]]]]:
    """One ingest call per round of uploads: the next ``size`` records of every rank."""
    longest = max(len(r) for r in streams.values())
    return [
        [(k, recs[a : a + size]) for k, recs in streams.items() if recs[a : a + size]]
        for a in range(0, longest, size)
    ]


@contextmanager
def sqlite_store() -> Iterator[SQLStore]:
    from rankwise.store.sqlite import SQLiteStore

    with tempfile.TemporaryDirectory() as d, SQLiteStore(Path(d) / "bench.db") as st:
        st.migrate()
        yield st


@contextmanager
def postgres_store(dsn: str) -> Iterator[SQLStore]:
    import psycopg

    from rankwise.store.postgres import PostgresStore

    schema = f"rw_bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        with PostgresStore(
            psycopg.conninfo.make_conninfo(dsn, options=f"-csearch_path={schema}")
        ) as st:
            st.migrate()
            yield st
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def measure(
    open_store: Callable[[], Any], calls: list[Any], points: int, decode: bool, rounds: int
) -> tuple[float, float]:
    """Median points/s by wall clock, and per CPU-second of this process (which the
    other work on a shared machine does not inflate; PostgreSQL's own CPU is not in it)."""
    walls, cpus = [], []
    for _ in range(rounds):
        with open_store() as st:
            t, c = time.perf_counter(), time.process_time()
            for call in calls:
                if decode:
                    call = [(k, scan(body).records) for k, body in call]
                st.ingest(call)
            walls.append(points / (time.perf_counter() - t))
            cpus.append(points / (time.process_time() - c))
    return statistics.median(walls), statistics.median(cpus)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--steps", type=int, default=6250)
    ap.add_argument("--metrics", type=int, default=20)
    ap.add_argument("--batch", type=int, default=500, help="records per stream per upload")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument(
        "--per-stream", action="store_true", help="one stream per ingest call, as HTTP uploads"
    )
    args = ap.parse_args()
    streams = build(args.ranks, args.steps, args.metrics)
    points = args.ranks * args.steps * args.metrics
    calls = batches(streams, args.batch)
    if args.per_stream:
        calls = [[one] for call in calls for one in call]
    bodies = [[(k, MAGIC + encode_frame(recs)) for k, recs in call] for call in calls]
    print(
        f"{args.ranks} ranks x {args.steps} steps x {args.metrics} scalars = {points:,} points, "
        f"{args.batch} records per stream, {len(calls)} ingest calls; median of "
        f"{args.rounds} rounds"
    )
    stores: list[tuple[str, Callable[[], Any]]] = [("sqlite", sqlite_store)]
    dsn = os.environ.get("RANKWISE_TEST_POSTGRES")
    if dsn:
        stores.append(("postgres", lambda: postgres_store(dsn)))
    for name, opener in stores:
        for label, work, decode in (
            ("store.ingest", calls, False),
            ("frames -> store", bodies, True),
        ):
            wall, cpu = measure(opener, work, points, decode, args.rounds)
            print(f"{name:9s} {label:16s} {wall:12,.0f} points/s   ({cpu:,.0f} per CPU-second)")
    if not dsn:
        print("postgres  skipped: set RANKWISE_TEST_POSTGRES=postgresql://... to measure it")


if __name__ == "__main__":
    main()
