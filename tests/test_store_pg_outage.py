"""``PostgresStore`` across a database outage: calls fail fast while the database is down
(the server answers them 503 with Retry-After) and work again within seconds of its
return, however long it was gone. A cluster of the test's own (``private_postgres``)
is stopped, never the shared server.
"""

from __future__ import annotations

import time

import psycopg

from rankwise.store.base import StreamKey
from rankwise.store.postgres import PostgresStore
from rankwise.stream import records as R

from .helpers.stores import PrivatePostgres, private_postgres

__all__ = ["private_postgres"]  # the fixture, used by name below

KEY = StreamKey("p", "r", "rank-0", 0)


def _records(first: int, n: int) -> list[R.AnyRecord]:
    out: list[R.AnyRecord] = []
    if first == 0:
        out.append(R.StreamStart(0, time.time(), "p", "r", "rank-0", 0, rank=0, world_size=1))
    for s in range(max(first, 1), first + n):
        out.append(R.Metrics(s, time.time(), s, {"loss": float(s)}))
    return out


def test_outage_fails_fast_and_reconnects(private_postgres: PrivatePostgres) -> None:
    pg = private_postgres
    store = PostgresStore(pg.dsn, wait_timeout=2.0)
    try:
        store.migrate()
        assert store.ingest([(KEY, _records(0, 10))]) == {KEY: 9}
        pg.stop("fast")  # every pooled connection is now dead
        down_since = time.monotonic()
        while time.monotonic() - down_since < 9.0:  # past the pool's reconnect give-up
            t0 = time.monotonic()
            try:
                store.ingest([(KEY, _records(10, 5))])
                raise AssertionError("an ingest succeeded with the database down")
            except psycopg.OperationalError:  # PoolTimeout is one: the server's 503
                pass
            # Told within the wait (2 s, and slack for a loaded machine), not psycopg's
            # default 30 s of a request thread held.
            assert time.monotonic() - t0 < 6.0
            time.sleep(0.3)
        pg.start()
        back = time.monotonic()
        while True:
            try:
                marks = store.ingest([(KEY, _records(10, 5))])
                break
            except psycopg.OperationalError:
                assert time.monotonic() - back < 8.0, "the store did not reconnect"
                time.sleep(0.1)
        assert marks == {KEY: 14}
        rows = store.history("p", "r", keys=["loss"], label="rank-0")
        assert [r["step"] for r in rows] == list(range(1, 15))  # nothing lost or doubled
    finally:
        store.close()
