"""The cap on one run's distinct metric keys (security checklist row 18).

Per-record and per-upload caps (``upload.check_sizes``) bound one request; this bounds a
run across requests, so a client cannot grow a run's key list (and every read that lists
it) without limit, 10,000 keys at a time. The store is asked only when an upload brings a
key this process has not yet seen for the run: the usual upload, the same keys every step,
costs set lookups. Several server processes each check against the store, so a race
between them can pass the cap by what the others admitted within one read's time (the
keys of an upload or a few). ``upload.check_upload`` asks ``admit`` and refuses (413)
what it does not admit.

One store read per run at a time: a job's start is every rank's first upload at once,
each in a check thread of its own, all finding the run unknown. Each used to read the
run's keys (the read decodes every upload not yet compacted), and at 4,096 ranks those
reads held every pooled connection past the pool's wait: uploads were answered 503 and
the processes' memory doubled. Now the first upload reads and the others wait for it. A waiter
whose keys that read did not show (ranks that log keys of their own) takes them on that
read's answer, not a read of its own: it finished after the waiter arrived, as fresh as
the reads that used to run side by side. The cap itself is checked as always, against
the read's keys and all this process admitted since.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections import OrderedDict

from ..store.base import Store

MAX_KEYS_PER_RUN = 100_000
# Keys remembered over all runs (about 100 bytes each); the least recently written runs are
# forgotten first and asked of the store again when they come back.
_REMEMBERED = 1_000_000


class RunKeys:
    """The known metric keys of recently written runs of one store."""

    def __init__(self, remembered: int = _REMEMBERED) -> None:
        self._remembered = remembered
        self._lock = threading.Lock()
        # Each remembered run's keys, and when they were last read from the store
        # (monotonic): the keys it held then and those this process admitted since.
        self._runs: OrderedDict[tuple[str, str], tuple[frozenset[str], float]] = OrderedDict()
        self._size = 0
        # A lock per run whose keys are being read from the store, and its waiters' count.
        self._reading: dict[tuple[str, str], tuple[threading.Lock, int]] = {}

    def admit(
        self, store: Store, project: str, run_id: str, keys: set[str], cap: int = MAX_KEYS_PER_RUN
    ) -> bool:
        """False when ``keys`` would take the run past ``cap``; else remember them."""
        if not keys:
            return True
        run = (project, run_id)
        if self._known(run, keys):
            return True
        arrived = time.monotonic()
        with self._lock:
            lock, waiters = self._reading.get(run, (threading.Lock(), 0))
            self._reading[run] = (lock, waiters + 1)
        try:
            with lock:  # one store read per run at a time: the others wait for it
                with self._lock:
                    known, read_at = self._runs.get(run, (None, 0.0))
                if known is not None and keys <= known:
                    return True
                if known is not None and read_at > arrived:  # read while this upload
                    total = known.union(keys)  # waited: its answer is recent enough
                else:
                    total = frozenset(store.metric_keys(project, run_id)).union(keys)
                    read_at = time.monotonic()  # finished now
                if len(total) > cap:
                    return False
                self._remember(run, total, read_at)
                return True
        finally:
            with self._lock:
                lock, waiters = self._reading[run]
                if waiters == 1:
                    del self._reading[run]
                else:
                    self._reading[run] = (lock, waiters - 1)

    def _known(self, run: tuple[str, str], keys: set[str]) -> bool:
        with self._lock:
            got = self._runs.get(run)
            if got is None:
                return False
            self._runs.move_to_end(run)
            return keys <= got[0]

    def _remember(self, run: tuple[str, str], total: frozenset[str], read_at: float) -> None:
        with self._lock:
            old = self._runs.pop(run, None)
            self._size -= len(old[0]) if old is not None else 0
            self._runs[run] = (total, read_at)
            self._size += len(total)
            while self._size > self._remembered and len(self._runs) > 1:
                _, (dropped, _) = self._runs.popitem(last=False)
                self._size -= len(dropped)


_BY_STORE: weakref.WeakKeyDictionary[Store, RunKeys] = weakref.WeakKeyDictionary()
_BY_STORE_LOCK = threading.Lock()


def run_keys(store: Store) -> RunKeys:
    """The one ``RunKeys`` of ``store`` in this process."""
    with _BY_STORE_LOCK:
        keys = _BY_STORE.get(store)
        if keys is None:
            keys = _BY_STORE[store] = RunKeys()
        return keys
