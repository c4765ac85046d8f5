"""``SQLBase``: the typed seam every store mixin runs its SQL through.

``SQLStore`` is assembled from mixins by feature (``HealthReads``, ``MediaReads``,
``Tokens``, ``ArtifactWrites``, ``SavedViews``, ``Alerts``). Each one runs its SQL through
``_read``/``_write``, which only the concrete stores (``SQLiteStore``,
``PostgresStore``) implement. They inherit them from here, typed once, so a mixin's
``self._read(fn)`` returns what ``fn`` returns.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from .tx import Tx

T = TypeVar("T")


class SQLBase:
    """The transactions and settings the mixins share; see the module docstring."""

    dialect: str  # "sqlite" or "postgres": picks the DDL of a migration
    crash_timeout: float  # seconds without news before a running stream counts as crashed
    # Whether a stream's (host, pid) may be checked against this host's processes.
    local_pids: bool

    def _write(self, fn: Callable[[Tx], T]) -> T:
        """Run ``fn`` in a write transaction; commit when it returns."""
        raise NotImplementedError

    def _read(self, fn: Callable[[Tx], T]) -> T:
        """Run ``fn`` in a read-only snapshot."""
        raise NotImplementedError

    def _read_settled(self, project: str, run_id: str, fn: Callable[[Tx], T]) -> T:
        """``_read(fn)`` after folding the run's pending uploads
        (``rankwise.store.compacting``)."""
        raise NotImplementedError

    def _settle_in(self, tx: Tx, runs: Sequence[int]) -> None:
        """Within the write transaction ``tx``: fold the pending uploads of ``runs``."""
        raise NotImplementedError

    def _pending_kept(self) -> bool:
        """Whether the schema keeps uploads whole until compacted (version 15 on)."""
        raise NotImplementedError
