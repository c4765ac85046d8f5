"""The store's CPU per rank-second upload, independent of the machine's load.

What one server process spends in ``Store.ingest`` for the records one rank writes in
one second under the load harness (``tests/helpers/loadsim.py``: a metrics record of 50 values, a
console line every 2 s, a heartbeat every 5 s, a system sample every 10 s), applied as
the group committer applies them: ``--batch`` ranks' uploads per ``ingest`` call. The
figure is this process's CPU seconds (user + system, ``time.process_time``) divided by
the rank-seconds applied: unlike wall-clock time it does not grow when other work shares
the machine, so before/after pairs can be taken on a busy machine.

The cost depends on how full each series' open chunk is (0 to ``MERGE_BELOW`` points),
so the run covers ``--seconds`` uploads per rank (default: a whole cycle of 1,100).

    python benchmarks/bench_append.py [--ranks 8] [--seconds 1100] [--batch 8]
        [--every 1] [--db sqlite|postgres] [--profile 25]

``--every K`` sends K seconds of a rank's records per upload, as an uploader does when
the server asks it to post every K seconds (``rankwise.server.pacing``).

``--compact-every C`` (default 30, the server's ``RANKWISE_COMPACT_EVERY``): from schema
15 on, an upload is stored whole and the compactor folds the pending uploads into the
series every C seconds (``rankwise.store.compact``); the benchmark calls
``store.compact()`` every C simulated seconds and once at the end, and counts its CPU
too (the background thread is off). A store without ``compact`` (the code before it)
appends to the series in every ingest, so the option changes nothing there.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import tempfile
import time
from pathlib import Path
from typing import Any

from rankwise.stream import records as R
from rankwise.stream.identity import StreamId

METRICS = 50
KEYS = [f"train/m{j:02d}" for j in range(METRICS)]


def second(rank: int, n: int, seq: int) -> list[Any]:
    """The records rank ``rank`` writes in second ``n``, from ``seq + 1``."""
    now = time.time()
    values = {k: rank + n * 1e-3 + j * 1e-6 for j, k in enumerate(KEYS)}
    recs: list[Any] = [R.Metrics(seq + 1, now, n, values)]
    if n % 2 == 0:
        recs.append(R.Console(seq + len(recs) + 1, now, "stdout", [f"step {n} ok"], [now]))
    if n % 5 == 0:
        recs.append(R.Heartbeat(seq + len(recs) + 1, now, n, 0))
    if n % 10 == 0:
        sample = {"node/cpu_percent": 50.0, "proc/rss_mb": 1000.0 + n}
        recs.append(R.System(seq + len(recs) + 1, now, sample))
    return recs


def run(
    store: Any,
    ranks: int,
    seconds: int,
    batch: int,
    prof: cProfile.Profile | None,
    every: int = 1,
    compact_every: int = 30,
) -> tuple[float, float]:
    """CPU seconds per rank-second over the run, and the compactor's part of them."""
    compact = getattr(store, "compact", None)
    keys = [StreamId("bench", "append", f"rank-{r}", 0) for r in range(ranks)]
    seqs = [0] * ranks
    store.ingest(
        [
            (k, [R.StreamStart(0, time.time(), "bench", "append", k.label, 0, rank=r)])
            for r, k in enumerate(keys)
        ]
    )
    if prof is not None:  # profile the writes where they run (SQLite: its writer thread)
        write = store._write

        def profiled(fn: Any) -> Any:
            def inner(tx: Any) -> Any:
                prof.enable()
                try:
                    return fn(tx)
                finally:
                    prof.disable()

            return write(inner)

        store._write = profiled
    cpu = folding = 0.0
    for n0 in range(0, seconds, every):
        uploads = []
        for r, k in enumerate(keys):
            recs = []
            for n in range(n0, min(seconds, n0 + every)):  # one upload: `every` seconds
                recs += second(r, n, seqs[r])
                seqs[r] = recs[-1].seq
            uploads.append((k, recs))
        for a in range(0, ranks, batch):
            part = uploads[a : a + batch]
            t0 = time.process_time()
            store.ingest(part)
            cpu += time.process_time() - t0
        done = min(seconds, n0 + every)
        if compact is not None and (done // compact_every > n0 // compact_every or done == seconds):
            t0 = time.process_time()
            compact()
            folding += time.process_time() - t0
    cpu += folding
    return cpu / (ranks * seconds), folding / (ranks * seconds)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--seconds", type=int, default=1100)
    ap.add_argument("--batch", type=int, default=8, help="uploads per ingest call")
    ap.add_argument(
        "--every", type=int, default=1, help="seconds of records per upload (server pacing)"
    )
    ap.add_argument("--compact-every", type=int, default=30, help="simulated seconds")
    ap.add_argument("--db", default="sqlite", choices=["sqlite", "postgres"])
    ap.add_argument("--profile", type=int, default=0, help="print the top N by cumtime")
    args = ap.parse_args()
    os.environ["RANKWISE_COMPACT_EVERY"] = "1e9"  # compaction runs where it is counted
    from rankwise.store import compact as compaction

    compaction.COMPACT_POINTS = 1 << 62  # nor early, however many points are stored
    prof = cProfile.Profile() if args.profile else None
    with tempfile.TemporaryDirectory() as tmp:
        if args.db == "sqlite":
            from rankwise.store.sqlite import SQLiteStore

            store: Any = SQLiteStore(Path(tmp) / "append.db")
            store.migrate()
            try:
                per, fold = run(
                    store,
                    args.ranks,
                    args.seconds,
                    args.batch,
                    prof,
                    args.every,
                    args.compact_every,
                )
            finally:
                store.close()
        else:
            from bench_load import pg_database

            from rankwise.store.postgres import PostgresStore

            with pg_database(os.environ["RANKWISE_TEST_POSTGRES"]) as dsn:  # a database of its own
                store = PostgresStore(dsn)
                store.migrate()
                try:
                    per, fold = run(
                        store,
                        args.ranks,
                        args.seconds,
                        args.batch,
                        prof,
                        args.every,
                        args.compact_every,
                    )
                finally:
                    store.close()
    print(
        f"{args.db}: {args.ranks} ranks x {args.seconds} s, {args.batch} uploads per call, "
        f"{args.every} s per upload: "
        f"{per * 1e3:.3f} ms CPU per rank-second (compaction every "
        f"{args.compact_every} s: {fold * 1e3:.3f} ms of it)"
    )
    if prof is not None:
        pstats.Stats(prof).sort_stats("tottime").print_stats(args.profile)


if __name__ == "__main__":
    main()
