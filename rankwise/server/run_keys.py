"""The cap on one run's distinct metric keys (security checklist row 18).

Per-record and per-upload caps (``upload.check_sizes``) bound one request; this bounds a
run across requests, so a client cannot grow a run's key list (and every read that lists
it) without limit, 10,000 keys at a time. The store is asked only when an upload brings a
key this process has not yet seen for the run: the usual upload, the same keys every step,
costs set lookups. Several server processes each check against the store, so a race
between them can pass the cap by at most one upload's keys. ``upload.check_upload`` asks
``admit`` and refuses (413) what it does not admit.
"""

from __future__ import annotations

import threading
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
        self._runs: OrderedDict[tuple[str, str], frozenset[str]] = OrderedDict()
        self._size = 0

    def admit(
        self, store: Store, project: str, run_id: str, keys: set[str], cap: int = MAX_KEYS_PER_RUN
    ) -> bool:
        """False when ``keys`` would take the run past ``cap``; else remember them."""
        if not keys:
            return True
        run = (project, run_id)
        with self._lock:
            known = self._runs.get(run)
            if known is not None:
                self._runs.move_to_end(run)
                if keys <= known:
                    return True
        total = frozenset(store.metric_keys(project, run_id)).union(keys)
        if len(total) > cap:
            return False
        with self._lock:
            old = self._runs.pop(run, None)
            self._size -= len(old) if old is not None else 0
            self._runs[run] = total
            self._size += len(total)
            while self._size > self._remembered and len(self._runs) > 1:
                _, dropped = self._runs.popitem(last=False)
                self._size -= len(dropped)
        return True


_BY_STORE: weakref.WeakKeyDictionary[Store, RunKeys] = weakref.WeakKeyDictionary()
_BY_STORE_LOCK = threading.Lock()


def run_keys(store: Store) -> RunKeys:
    """The one ``RunKeys`` of ``store`` in this process."""
    with _BY_STORE_LOCK:
        keys = _BY_STORE.get(store)
        if keys is None:
            keys = _BY_STORE[store] = RunKeys()
        return keys
