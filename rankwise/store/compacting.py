"""``Compacting``: the store's side of compaction (``rankwise.store.compact``).

* ``compact()`` folds every pending upload (all streams, in transactions of at most
  ``STREAMS_PER_TX`` streams each); the background ``Compactor`` thread, started by a
  store's first ingest, calls it every ``RANKWISE_COMPACT_EVERY`` seconds.
* ``_read_merged(project, run_id, fn)``: how every read of a run's points runs; ``fn``
  gets the run's pending uploads as its snapshot sees them and merges them in memory
  (``rankwise.store.pending_view``), so a read never misses an acknowledged value and
  never writes.
* ``_compact_lock(tx, wait)``: one compactor at a time per database. SQLite's writer
  lock already is one; PostgreSQL overrides it with an advisory transaction lock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TypeVar

from .compact import Compactor, compact_every, compact_streams
from .migrations import PENDING
from .pending_view import EMPTY, BlockCache, PendingView
from .sqlbase import SQLBase
from .tx import Tx, marks, schema_in

T = TypeVar("T")
_starting = threading.Lock()
_MAX_TX = 100_000  # a bound on one call's transactions (never reached in practice)


def keeps_pending(tx: Tx) -> bool:
    """Whether the database's schema keeps uploads whole (``upload_blocks``: version
    ``migrations.PENDING`` on)."""
    return schema_in(tx) >= PENDING


class Compacting(SQLBase):
    """See the module docstring."""

    _compactor: Compactor | None = None
    _blocks: BlockCache | None = None

    def _compact_lock(self, tx: Tx, wait: bool) -> bool:
        """Take this database's compaction lock for ``tx`` (False: held elsewhere and
        ``wait`` is False)."""
        return True

    def compact(self, runs: Sequence[int] | None = None, wait: bool = True) -> int:
        """Fold the pending uploads (of the run ids ``runs``, default all) into series
        chunks and aggregate blocks; returns how many were folded. ``wait=False``: give
        up at once when another process is compacting (the background thread's way)."""
        if not self._pending_kept():
            return 0
        total = 0
        after = -1
        for _ in range(_MAX_TX):

            def one(tx: Tx, after: int = after) -> tuple[int, int | None]:
                if not self._compact_lock(tx, wait):
                    return 0, None
                return compact_streams(tx, runs, after)

            n, last = self._write(one)
            total += n
            if last is None:
                break
            after = last
        return total

    def _read_merged(self, project: str, run_id: str, fn: Callable[[Tx, PendingView], T]) -> T:
        """``fn(tx, pending)`` in one read transaction: ``pending`` holds the run's uploads
        not yet compacted, as that snapshot sees them (``rankwise.store.pending_view``),
        for ``fn`` to merge with what it reads of the chunks and aggregate blocks. A read
        never writes."""
        if not self._pending_kept():
            return self._read(lambda tx: fn(tx, EMPTY))

        def read(tx: Tx) -> T:
            row = tx.one("SELECT id FROM runs WHERE project = ? AND run_id = ?", (project, run_id))
            return fn(tx, EMPTY if row is None else self._pending_of(tx, int(row[0])))

        return self._read(read)

    def _pending_kept_in(self, tx: Tx) -> bool:
        """``_pending_kept()`` asked inside ``tx`` (a write may not open a read)."""
        return not getattr(self, "_direct", False) or keeps_pending(tx)

    def _pending_of(self, tx: Tx, run: int) -> PendingView:
        """The run's pending uploads in ``tx``'s snapshot (decoded once per process)."""
        if self._blocks is None:
            with _starting:
                if self._blocks is None:
                    self._blocks = BlockCache()
        return PendingView.of_run(tx, run, self._blocks)

    def _pending_runs_of(self, tx: Tx, runs: Sequence[int]) -> dict[int, PendingView]:
        """``_pending_of`` of each of ``runs`` that has pending uploads."""
        if not runs or not self._pending_kept_in(tx):
            return {}
        out: dict[int, PendingView] = {}
        ids = sorted(set(runs))
        for a in range(0, len(ids), 500):
            part = ids[a : a + 500]
            for (run,) in tx.all(
                f"SELECT DISTINCT run FROM upload_blocks WHERE run IN ({marks(len(part))})", part
            ):
                out[int(run)] = self._pending_of(tx, int(run))
        return out

    def start_compactor(self) -> None:
        """Start the background compactor (idempotent; ``close`` stops it)."""
        if self._compactor is not None:
            return
        with _starting:
            if self._compactor is None:
                self._compactor = Compactor(lambda: self.compact(wait=False), compact_every())

    def _stored_pending(self, points: int) -> None:
        """An ingest stored ``points`` pending: the compactor may start a round early."""
        got = self._compactor
        if got is not None:
            got.added(points)

    def _stop_compactor(self) -> None:
        got, self._compactor = self._compactor, None
        if got is not None:
            got.stop()
