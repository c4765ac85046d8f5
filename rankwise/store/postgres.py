"""``PostgresStore``: the scale-out store, one database shared by several server processes.

Any number of processes may ingest into one database at once, even the same stream:

* each stream's data transaction starts with ``SELECT ... FOR UPDATE`` on the stream's
  row, so two ingesters of one stream run one after the other, and the second finds the
  mark already past the records the first applied (nothing is doubled);
* aggregate blocks, shared by all ranks of a run, are locked in (metric, block) order, so
  ingesters of different ranks wait for each other but never deadlock; a block created
  by two ingesters at once is inserted by one and merged into by the other
  (``INSERT ... ON CONFLICT DO NOTHING``, then lock and merge);
* a transaction that still fails as a deadlock or serialization failure (it rolled back
  whole, mark included) is retried.

Connections come from a ``psycopg_pool.ConnectionPool``; results are fetched in binary
so that chunk blobs arrive as bytes without hex decoding. Tests isolate themselves with a
``search_path`` in the DSN (``?options=-csearch_path%3Dmy_schema``).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from typing import Any, TypeVar

import psycopg
from psycopg import errors as pg_errors
from psycopg_pool import ConnectionPool, PoolTimeout

from ..stream import records as R
from ..stream.identity import StreamId
from .ingest import Presented, apply_streams
from .sql import SQLStore
from .tx import Tx

T = TypeVar("T")

_RETRIES = 8


@lru_cache(maxsize=512)
def _pg(sql: str) -> str:
    return sql.replace("?", "%s")


class _Tx:
    for_update = " FOR UPDATE"
    pipelined = True  # ``many`` is one round trip (``Tx.pipelined``)

    def __init__(self, cur: psycopg.Cursor[Any]) -> None:
        self._cur = cur

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        self._cur.execute(_pg(sql), params)
        return self._cur.fetchall()

    def one(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        self._cur.execute(_pg(sql), params)
        row: tuple[Any, ...] | None = self._cur.fetchone()
        return row

    def run(self, sql: str, params: Sequence[Any] = ()) -> int:
        self._cur.execute(_pg(sql), params)
        return self._cur.rowcount

    def many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        self._cur.executemany(_pg(sql), list(rows))

    def many_returning(
        self, sql: str, rows: Sequence[Sequence[Any]]
    ) -> list[tuple[Any, ...] | None]:
        if not rows:
            return []
        cur = self._cur
        cur.executemany(_pg(sql), rows, returning=True)  # pipelined
        out = []
        while True:
            out.append(cur.fetchone())
            if not cur.nextset():
                return out

    def update_rows(
        self,
        table: str,
        keys: Sequence[str],
        columns: Sequence[str],
        rows: Sequence[Sequence[Any]],
    ) -> None:
        sets = ", ".join(f"{c} = ?" for c in columns)
        where = " AND ".join(f"{k} = ?" for k in keys)
        self.many(f"UPDATE {table} SET {sets} WHERE {where}", rows)  # pipelined

    def any_of(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        return f"{column} = ANY(?)", [list(values)]


def _first_connect(dsn: str, timeout: float) -> str | None:
    """One direct connection before the pool's: when PostgreSQL itself refuses (no such
    database, a wrong password: a ``FATAL`` reply) that is said at once, in its words, and
    not after the pool's wait. A server that cannot be reached (down, starting) is waited
    for as before; its error (returned) then explains the pool's timeout."""
    try:
        psycopg.connect(dsn, connect_timeout=max(1, round(timeout))).close()
    except psycopg.OperationalError as exc:
        reason = str(exc).strip()
        if "FATAL:" in reason:
            fatal = " ".join(reason.split("FATAL:", 1)[1].split())
            raise ConnectionError(
                f"PostgreSQL at {_redact(dsn)} refused the connection: {fatal}"
            ) from None
        return " ".join(reason.split())
    return None


