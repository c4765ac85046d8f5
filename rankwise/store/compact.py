"""The compactor: stored uploads (``rankwise.store.pending``) folded into series chunks
and the runs' aggregate blocks.

One compaction transaction takes the pending rows of up to ``STREAMS_PER_TX`` streams
and ``ROWS_PER_TX`` rows (all of each stream's rows, in id order, which is seq order: a
stream's uploads are stored under its row lock; a stream with more rows than that is
folded alone), appends each series' points of all of them at once
(``ingest.append_series``: one chunk rewrite for many uploads, which is the saving),
merges the metrics into their runs' aggregate blocks (``blocks.merge_blocks``) and
deletes the rows. Fold and delete commit together or not at all, so a process killed at
any point leaves each row either pending (folded again by the next compactor) or folded
and gone: never lost, never doubled.

One compactor at a time per database: SQLite's single writer (``BEGIN IMMEDIATE``, even
across processes) and on PostgreSQL a transaction-scoped advisory lock that each
compaction transaction takes first (``SQLStore._compact_lock``). A background thread per
store (``Compactor``) folds every ``RANKWISE_COMPACT_EVERY`` seconds (default 30); it
skips a round when another process holds the lock. Reads of a run's points merge that
run's pending rows in memory (``rankwise.store.pending_view``), so a value is readable as
soon as it is acknowledged, and a read never writes.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Sequence
from typing import Any

from .blocks import merge_blocks
from .chunks import Points
from .ingest import append_series
from .pending import Part, block_parts, join_parts
from .tx import Tx, marks

# Small transactions: on SQLite an ingest batch waits for the compaction transaction in
# progress (one writer), so one must stay short. 64 streams of 10 uploads each took
# 0.5-1.1 s at 1,000 ranks; 16 took 75-170 ms for the same CPU in all, and still kept the
# ingest's p90 over the pacer's target while a round ran, so the server asked uploaders
# for longer intervals (that cannot relieve compaction: it is per point and per series).
# With 4, the steady data lag p99 at 1,000 ranks halved (8.8 s against 18.7 s at the
# median of 6 alternating runs; benchmarks/README.md) for the same compaction CPU at 64
# ranks (bench_append.py).
STREAMS_PER_TX = 4
ROWS_PER_TX = 40
# Reads merge what is pending (``pending_view``), so the interval trades the store's CPU
# (a fold costs per series, whatever the uploads it takes: 0.54 ms per rank-second at
# 10 s, 0.39 at 30, bench_append.py at 64 ranks) against what reads merge and keep.
DEFAULT_EVERY = 30.0
# A round also starts once a process has stored this many points since the last one:
# what one fold takes stays bounded whatever the ingest rate (a fold of 10M points at once
# left the chunks' pages scattered among the freed ones: a 10M-point series then read 1.4
# to 3.4x slower than folded a million at a time, bench_series.py), and so does what
# reads merge and keep. 1,000 ranks logging 50 metrics a second reach it in 20 s.
COMPACT_POINTS = 1_000_000

_log = logging.getLogger("rankwise.compact")


def compact_streams(
    tx: Tx, runs: Sequence[int] | None = None, after: int = -1, limit: int = STREAMS_PER_TX
) -> tuple[int, int | None]:
    """Fold the pending rows of up to ``limit`` streams with ids above ``after`` (of
    ``runs``, default every run). Returns (rows folded, the last stream folded or None
    when there was none)."""
    where, params = "stream > ?", [after]
    if runs is not None:
        where += f" AND run IN ({marks(len(runs))})"
        params += list(runs)
    streams: list[int] = []
    rows_in = 0
    for stream, count in tx.all(
        f"SELECT stream, COUNT(*) FROM upload_blocks WHERE {where} GROUP BY stream "
        "ORDER BY stream LIMIT ?",
        [*params, limit],
    ):
        if streams and rows_in + int(count) > ROWS_PER_TX:
            break
        streams.append(int(stream))
        rows_in += int(count)
    if not streams:
        return 0, None
    rows = tx.all(
        f"SELECT id, run, stream, data FROM upload_blocks WHERE stream IN ({marks(len(streams))}) "
        "ORDER BY id",
        streams,
    )
    per_stream: dict[int, dict[int, list[Part]]] = {}
    aggregated: dict[int, bool] = {}
    run_of: dict[int, int] = {}
    for _, run, stream, data in rows:
        into = per_stream.setdefault(int(stream), {})
        run_of[int(stream)] = int(run)
        for sid, agg, part in block_parts(bytes(data)):
            into.setdefault(sid, []).append(part)
            aggregated[sid] = agg
    per_run: dict[int, dict[int, list[Points]]] = {}
    for stream in sorted(per_stream):
        shared: dict[tuple[int, ...], Any] = {}
        points = {sid: join_parts(parts, shared) for sid, parts in per_stream[stream].items()}
        append_series(tx, stream, points)
        into_run = per_run.setdefault(run_of[stream], {})
        for sid, p in points.items():
            if aggregated[sid]:
                into_run.setdefault(sid, []).append(p)
    for run in sorted(per_run):
        if per_run[run]:
            merge_blocks(tx, run, per_run[run])
    ids = [(int(r[0]),) for r in rows]
    tx.many("DELETE FROM upload_blocks WHERE id = ?", ids)
    _pause_for_tests()
    return len(rows), streams[-1]


def _pause_for_tests() -> None:
    """``RANKWISE_TEST_COMPACT_PAUSE=<file>``: before committing, create ``<file>`` and
    sleep (a fault test SIGKILLs the process there). Never set in production."""
    where = os.environ.get("RANKWISE_TEST_COMPACT_PAUSE")
    if where:
        import time
        from pathlib import Path

        Path(where).touch()
        time.sleep(3600)


def compact_every() -> float:
    raw = os.environ.get("RANKWISE_COMPACT_EVERY", "")
    try:
        every = float(raw) if raw else DEFAULT_EVERY
    except ValueError:
        _log.warning(
            "RANKWISE_COMPACT_EVERY=%r is not a number of seconds: using %g", raw, DEFAULT_EVERY
        )
        every = DEFAULT_EVERY
    return max(every, 0.05)


class Compactor:
    """A daemon thread that calls ``fold()`` every ``every`` seconds until ``stop()``,
    or sooner once this process has stored ``COMPACT_POINTS`` points since the last
    round (``added``). ``fold`` errors are logged and retried next round (the database
    may be restarting); they never reach an ingest."""

    def __init__(self, fold: Callable[[], int], every: float) -> None:
        self._fold = fold
        self._every = every
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._added = 0
        self._thread = threading.Thread(target=self._run, name="rankwise-compactor", daemon=True)
        self._thread.start()

    def added(self, points: int) -> None:
        """``points`` more were stored pending (an ingest's count, approximate)."""
        self._added += points
        if self._added >= COMPACT_POINTS:
            self._wake.set()

    def _run(self) -> None:
        while True:
            self._wake.wait(self._every)
            if self._stop.is_set():
                return
            self._wake.clear()
            self._added = 0
            try:
                self._fold()
            except Exception as exc:  # a store going away or restarting: next round
                if self._stop.is_set():
                    return
                _log.warning("compaction failed, retrying in %.0f s: %r", self._every, exc)

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout=60)
