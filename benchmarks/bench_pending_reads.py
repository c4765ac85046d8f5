"""What a read pays to merge the uploads not yet compacted (``rankwise.store.pending_view``).

A run of ``--ranks`` ranks has ``--stored`` seconds compacted and then ``--pending``
seconds of uploads waiting for the compactor (one upload a second per rank: a metrics
record of 50 values, console lines, heartbeats and system samples, as
``bench_append.py``). Printed, each the median of ``--repeats`` (wall-clock, this
process alone):

* the band of one metric (every rank's pending points, aggregated), the series of one
  rank, the cross-rank last values, the metric keys, the health strip's read and the run
  (its streams' folds: what each chart's read pays to learn the run): read from a store
  whose cache is cold (a new store object: the process's first read of the run), warm
  (nothing new since the last read), and after one more upload per rank (the read
  decodes only those);
* the memory the kept pending points take (``tracemalloc``, per pending upload);
* what the same first read cost when a read folded the run's pending uploads first
  (``store.compact([run])``, then the band): the write every read paid before.

The store's own compactor is held off (``RANKWISE_COMPACT_EVERY``, ``COMPACT_POINTS``)
so that what is pending stays pending while it is read.

    python benchmarks/bench_pending_reads.py [--ranks 1000] [--stored 60] [--pending 10]
        [--repeats 5] [--db sqlite|postgres]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_append import KEYS, second

from rankwise.stream import records as R
from rankwise.stream.identity import StreamId

P, RUN = "bench", "pending"


def _open(db: str, where: Path) -> Any:
    if db == "postgres":
        from rankwise.store.postgres import PostgresStore

        return PostgresStore(os.environ["RANKWISE_TEST_POSTGRES"], pool_size=2)
    from rankwise.store.sqlite import SQLiteStore

    return SQLiteStore(where / "bench.db")


def _upload(store: Any, keys: list[StreamId], seqs: list[int], n: int) -> None:
    """Second ``n`` of every rank, 64 ranks an ingest call."""
    uploads = []
    for r, k in enumerate(keys):
        recs = second(r, n, seqs[r])
        seqs[r] = recs[-1].seq
        uploads.append((k, recs))
    for a in range(0, len(uploads), 64):
        store.ingest(uploads[a : a + 64])


def _reads(store: Any) -> dict[str, float]:
    out = {}
    for name, fn in (
        ("band", lambda: store.band(P, RUN, KEYS[7])),
        ("series", lambda: store.series(P, RUN, KEYS[7], labels=["rank-0"])),
        ("last", lambda: store.cross_rank_last(P, RUN)),
        ("keys", lambda: store.metric_keys(P, RUN)),
        ("health", lambda: store.health_streams(P, RUN, window=60.0)),
        ("run", lambda: store.get_run(P, RUN)),
    ):
        t0 = time.perf_counter()
        fn()
        out[name] = time.perf_counter() - t0
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=1000)
    ap.add_argument("--stored", type=int, default=60)
    ap.add_argument("--pending", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--db", default="sqlite", choices=["sqlite", "postgres"])
    args = ap.parse_args()
    os.environ["RANKWISE_COMPACT_EVERY"] = "1e9"  # what is pending stays so while read
    from rankwise.store import compact as compaction

    compaction.COMPACT_POINTS = 1 << 62  # nor early, however many points are stored
    rows: dict[str, list[float]] = {}
    per_upload: list[float] = []
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory() as tmp:
            store = _open(args.db, Path(tmp))
            store.migrate()
            keys = [StreamId(P, RUN, f"rank-{r}", 0) for r in range(args.ranks)]
            store.ingest(
                [(k, [R.StreamStart(0, time.time(), P, RUN, k.label, 0, rank=r)])
                 for r, k in enumerate(keys)]
            )  # fmt: skip
            seqs = [0] * args.ranks
            for n in range(args.stored):
                _upload(store, keys, seqs, n)
            store.compact()
            for n in range(args.stored, args.stored + args.pending):
                _upload(store, keys, seqs, n)
            run = store._read(lambda tx: int(tx.one("SELECT id FROM runs")[0]))
            other = _open(args.db, Path(tmp))  # the same reads, to measure the memory
            tracemalloc.start()
            _reads(other)
            kept = tracemalloc.get_traced_memory()[0]
            tracemalloc.stop()
            other.close()
            per_upload.append(kept / (args.ranks * args.pending))
            reader = _open(args.db, Path(tmp))  # a cold cache: a process's first read
            cold = _reads(reader)
            warm = _reads(reader)
            _upload(store, keys, seqs, args.stored + args.pending)
            more = _reads(reader)
            t0 = time.perf_counter()
            store.compact([run])  # what a read did before: fold the run, then read
            store.band(P, RUN, KEYS[7])
            folded = time.perf_counter() - t0
            for label, got in (("cold", cold), ("warm", warm), ("one more upload", more)):
                for name, t in got.items():
                    rows.setdefault(f"{name} ({label})", []).append(t)
            rows.setdefault("band, folding first (before)", []).append(folded)
            reader.close()
            store.close()
    print(
        f"{args.ranks} ranks, {args.stored} s compacted, {args.pending} s pending "
        f"({args.ranks * args.pending:,} uploads), {args.db}, median of {args.repeats}:"
    )
    for name, ts in rows.items():
        print(f"  {name:34s} {statistics.median(ts) * 1e3:9.1f} ms")
    print(f"  kept pending points: {statistics.median(per_upload) / 1024:.2f} KiB per upload")


if __name__ == "__main__":
    main()