class PostgresStore(SQLStore):
    """The ``Store`` in the PostgreSQL database at ``dsn`` (a ``postgresql://`` URL).

    ``pool_size`` bounds the connections this process holds; ``wait_timeout`` is the
    longest a call waits for one (then ``PoolTimeout``); ``crash_timeout`` as for
    ``SQLiteStore``.
    """

    dialect = "postgres"

    def __init__(
        self,
        dsn: str,
        crash_timeout: float = 60.0,
        pool_size: int = 8,
        connect_timeout: float = 10.0,
        wait_timeout: float = 3.0,
    ) -> None:
        super().__init__(crash_timeout)
        self.dsn = dsn
        first = _first_connect(dsn, connect_timeout)
        # Surviving a database restart: each connection is checked as it is taken from
        # the pool (one empty round trip), so one the server ended is replaced instead of
        # failing a request. A request finding no connection within ``wait_timeout``
        # (the database down) fails with ``PoolTimeout`` (an ``OperationalError``: the
        # server answers 503) rather than holding a thread for psycopg's default 30 s.
        # Reconnection backs off 1, 2, 4 s and gives up after ``reconnect_timeout``; the
        # next request starts a fresh attempt at once, so the pool is back within a few
        # seconds of the database however long it was down (psycopg's default of 300 s
        # would let the back-off grow to minutes).
        self._pool = ConnectionPool(
            dsn,
            min_size=1,
            max_size=max(1, pool_size),
            kwargs={"autocommit": True, "connect_timeout": max(1, round(connect_timeout))},
            open=False,
            name="rankwise",
            check=ConnectionPool.check_connection,
            timeout=wait_timeout,
            reconnect_timeout=5.0,
        )
        try:
            self._pool.open(wait=True, timeout=connect_timeout)
        except PoolTimeout as exc:
            self._pool.close()
            raise ConnectionError(
                f"cannot connect to PostgreSQL at {_redact(dsn)} within {connect_timeout:g} s "
                f"({first or exc}): check the DSN and that the server is running"
            ) from None

    def _write(self, fn: Callable[[Tx], T]) -> T:
        for attempt in range(_RETRIES):
            try:
                with (
                    self._pool.connection() as conn,
                    conn.transaction(),
                    conn.cursor(binary=True) as cur,
                ):
                    return fn(_Tx(cur))
            except (pg_errors.DeadlockDetected, pg_errors.SerializationFailure):
                if attempt == _RETRIES - 1:
                    raise
                time.sleep(random.uniform(0, 0.01 * 2**attempt))  # rolled back whole: retry
        raise AssertionError("unreachable")

    def _read(self, fn: Callable[[Tx], T]) -> T:
        with (
            self._pool.connection() as conn,
            conn.transaction(),
            conn.cursor(binary=True) as cur,
        ):
            cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            return fn(_Tx(cur))

    def _apply(
        self,
        todo: list[tuple[StreamId, tuple[int, int], list[R.AnyRecord]]],
        mids: dict[str, int],
        keys: dict[StreamId, Presented] | None = None,
    ) -> dict[StreamId, int]:
        """All the streams of one call in one transaction, so each aggregate block they
        share is rewritten once. Stream rows are locked in id order before any block
        (in (metric, block) order), so concurrent ingesters never wait in a cycle."""
        ordered = sorted(todo, key=lambda t: t[1][0])

        def apply_all(tx: Tx) -> dict[StreamId, int]:
            items = [(sid, run, recs) for _, (sid, run), recs in ordered]
            shown = None if keys is None else [keys[key] for key, _, _ in ordered]
            got = apply_streams(tx, items, mids, self._system_ids, shown, self._direct)
            return {key: mark for (key, _, _), mark in zip(ordered, got)}

        return self._write(apply_all)

    def _lock_migrations(self, tx: Tx) -> None:
        # Servers starting together migrate one at a time (per schema, for tests).
        tx.one("SELECT pg_advisory_xact_lock(hashtext('rankwise.migrate.' || current_schema()))")

    def _compact_lock(self, tx: Tx, wait: bool) -> bool:
        # One compactor at a time per schema; held to the end of the transaction.
        key = "hashtext('rankwise.compact.' || current_schema())"
        if wait:
            tx.one(f"SELECT pg_advisory_xact_lock({key})")
            return True
        row = tx.one(f"SELECT pg_try_advisory_xact_lock({key})")
        return bool(row and row[0])

    def close(self) -> None:
        """Close the pool (safe to call twice)."""
        self._stop_compactor()
        self._pool.close()

    def __repr__(self) -> str:
        return f"PostgresStore({_redact(self.dsn)!r})"


def _redact(dsn: str) -> str:
    """The DSN without its password, for messages."""
    try:
        info = psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "<unparsable DSN>"
    info.pop("password", None)
    return psycopg.conninfo.make_conninfo(**{k: str(v) for k, v in info.items()})
