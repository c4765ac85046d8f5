"""Console lines at scale: ingest a run of N lines (default 1M) from S ranks, then time
what the Logs tab asks for.

Lines arrive as the SDK sends them (``Console`` records of up to 100 lines, one per
second per rank, with per-line times), interleaved across ranks in upload-sized batches.
Then each query is repeated and its median (p50) and p90 printed:

* the newest page (the live tail), with and without counting the matching lines;
* a page at an offset (a scrollbar dragged to 10 %, 50 %, 99 %) and the page after a line;
* the page at a time (jump to a time), with its offset;
* one rank's newest page and a page deep into it; stderr only;
* a text search: a frequent word (stops at the first page) and a rare one (scans).

    python benchmarks/bench_console.py [--lines 1000000] [--ranks 8] [--repeats 15]

PostgreSQL is measured too when ``RANKWISE_TEST_POSTGRES`` is set (in a schema of its own).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

from bench_ingest import postgres_store, sqlite_store

from rankwise.store.sql import SQLStore
from rankwise.store.types import ConsoleQuery
from rankwise.stream import records as R
from rankwise.stream.identity import StreamId

T0 = 1_700_000_000.0
WORDS = ["loss", "grad_norm", "lr", "tokens/s", "epoch", "samples", "throughput", "eval"]


def streams(lines: int, ranks: int) -> Iterator[list[tuple[StreamId, list[R.AnyRecord]]]]:
    """Upload batches: every rank's next ~10 s of output, ranks interleaved."""
    rng = random.Random(0)
    keys = [StreamId("bench", "console", f"rank-{r}", 0) for r in range(ranks)]
    seq = dict.fromkeys(keys, 1)
    yield [
        (
            k,
            [
                R.StreamStart(
                    seq=0,
                    time=T0,
                    project=k.project,
                    run_id=k.run_id,
                    label=k.label,
                    incarnation=0,
                    rank=r,
                    world_size=ranks,
                )
            ],
        )
        for r, k in enumerate(keys)
    ]
    per_rank = lines // ranks
    per_record = 100
    done = 0
    second = 0
    while done < per_rank:
        batch = []
        for r, k in enumerate(keys):
            recs: list[R.AnyRecord] = []
            for s in range(second, second + 10):
                n = min(per_record, per_rank - done - (s - second) * per_record)
                if n <= 0:
                    break
                base = done + (s - second) * per_record
                err = rng.random() < 0.1
                text = [
                    f"[rank {r}] step {base + i} {rng.choice(WORDS)}={rng.random():.5f}"
                    + (" NCCL WARN timeout" if (base + i) % 50_000 == 7 else "")
                    for i in range(n)
                ]
                times = [T0 + s + i / n + r * 1e-4 for i in range(n)]
                recs.append(
                    R.Console(
                        seq=seq[k],
                        time=times[-1],
                        stream="stderr" if err else "stdout",
                        lines=text,
                        times=times,
                    )
                )
                seq[k] += 1
            batch.append((k, recs))
        done += 10 * per_record
        second += 10
        yield batch


def timed(fn: Callable[[], Any], repeats: int) -> tuple[float, float, Any]:
    times, out = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    times.sort()
    return statistics.median(times), times[int(0.9 * (len(times) - 1))], out


def run(name: str, st: SQLStore, lines: int, ranks: int, repeats: int) -> None:
    t = time.perf_counter()
    cpu = time.process_time()
    for batch in streams(lines, ranks):
        st.ingest(batch)
    wall, cpu = time.perf_counter() - t, time.process_time() - cpu
    page = st.console("bench", "console", ConsoleQuery(limit=1))
    assert page is not None and page.total is not None
    total = page.total
    print(
        f"\n{name}: {total:,} lines from {ranks} ranks ingested in {wall:.1f} s "
        f"({total / wall:,.0f} lines/s; {total / cpu:,.0f} per CPU-second of this process)"
    )
    mid = st.console("bench", "console", ConsoleQuery(offset=total // 2, limit=1, count=False))
    assert mid is not None
    pivot, at = mid.lines[0].id, mid.lines[0].time
    queries = {
        "tail, 200 lines, counted": ConsoleQuery(limit=200),
        "tail, 200 lines, not counted": ConsoleQuery(limit=200, count=False),
        "offset 10 %": ConsoleQuery(offset=total // 10, count=False),
        "offset 50 %": ConsoleQuery(offset=total // 2, count=False),
        "offset 99 %": ConsoleQuery(offset=total * 99 // 100, count=False),
        "after a line (keyset)": ConsoleQuery(after=pivot, count=False),
        "at a time, with offset": ConsoleQuery(at=at),
        "one rank, tail, counted": ConsoleQuery(labels=["rank-3"]),
        "one rank, offset 90 %": ConsoleQuery(
            labels=["rank-3"], offset=total // ranks * 9 // 10, count=False
        ),
        "two ranks, tail, counted": ConsoleQuery(labels=["rank-1", "rank-2"]),
        "stderr, tail, counted": ConsoleQuery(stream="stderr"),
        "search frequent, first page": ConsoleQuery(q="grad_norm", offset=0, count=False),
        "search frequent, counted": ConsoleQuery(q="grad_norm"),
        "search rare, counted": ConsoleQuery(q="nccl warn"),
    }
    print(f"{'query':34} {'p50 ms':>9} {'p90 ms':>9} {'lines':>6} {'total':>10}")
    for label, q in queries.items():
        p50, p90, got = timed(lambda q=q: st.console("bench", "console", q), repeats)
        tot = "" if got.total is None else f"{got.total:,}"
        print(f"{label:34} {p50 * 1e3:9.2f} {p90 * 1e3:9.2f} {len(got.lines):6} {tot:>10}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=15)
    args = ap.parse_args()
    with sqlite_store() as st:
        run("SQLite", st, args.lines, args.ranks, args.repeats)
    dsn = os.environ.get("RANKWISE_TEST_POSTGRES")
    if dsn:
        with postgres_store(dsn) as st:
            run("PostgreSQL", st, args.lines, args.ranks, args.repeats)


if __name__ == "__main__":
    main()
