"""The server's trash sweep: purge runs deleted longer ago than the retention, and finish
purges a crash interrupted.

At start, and every ``ServerSettings.trash_sweep_every`` seconds after, one daemon
thread: ``Store.collect`` rolls every journalled purge forward (its rows are gone; the
blobs nothing references are deleted, then the journal row), then the runs in the trash
for longer than ``trash_retention_days`` are purged as ``retention`` in the audit log.
Several server processes may sweep at once: a purge takes each run's row under lock and
skips a run already purged, and collecting a blob twice deletes it once.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from ..store.trash import DAY

_logger = logging.getLogger("rankwise.server")


def sweep(store: Any, blobs: Any, retention_days: float, now: float | None = None) -> int:
    """One pass; returns how many runs were purged."""
    store.collect(blobs)
    now = time.time() if now is None else now
    by_project: dict[str, list[str]] = {}
    for project, run in store.expired_runs(now - retention_days * DAY):
        by_project.setdefault(project, []).append(run)
    purged = 0
    for project, runs in by_project.items():
        purged += len(store.purge_runs(project, runs, "retention", blobs))
    if purged:
        _logger.info("trash: purged %d runs deleted over %g days ago", purged, retention_days)
    return purged


class TrashSweep:
    """The sweep on its own daemon thread; ``stop()`` ends it."""

    def __init__(self, store: Any, blobs: Any, retention_days: float, every: float) -> None:
        self.store, self.blobs = store, blobs
        self.retention_days, self.every = retention_days, every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rankwise-trash", daemon=True)

    def start(self) -> TrashSweep:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                sweep(self.store, self.blobs, self.retention_days)
            except Exception as exc:  # the database away: try again next time
                _logger.warning("trash sweep failed (next try in %g s): %r", self.every, exc)
            self._stop.wait(self.every)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
