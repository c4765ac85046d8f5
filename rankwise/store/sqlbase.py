"""``SQLBase``: the typed seam every store mixin runs its SQL through.

``SQLStore`` is assembled from mixins by feature (``HealthReads``, ``MediaReads``,
``Tokens``, ``ArtifactWrites``, ``SavedViews``, ``Alerts``). Each one runs its SQL through
``_read``/``_write``, which only the concrete stores (``SQLiteStore``,
``PostgresStore``) implement. They inherit them from here, typed once, so a mixin's
``self._read(fn)`` returns what ``fn`` returns.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

from .tx import Tx, schema_in

if TYPE_CHECKING:
    from ..stream.fold import LocalPids
    from .fold_cache import FoldCache
    from .pending_view import PendingView

T = TypeVar("T")


class SQLBase:
    """The transactions and settings the mixins share; see the module docstring."""

    dialect: str  # "sqlite" or "postgres": picks the DDL of a migration
    crash_timeout: float  # seconds without news before a running stream counts as crashed
    # Whether a stream's (host, pid) may be checked against this host's processes.
    local_pids: LocalPids
    _folds: FoldCache  # each stream's last decoded fold (``fold_cache``)

    def _write(self, fn: Callable[[Tx], T]) -> T:
        """Run ``fn`` in a write transaction; commit when it returns."""
        raise NotImplementedError

    def _read(self, fn: Callable[[Tx], T]) -> T:
        """Run ``fn`` in a read-only snapshot."""
        raise NotImplementedError

    _trash_known = False  # whether migration 15 (deleted runs) is applied, once seen

    def _trash(self, tx: Tx) -> bool:
        """Whether the database has migration 15 (``runs.deleted_at``): a store read
        before ``migrate()`` (a test of an older schema) has no deleted runs."""
        if not self._trash_known:
            self._trash_known = schema_in(tx) >= 15
        return self._trash_known

    def live_runs_sql(self, tx: Tx, alias: str = "r") -> str:
        """`` AND <alias>.deleted_at IS NULL`` (runs not deleted: ``rankwise.store.trash``)
        where the schema has the column, else ``""``."""
        return f" AND {alias}.deleted_at IS NULL" if self._trash(tx) else ""

    def _read_merged(self, project: str, run_id: str, fn: Callable[[Tx, PendingView], T]) -> T:
        """``fn(tx, pending)`` in one read transaction, ``pending`` the run's uploads not
        yet compacted (``rankwise.store.compacting``)."""
        raise NotImplementedError

    def _pending_runs_of(self, tx: Tx, runs: Sequence[int]) -> dict[int, PendingView]:
        """The pending uploads of each of ``runs`` that has some, in ``tx``'s snapshot."""
        raise NotImplementedError

    def _pending_kept(self) -> bool:
        """Whether the schema keeps uploads whole until compacted (version 17 on)."""
        raise NotImplementedError
