"""Group commit: the uploads that arrive together are applied in one store call.

A thousand ranks each posting once a second would otherwise cost a thousand
transactions a second, each rewriting the aggregate blocks that all ranks of a run
share. Requests hand their records to one committer thread and wait; the committer
takes everything queued (up to ``max_items``), calls ``Store.ingest`` once, and hands
each request its stream's new mark. Under light load a batch is one request and
nothing waits longer than before; under heavy load batches grow, and the cost per
upload falls.

Invariants:

* Exactly once is still the store's property: a batch is one ``ingest`` call, applied
  all or nothing (SQLite: one transaction; PostgreSQL: one transaction, stream rows
  locked in id order). Two uploads of one stream in one batch are merged by the store
  and both see the same mark.
* One failing upload cannot fail the others: when a batch raises, its uploads are
  applied again one by one, and only the failing one gets the error. A batch that fails
  because the store itself cannot write (``store_unavailable``: disk full, database down
  or restarting) fails whole at once: retrying each upload alone would only wait on the
  dead database once per upload, holding every other request behind it.
"""

from __future__ import annotations

import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future

from ..store.base import Store
from ..stream import records as R
from ..stream.identity import StreamId

# (stream, records, the stream secret its upload presented, its future mark)
_Item = tuple[StreamId, Sequence[R.AnyRecord], str | None, "Future[int]"]
FIRST_GUESS = 0.01  # seconds per upload before any batch was timed (a first upload, which
# creates its stream's series, costs more than later ones)


class GroupCommit:
    def __init__(
        self,
        store: Store,
        max_items: int = 512,
        on_busy: Callable[[float], None] | None = None,
    ) -> None:
        self.store = store
        self.max_items = max_items
        # Told each batch's store seconds (the pacer's ``busy``: how far it may shrink).
        self.on_busy = on_busy
        self.batches = 0  # store calls made (for tests and figures)
        self.items = 0  # uploads applied through them
        # Seconds of store time per upload (moving average over batches; a cautious
        # first guess) and uploads submitted but not yet answered: their product is how
        # long a new upload would wait (``expected_wait``).
        self.per_item = FIRST_GUESS
        self._waiting = 0
        self._count = threading.Lock()
        self._queue: queue.SimpleQueue[_Item] = queue.SimpleQueue()
        # Started on the first upload: an app that takes none (a read-only dashboard, a
        # test's) holds no idle thread.
        self._thread: threading.Thread | None = None

    def ingest(
        self, key: StreamId, records: Sequence[R.AnyRecord], secret: str | None = None
    ) -> int:
        """Apply ``records`` of stream ``key`` with whatever else is waiting; the mark."""
        return self.submit(key, records, secret).result()

    def submit(
        self, key: StreamId, records: Sequence[R.AnyRecord], secret: str | None = None
    ) -> Future[int]:
        """Queue ``records`` of stream ``key``; the future of its mark once applied.
        ``secret``: the stream secret the upload presented (``Store.ingest``'s ``secrets``).

        The ingest route awaits it on the event loop, so a request waiting for its batch
        holds no thread: a batch is as large as what is waiting, not as the thread pool.
        """
        fut: Future[int] = Future()
        with self._count:
            self._waiting += 1
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="rankwise-group-commit", daemon=True
                )
                self._thread.start()
        self._queue.put((key, records, secret, fut))
        return fut

    def expected_wait(self) -> float:
        """Seconds an upload submitted now would wait for its mark, by the recent pace."""
        return self._waiting * self.per_item

    def _run(self) -> None:
        while True:
            batch = [self._queue.get()]
            while len(batch) < self.max_items:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            self._commit(batch)

    def _commit(self, batch: list[_Item]) -> None:
        started = time.monotonic()
        try:
            self._apply(batch)
        finally:
            spent = time.monotonic() - started
            if self.on_busy is not None:
                self.on_busy(spent)
            took = spent / len(batch)
            self.per_item += 0.3 * (took - self.per_item)
            with self._count:
                self._waiting -= len(batch)

    def _apply(self, batch: list[_Item]) -> None:
        try:
            marks = self.store.ingest(
                [(key, recs) for key, recs, _, _ in batch], [s for _, _, s, _ in batch]
            )
        except BaseException as exc:
            if len(batch) == 1 or (isinstance(exc, Exception) and store_unavailable(exc)):
                for item in batch:
                    self._fail(item, exc)
            else:
                for item in batch:  # find the one that fails; the others still land
                    self._apply([item])
            return
        self.batches += 1
        self.items += len(batch)
        for key, _, _, fut in batch:
            fut.set_result(marks[key])

    @staticmethod
    def _fail(item: _Item, exc: BaseException) -> None:
        item[3].set_exception(exc)


# SQLSTATEs that say the database cannot serve anyone now (PostgreSQL's classes 08
# connection exception and 53 insufficient resources: disk full, out of memory, too many
# connections; 57P01-57P03 shutdown and cannot-connect-now). Anything else (a value too
# big for an index, a constraint) is the upload's own fault and fails it alone.
_UNAVAILABLE_CLASSES = ("08", "53")
_UNAVAILABLE_STATES = frozenset({"57P01", "57P02", "57P03"})


def store_unavailable(exc: Exception) -> bool:
    """A failure of the database itself (disk full, database down or restarting, no
    connection within the pool's wait), not of the upload: answered 503 + Retry-After."""
    if isinstance(exc, (OSError, sqlite3.OperationalError)):
        return True
    if not type(exc).__module__.startswith("psycopg"):
        return False
    state = getattr(exc, "sqlstate", None)
    if state is None:  # no answer from a server: a lost connection, or the pool's wait
        return "Operational" in "".join(c.__name__ for c in type(exc).__mro__)
    return state[:2] in _UNAVAILABLE_CLASSES or state in _UNAVAILABLE_STATES
