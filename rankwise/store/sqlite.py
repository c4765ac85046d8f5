"""``SQLiteStore``: the embedded default, one database file.

One writer: every write runs on a single thread that owns the only write connection, fed
by a queue (the ``_execute_writes`` pattern), inside ``BEGIN IMMEDIATE`` so that even a
second process opening the same file waits for the write lock instead of failing
halfway. Readers use their own connections from a small pool and see WAL snapshots, so a
chart never waits for an ingest.

An ``ingest`` call is one transaction for all of its streams: every stream's mark moves
with its data, and one commit per call is what lets one writer sustain about a million
points per second.
"""

from __future__ import annotations

import os
import queue
import sqlite3
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

from ..errors import UsageError
from ..stream import records as R
from ..stream.identity import StreamId
from .ingest import Presented, apply_streams
from .sql import SQLStore
from .tx import Tx, insert_rows, marks, rows_per_statement

T = TypeVar("T")

_PAGE_SIZE = 16384  # fewer overflow pages per chunk blob; only applies to a new file
_BUSY_MS = 60_000


class _Tx:
    for_update = ""
    pipelined = False  # one statement per many rows is cheaper here (``Tx.pipelined``)

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._c = conn

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self._c.execute(sql, params).fetchall()

    def one(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        row: tuple[Any, ...] | None = self._c.execute(sql, params).fetchone()
        return row

    def run(self, sql: str, params: Sequence[Any] = ()) -> int:
        return self._c.execute(sql, params).rowcount

    def many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        self._c.executemany(sql, rows)

    def many_returning(
        self, sql: str, rows: Sequence[Sequence[Any]]
    ) -> list[tuple[Any, ...] | None]:
        if not rows:
            return []
        table = _plain_insert(sql)
        if table is None or len(rows) == 1:
            return [self._c.execute(sql, row).fetchone() for row in rows]
        # Within this (the only) write transaction SQLite gives each new row the table's
        # largest rowid + 1, so the ids are the next len(rows) after it.
        top = self._c.execute(f"SELECT COALESCE(MAX(rowid), 0) FROM {table}").fetchone()[0]
        # As multi-row statements (one step each, not one a row): the same rule holds.
        head, one = sql[: -len(_RETURNING_ID)].rsplit(" VALUES ", 1)
        if one != "(" + ", ".join("?" * len(rows[0])) + ")":  # more than VALUES (...)
            self._c.executemany(sql[: -len(_RETURNING_ID)], rows)
        else:
            insert_rows(self, f"{head} VALUES", len(rows[0]), rows)
        last = self._c.execute("SELECT last_insert_rowid()").fetchone()[0]
        if last != top + len(rows):  # never, by SQLite's rowid rule; checked all the same
            raise RuntimeError(f"rowids of {table} are not consecutive ({top} + {len(rows)})")
        return [(i,) for i in range(top + 1, last + 1)]

    def update_rows(
        self,
        table: str,
        keys: Sequence[str],
        columns: Sequence[str],
        rows: Sequence[Sequence[Any]],
    ) -> None:
        # One UPDATE ... FROM (VALUES ...) per statement's rows: executemany steps (and
        # hands over the GIL) once a row. UPDATE FROM is SQLite 3.33 (2020) on.
        if not _UPDATE_FROM:
            sets = ", ".join(f"{c} = ?" for c in columns)
            where = " AND ".join(f"{k} = ?" for k in keys)
            self._c.executemany(f"UPDATE {table} SET {sets} WHERE {where}", rows)
            return
        width = len(columns) + len(keys)
        sets = ", ".join(f"{c} = v.column{i + 1}" for i, c in enumerate(columns))
        where = " AND ".join(
            f"{table}.{k} = v.column{len(columns) + i + 1}" for i, k in enumerate(keys)
        )
        one = "(" + ", ".join("?" * width) + ")"
        step = rows_per_statement(width)
        for a in range(0, len(rows), step):
            part = rows[a : a + step]
            self._c.execute(
                f"UPDATE {table} SET {sets} FROM (VALUES {', '.join([one] * len(part))}) AS v "
                f"WHERE {where}",
                [v for row in part for v in row],
            )

    def any_of(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        return f"{column} IN ({marks(len(values))})", list(values)


_RETURNING_ID = " RETURNING id"
_UPDATE_FROM = sqlite3.sqlite_version_info >= (3, 33, 0)


def _plain_insert(sql: str) -> str | None:
    """The table of ``INSERT INTO t (...) VALUES (...) RETURNING id``, else None."""
    if not sql.startswith("INSERT INTO ") or not sql.endswith(_RETURNING_ID):
        return None
    table = sql[len("INSERT INTO ") :].split(" ", 1)[0]
    return table if table.isidentifier() else None


def _connect(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=60)
    conn.execute(f"PRAGMA busy_timeout = {_BUSY_MS}")
    from .run_filters import sqlite_regexp

    # $regex of run filters (rankwise.filters): Python's re, the local reader's too
    conn.create_function("rw_regexp", 2, sqlite_regexp, deterministic=True)
    return conn


class SQLiteStore(SQLStore):
    """The ``Store`` in one SQLite file at ``path`` (created when missing).

    ``crash_timeout`` (seconds): how old a silent stream's last record must be, when its
    process cannot be seen alive, before the stream is called crashed.
    """

    dialect = "sqlite"

    def __init__(self, path: str | os.PathLike[str], crash_timeout: float = 60.0) -> None:
        super().__init__(crash_timeout)
        text = os.fspath(path)
        if text in ("", ":memory:") or text.startswith("file:"):
            raise UsageError(
                f"SQLiteStore needs a file path, not {text!r}: readers and the writer use "
                "separate connections (use a file under a temporary directory in tests)"
            )
        self.path = Path(text).absolute()
        if not self.path.parent.is_dir():
            raise FileNotFoundError(
                f"cannot create the database {self.path}: its directory does not exist"
            )
        conn = _connect(str(self.path))
        conn.execute(f"PRAGMA page_size = {_PAGE_SIZE}")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")  # WAL: a crash loses no committed mark
        conn.execute("PRAGMA cache_size = -65536")
        self._queue: queue.SimpleQueue[tuple[Callable[[Tx], Any], Future[Any]] | None] = (
            queue.SimpleQueue()
        )
        self._writer = threading.Thread(
            target=self._execute_writes, args=(conn,), name="rankwise-sqlite-writer", daemon=True
        )
        self._readers: list[sqlite3.Connection] = []
        self._all_readers: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._closed = False
        self._writer.start()

    def _execute_writes(self, conn: sqlite3.Connection) -> None:
        # Infinite looping thread that protects the single write connection.
        tx = _Tx(conn)
        while True:
            task = self._queue.get()
            if task is None:
                conn.close()
                return
            fn, fut = task
            if not fut.set_running_or_notify_cancel():
                continue
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    result = fn(tx)
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
            except BaseException as exc:
                fut.set_exception(exc)
            else:
                fut.set_result(result)

    def _write(self, fn: Callable[[Tx], T]) -> T:
        if self._closed:
            raise UsageError(f"the store at {self.path} is closed: open a new SQLiteStore")
        fut: Future[T] = Future()
        self._queue.put((fn, fut))
        return fut.result()

    def _read(self, fn: Callable[[Tx], T]) -> T:
        if self._closed:
            raise UsageError(f"the store at {self.path} is closed: open a new SQLiteStore")
        with self._lock:
            conn = self._readers.pop() if self._readers else None
        if conn is None:
            conn = _connect(str(self.path))
            conn.execute("PRAGMA mmap_size = 268435456")
            with self._lock:
                self._all_readers.append(conn)
        try:
            conn.execute("BEGIN")  # one snapshot for the whole read
            try:
                return fn(_Tx(conn))
            finally:
                conn.execute("COMMIT")
        finally:
            with self._lock:
                self._readers.append(conn)

    def _apply(
        self,
        todo: list[tuple[StreamId, tuple[int, int], list[R.AnyRecord]]],
        mids: dict[str, int],
        keys: dict[StreamId, Presented] | None = None,
    ) -> dict[StreamId, int]:
        def apply_all(tx: Tx) -> dict[StreamId, int]:
            items = [(sid, run, recs) for _, (sid, run), recs in todo]
            shown = None if keys is None else [keys[key] for key, _, _ in todo]
            got = apply_streams(tx, items, mids, self._system_ids, shown, self._direct)
            return {key: mark for (key, _, _), mark in zip(todo, got)}

        return self._write(apply_all)

    def close(self) -> None:
        """Finish queued writes, then close every connection (safe to call twice)."""
        if self._closed:
            return
        self._stop_compactor()  # lets a fold in progress commit first
        self._closed = True
        self._queue.put(None)
        self._writer.join()
        while True:  # a write queued while closing must not wait forever
            try:
                task = self._queue.get_nowait()
            except queue.Empty:
                break
            if task is not None:
                task[1].set_exception(RuntimeError(f"the store at {self.path} was closed"))
        with self._lock:
            for conn in self._all_readers:
                conn.close()
            self._readers.clear()
            self._all_readers.clear()

    def __repr__(self) -> str:
        return f"SQLiteStore({str(self.path)!r})"
