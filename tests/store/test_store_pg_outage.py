"""PostgreSQL going away under a running training job: ``PostgresStore`` calls fail fast
while the database is down (the server answers them 503 with Retry-After) and work again
within seconds of its return, however long it was gone; real SDK ranks uploading to a
real server through such an outage lose and double nothing. A cluster of the test's own
(``private_postgres``) is stopped, never the shared server.
"""

from __future__ import annotations

import time
from pathlib import Path

import psycopg

import rankwise
from rankwise.store.postgres import PostgresStore
from rankwise.stream import records as R
from rankwise.stream.identity import StreamId
from tests.helpers.runs import assert_same_history, launch_ranks, wait_all
from tests.helpers.servers import ServerProcess
from tests.helpers.stores import PrivatePostgres, private_postgres
from tests.helpers.wait import wait_until

__all__ = ["private_postgres"]  # the fixture, used by name below

KEY = StreamId("p", "r", "rank-0", 0)


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
            # Told within the wait (2 s; 5x for a loaded machine), not psycopg's default
            # 30 s of a request thread held.
            assert time.monotonic() - t0 < 10.0
            time.sleep(0.3)
        pg.start()
        back = time.monotonic()
        while True:
            try:
                marks = store.ingest([(KEY, _records(10, 5))])
                break
            except psycopg.OperationalError:
                # Typically within a second or two: bounded, with room for a loaded machine.
                assert time.monotonic() - back < 30.0, "the store did not reconnect"
                time.sleep(0.1)
        assert marks == {KEY: 14}
        rows = store.history("p", "r", keys=["loss"], label="rank-0")
        assert [r["step"] for r in rows] == list(range(1, 15))  # nothing lost
        assert store.stored_points("p", "r") == {("rank-0", "loss"): 14}  # nor doubled
    finally:
        store.close()


def test_sdk_ranks_upload_through_a_database_restart(
    private_postgres: PrivatePostgres, tmp_path: Path
) -> None:
    """Two SDK ranks train and upload while PostgreSQL is down for 4 s: the uploader is
    told 503 (Retry-After), keeps its frames, resends; training never waits for it."""
    pg = private_postgres
    data = tmp_path / "data"
    data.mkdir()
    progress = tmp_path / "progress"
    server = ServerProcess.db(pg.dsn, tmp_path / "server.log").start()
    try:
        procs = launch_ranks(
            data, "pgdown", 2, "--steps", "80", "--sleep", "0.05", "--progress", str(progress),
            server=server.url,
        )  # fmt: skip
        wait_until(lambda: progress.exists() and int(progress.read_text() or 0) >= 10)
        pg.stop("fast")
        stopped_at = int(progress.read_text() or 0)
        time.sleep(4.0)
        assert all(p.poll() is None for p in procs)  # still training
        assert int(progress.read_text() or 0) > stopped_at  # and not held up by uploads
        pg.start()
        outs = wait_all(procs)
        local = rankwise.Api(dir=data).run("pgdown")
        remote = rankwise.Api(server=server.url).run("pgdown")
        assert_same_history(local, remote, pg.dsn)
        assert len(remote.history()) == 2 * 80 * 2
        assert remote.state == "finished" and len(remote.streams) == 2
    finally:
        server.stop()
    assert all("not uploaded" not in err for _, err in outs), outs
    # The outage was seen and answered (503 + Retry-After), not hidden.
    assert "refused: the store cannot write" in (tmp_path / "server.log").read_text()
