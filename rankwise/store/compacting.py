"""``Compacting``: the store's side of compaction (``rankwise.store.compact``).

* ``compact()`` folds every pending upload (all streams, in transactions of at most
  ``STREAMS_PER_TX`` streams each); the background ``Compactor`` thread, started by a
  store's first ingest, calls it every ``RANKWISE_COMPACT_EVERY`` seconds.
* ``_read_settled(project, run_id, fn)``: how every read of a run's points runs; it
  first folds that run's pending uploads (when there are any: one indexed probe otherwise), so
  a read never misses an acknowledged value.
* ``_compact_lock(tx, wait)``: one compactor at a time per database. SQLite's writer
  lock already is one; PostgreSQL overrides it with an advisory transaction lock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

from .compact import Compactor, compact_every, compact_streams
from .pending import pending_runs
from .sqlbase import SQLBase
from .tx import Tx

T = TypeVar("T")
_starting = threading.Lock()
_MAX_TX = 100_000  # a bound on one call's transactions (never reached in practice)


class Compacting(SQLBase):
    """See the module docstring."""

    _compactor: Compactor | None = None

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

    def _read_settled(self, project: str, run_id: str, fn: Callable[[Tx], T]) -> T:
        """``fn`` in a read transaction that first checks for the run's pending uploads;
        when there are some, they are folded first and ``fn`` runs in a new one (see the
        module docstring). The usual case, nothing pending, is one transaction."""
        if not self._pending_kept():
            return self._read(fn)

        def guarded(tx: Tx) -> tuple[bool, Any]:
            row = tx.one("SELECT id FROM runs WHERE project = ? AND run_id = ?", (project, run_id))
            if row is not None and pending_runs(tx, [int(row[0])]):
                return False, int(row[0])
            return True, fn(tx)

        done, got = self._read(guarded)
        if done:
            return cast(T, got)
        self.compact([got])
        return self._read(fn)

    def _settle_in(self, tx: Tx, runs: Sequence[int]) -> None:
        """Within the write transaction ``tx``: fold the pending uploads of ``runs``."""
        if not runs or not self._pending_kept() or not pending_runs(tx, runs):
            return
        self._compact_lock(tx, True)
        after = -1
        for _ in range(_MAX_TX):
            _, last = compact_streams(tx, runs, after)
            if last is None:
                return
            after = last

    def start_compactor(self) -> None:
        """Start the background compactor (idempotent; ``close`` stops it)."""
        if self._compactor is not None:
            return
        with _starting:
            if self._compactor is None:
                self._compactor = Compactor(lambda: self.compact(wait=False), compact_every())

    def _stop_compactor(self) -> None:
        got, self._compactor = self._compactor, None
        if got is not None:
            got.stop()
