"""Folded runs kept between reads while nothing of theirs changed (issue 26).

Folding a run (``rankwise.read.fold``) decodes every stream's fold: for 1,024 ranks that
is 40-75 ms of CPU, and the run page's first charts asked for it once per chart (each
band reads the run for its complete step and line), beside the run reply, ``/health``
and the stalls. A run that ended folds to the same ``RunInfo`` until one of its streams
takes a record, so the SQL store keeps the last fold of a few such runs here, each with
its *fingerprint*: the number of its acknowledged streams, the sum of their ids and the
sum of their acknowledged sequence numbers (every ingested batch raises one; a purged and
re-created run has new stream ids). A read checks the fingerprint (one indexed query) and
folds again when it differs.

A run with any stream still running is never kept: a running stream's state depends on
the time (a silent rank turns crashed), and such a run changes every second anyway.
Edits (name, tags, ...) are applied by the caller after the cache, on every read. The
one other writer of a stream's fold, a data migration, leaves the sequence numbers as
they were: ``SQLStore.migrate`` empties the cache (a server migrates before it serves).
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import msgspec

from ..wire.runs import RunInfo

Fingerprint = tuple[int, int, int]
FINGERPRINT_SQL = (
    "SELECT count(*), coalesce(sum(s.id), 0), coalesce(sum(s.acked_seq), 0) "
    "FROM streams s JOIN runs r ON r.id = s.run "
    "WHERE r.project = ? AND r.run_id = ? AND s.acked_seq >= 0"
)


class RunCache:
    """The last fold of up to ``size`` ended runs, by (project, run id), with the
    fingerprint it was folded at. Thread-safe (the server reads from a thread pool)."""

    def __init__(self, size: int = 8) -> None:
        self.size = size
        self._runs: OrderedDict[tuple[str, str], tuple[Fingerprint, RunInfo]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0  # for tests and benchmarks
        self.misses = 0

    def clear(self) -> None:
        with self._lock:
            self._runs.clear()

    def get(self, project: str, run_id: str, fingerprint: Fingerprint) -> RunInfo | None:
        """The kept fold when ``fingerprint`` still matches (a shallow copy: callers may
        replace its fields), else None."""
        with self._lock:
            kept = self._runs.get((project, run_id))
            if kept is None or kept[0] != fingerprint:
                self.misses += 1
                return None
            self._runs.move_to_end((project, run_id))
            self.hits += 1
        return msgspec.structs.replace(kept[1])

    def put(self, project: str, run_id: str, fingerprint: Fingerprint, info: RunInfo) -> None:
        """Keep ``info`` (folded at ``fingerprint``) if none of its streams runs."""
        with self._lock:
            if info.state == "running" or any(s.state == "running" for s in info.streams):
                self._runs.pop((project, run_id), None)
                return
            self._runs[(project, run_id)] = (fingerprint, info)
            self._runs.move_to_end((project, run_id))
            while len(self._runs) > self.size:
                self._runs.popitem(last=False)
