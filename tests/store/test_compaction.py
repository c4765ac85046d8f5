"""Uploads stored whole and compacted later (``rankwise.store.pending``, ``.compact``).

Every read must be what today's write path (each upload appended to its series and the
run's aggregate blocks at once: a store with ``_direct`` set) gives for the same records,
before, during and after compaction, whoever ingests and whoever compacts; a compaction
killed at any point is replayed, never doubled.
"""

from __future__ import annotations

import math
import shutil
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rankwise.store import migrations as M
from rankwise.store.compact import compact_streams
from rankwise.store.sql import SQLStore
from rankwise.store.sqlite import SQLiteStore
from rankwise.stream import records as R
from rankwise.stream.identity import StreamId
from tests.data.make_v14_store import RANKS as V14_RANKS
from tests.data.make_v14_store import STEPS as V14_STEPS
from tests.data.make_v14_store import unpack, v14_records
from tests.helpers.stores import PrivatePostgres, open_sql_store, private_postgres, race
from tests.helpers.wait import wait_until

T0 = 1_700_000_000.0
__all__ = ["private_postgres"]  # the fixture, used by name below


def _records(rank: int, first: int, last: int) -> list[R.AnyRecord]:
    """Rank ``rank``'s records ``first`` .. ``last - 1``: floats, ints, a sparse key with
    NaN and ±Inf, weights, system samples."""
    out: list[R.AnyRecord] = []
    for seq in range(first, last):
        if seq == 0:
            out.append(
                R.StreamStart(0, T0, "p", "r", f"rank-{rank}", 0, rank=rank, world_size=3,
                              is_primary=rank == 0, host="h", pid=rank)
            )  # fmt: skip
            continue
        s = seq - 1
        if s % 11 == 5:
            out.append(R.System(seq, T0 + s, {"node/cpu_percent": float(s % 100)}))
            continue
        values: dict[str, object] = {"loss": math.sin(s + rank), "n": s * (rank + 1)}
        if s % 3 == 0:
            values["sparse"] = [math.nan, math.inf, -math.inf, 1.0 * s][s % 4]
        out.append(R.Metrics(seq, T0 + s, s, values, weight=float(rank + 1)))
    return out


def direct(store: SQLStore) -> SQLStore:
    """``store`` writing as before schema 15: every upload appended to its series at once."""
    store._pending_kept = lambda: False  # type: ignore[method-assign]
    store._direct = True
    return store


def _approx(obj: Any) -> str:
    """``obj`` as text with floats to 12 digits: aggregates are sums, and a sum's last
    bits depend on the order it was taken in (today's path too, with the group commit's
    batches)."""

    def walk(v: Any) -> Any:
        if isinstance(v, float):
            return f"{v:.12g}"
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [walk(x) for x in v]
        return v

    return repr(walk(msgspec.to_builtins(obj)))


def view(st: SQLStore, run: str = "r", keys: tuple[str, ...] = ("loss", "n", "sparse")) -> Any:
    """Every read of the run's points, as comparable text (repr: NaN equals NaN)."""
    out: list[Any] = [st.metric_keys("p", run), st.stored_points("p", run)]
    # Sorted keys: a row's key order follows the chunk layout (today's path too).
    out.append(repr([sorted(row.items()) for row in st.history("p", run)]))
    for key in keys:
        for x in ("step", "time"):
            out.append(repr(st.series("p", run, key, x=x, max_points=10**6)))
            out.append(_approx(st.band("p", run, key, x=x, max_points=10**6)))
            out.append(_approx(st.heatmap("p", run, key, x=x, buckets=7)))
        # A range and a chart smaller than the series: M4 over stored and pending points;
        # by time, the band's blocks are picked by their stored times and the pending
        # points' steps.
        out.append(repr(st.series("p", run, key, lo=3, hi=25, max_points=8)))
        out.append(repr(st.series("p", run, key, x="time", lo=T0 + 2, hi=T0 + 30, max_points=8)))
        out.append(_approx(st.band("p", run, key, x="time", lo=T0 + 4, hi=T0 + 33, max_points=8)))
    out.append(_approx(st.cross_rank_last("p", run)))
    out.append(_approx(st.cross_rank_last("p", run, upto=20)))
    out.append(st.system_keys("p", run))
    out.append(repr(st.system_series("p", run, "node/cpu_percent", max_points=10**6)))
    got = st.health_streams("p", run, window=30.0, now=T0 + 10**4)
    out.append(None if got is None else repr(got[1]))
    info = st.get_run("p", run)
    out.append(None if info is None else (info.first_nonfinite, info.steps))
    return out


def pending(st: SQLStore) -> int:
    row = st._read(lambda tx: tx.one("SELECT COUNT(*) FROM upload_blocks"))
    return int(row[0]) if row else 0


# -- property: reads equal today's before, during and after compaction ----------------------

_op = st.one_of(
    st.tuples(st.just("ingest"), st.integers(0, 2), st.integers(1, 40), st.integers(0, 1),
              st.integers(0, 5)),  # rank, records, which ingester, how far back it resends
    st.tuples(st.just("partial"), st.integers(1, 2)),  # one transaction of 1..2 streams
    st.tuples(st.just("compact")),
    st.tuples(st.just("read")),
)  # fmt: skip


def _replay(ops: list[Any], a: SQLStore, b: SQLStore, ref: SQLStore) -> None:
    """``ops`` on ``a`` and ``b`` (two stores on one migrated database) and on ``ref`` (a
    migrated ``direct`` store): every read of ``b`` equals ``ref``'s whenever asked."""
    sent = [0, 0, 0]
    for op in ops:
        if op[0] == "ingest":
            _, rank, n, who, back = op
            first = max(0, sent[rank] - back)
            recs = _records(rank, first, sent[rank] + n)
            key = StreamId("p", "r", f"rank-{rank}", 0)
            mark = (a, b)[who].ingest([(key, recs)])[key]
            assert ref.ingest([(key, recs)])[key] == mark == sent[rank] + n - 1
            sent[rank] += n
        elif op[0] == "partial":
            a._write(partial(compact_streams, runs=None, after=-1, limit=int(op[1])))
        elif op[0] == "compact":
            (a, b)[len(ops) % 2].compact()
        else:
            before = pending(a)
            assert view(b) == view(ref)
            assert pending(a) == before  # reads merge what is pending: they never fold
    assert view(a) == view(ref)
    a.compact()
    assert pending(a) == 0
    assert view(a) == view(ref)


# Deterministic in CI (derandomize: the same examples every run, no example database);
# a failure prints its reproduction blob.
_PROPERTY = dict(deadline=None, derandomize=True, database=None, print_blob=True)


@settings(max_examples=25, suppress_health_check=[HealthCheck.too_slow], **_PROPERTY)
@given(st.lists(_op, min_size=1, max_size=25))
def test_reads_equal_todays_with_replays_and_two_ingesters(ops: list[Any]) -> None:
    tmp = Path(tempfile.mkdtemp())
    a = SQLiteStore(tmp / "s.db")
    a.migrate()
    b = SQLiteStore(tmp / "s.db")  # a second ingester (another process, as far as it knows)
    ref = direct(SQLiteStore(tmp / "ref.db"))
    ref.migrate()
    try:
        _replay(ops, a, b, ref)
    finally:
        for s in (a, b, ref):
            s.close()
        shutil.rmtree(tmp, ignore_errors=True)


def _empty_schema(dsn: str) -> None:
    """Drop and recreate the schema ``dsn`` searches (the ``pg_dsn`` fixture's own)."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT current_schema()").fetchone()
        assert row and row[0] and str(row[0]).startswith("rw_test_"), row
        conn.execute(f'DROP SCHEMA "{row[0]}" CASCADE')
        conn.execute(f'CREATE SCHEMA "{row[0]}"')


@settings(
    max_examples=10,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    **_PROPERTY,
)
@given(ops=st.lists(_op, min_size=1, max_size=25))
def test_reads_equal_todays_on_postgres(pg_dsn: str, ops: list[Any]) -> None:
    """The same on PostgreSQL (fewer examples: each migrates a fresh schema); the
    reference stays SQLite's ``direct`` store, the reads' results are the same."""
    from rankwise.store.postgres import PostgresStore

    _empty_schema(pg_dsn)  # each example starts from nothing (the fixture is the test's)
    tmp = Path(tempfile.mkdtemp())
    a = PostgresStore(pg_dsn, pool_size=2)
    b = PostgresStore(pg_dsn, pool_size=2)
    ref = direct(SQLiteStore(tmp / "ref.db"))
    try:
        a.migrate()
        ref.migrate()
        _replay(ops, a, b, ref)
    finally:
        for s in (a, b, ref):
            s.close()
        shutil.rmtree(tmp, ignore_errors=True)


# -- two compactors at once ------------------------------------------------------------------


def test_two_stores_ingesting_and_compacting_at_once(
    kind: str, tmp_path: Path, request: Any
) -> None:
    """Two stores on one database (two server processes) each ingest half the ranks in
    small uploads and compact as they go: nothing lost, nothing doubled."""
    stores = [open_sql_store(kind, tmp_path, request) for _ in range(2)]
    ref = direct(SQLiteStore(tmp_path / "ref.db"))
    try:
        stores[0].migrate()
        ref.migrate()

        def work(st: SQLStore, n: int) -> None:
            for first in range(0, 121, 7):
                for rank in (n, n + 2):
                    key = StreamId("p", "r", f"rank-{rank}", 0)
                    st.ingest([(key, _records(rank, first, first + 7))])
                st.compact()

        race(work, stores)
        for rank in range(4):
            key = StreamId("p", "r", f"rank-{rank}", 0)
            for first in range(0, 121, 7):
                ref.ingest([(key, _records(rank, first, first + 7))])
        assert view(stores[1]) == view(ref)
        assert pending(stores[0]) == 0
    finally:
        for s in (*stores, ref):
            s.close()


def test_a_round_starts_early_once_enough_points_are_stored(
    store: SQLStore, monkeypatch: Any
) -> None:
    """The interval is an hour, but a process that stored ``COMPACT_POINTS`` points since
    the last round starts one now; below that, the rows wait for the interval."""
    from rankwise.store import compact

    monkeypatch.setattr(compact, "COMPACT_POINTS", 100)
    monkeypatch.setenv("RANKWISE_COMPACT_EVERY", "3600")
    key = StreamId("p", "r", "rank-0", 0)
    store.ingest([(key, _records(0, 0, 20))])  # about 40 values
    time.sleep(0.5)
    assert pending(store) == 1
    store.ingest([(key, _records(0, 20, 60))])  # past 100 since the last round
    wait_until(lambda: pending(store) == 0, timeout=30)
    store.ingest([(key, _records(0, 60, 70))])
    time.sleep(0.5)
    assert pending(store) == 1  # counted from zero again
    assert len(store.history("p", "r")) == len([r for r in _records(0, 0, 70)
                                               if type(r) is R.Metrics])  # fmt: skip


def test_background_compactor_folds_and_a_second_one_waits(
    kind: str, tmp_path: Path, request: Any, monkeypatch: Any
) -> None:
    monkeypatch.setenv("RANKWISE_COMPACT_EVERY", "0.05")
    stores = [open_sql_store(kind, tmp_path, request) for _ in range(2)]
    try:
        stores[0].migrate()
        for st_ in stores:
            st_.start_compactor()
        for first in range(0, 200, 10):
            for rank in range(3):
                key = StreamId("p", "r", f"rank-{rank}", 0)
                stores[first % 2].ingest([(key, _records(rank, first, first + 10))])
        wait_until(lambda: pending(stores[0]) == 0, timeout=30)
        got = stores[0].stored_points("p", "r")
        assert got[("rank-0", "loss")] == len([r for r in _records(0, 0, 200)
                                               if type(r) is R.Metrics])  # fmt: skip
    finally:
        for s in stores:
            s.close()


# -- a compaction killed half way ------------------------------------------------------------


class _NoCompactor:
    """Stands in for a store's background compactor: never folds."""

    def added(self, points: int) -> None:
        pass


def _ingest_held(st: SQLStore, upto: int = 150) -> int:
    """Ranks 0..2's records up to ``upto`` in uploads of 10, left pending (this store's
    own compactor kept from folding them); how many rows wait."""
    st.migrate()
    st._compactor = _NoCompactor()  # type: ignore[assignment]  # keep this one from folding
    try:
        for first in range(0, upto, 10):
            for rank in range(3):
                key = StreamId("p", "r", f"rank-{rank}", 0)
                st.ingest([(key, _records(rank, first, first + 10))])
    finally:
        st._compactor = None
    return pending(st)


def _reference(tmp_path: Path, upto: int = 150) -> SQLStore:
    """The records of ``_ingest_held`` written as before schema 15."""
    ref = direct(SQLiteStore(tmp_path / "ref.db"))
    ref.migrate()
    for first in range(0, upto, 10):
        for rank in range(3):
            key = StreamId("p", "r", f"rank-{rank}", 0)
            ref.ingest([(key, _records(rank, first, first + 10))])
    return ref


def test_server_killed_inside_compaction_replays_it(
    kind: str, tmp_path: Path, request: Any
) -> None:
    """A real ``rankwise server`` SIGKILLed while its compactor holds a fold uncommitted
    (SQLite: the write lock; PostgreSQL: the advisory lock and an open transaction): the
    rows are still pending afterwards, a server started again on the database folds them,
    once."""
    from tests.helpers.servers import ServerProcess

    url = f"sqlite:///{tmp_path / 'store.db'}" if kind == "sqlite" else request.getfixturevalue(
        "pg_dsn")  # fmt: skip
    with open_sql_store(kind, tmp_path, request) as st:
        waiting = _ingest_held(st)
    assert waiting == 45
    flag = tmp_path / "paused"
    server = ServerProcess.db(url, tmp_path / "server.log")
    server.extra_env.update(
        {"RANKWISE_TEST_COMPACT_PAUSE": str(flag), "RANKWISE_COMPACT_EVERY": "0.1"}
    )
    server.start(wait=False)  # its compactor holds the lock from the first fold on
    try:
        wait_until(flag.exists, timeout=60)
        server.kill()  # SIGKILL, inside the compaction transaction
    finally:
        server.stop()
    ref = _reference(tmp_path)
    with open_sql_store(kind, tmp_path, request) as st:
        # The killed fold left nothing half-done (PostgreSQL rolls back the transaction of
        # a connection that went away: within moments, on a loaded machine too).
        wait_until(lambda: pending(st) == waiting, timeout=30)
    # A server started again folds them in the background (no pause this time), once.
    del server.extra_env["RANKWISE_TEST_COMPACT_PAUSE"]
    server.start()
    try:
        with open_sql_store(kind, tmp_path, request) as st:
            wait_until(lambda: pending(st) == 0, timeout=60)
            assert view(st) == view(ref)
            st.compact()  # again: nothing left to double
            assert view(st) == view(ref)
    finally:
        server.stop()
    ref.close()


def test_compactor_survives_a_postgres_restart(
    private_postgres: PrivatePostgres, tmp_path: Path, monkeypatch: Any
) -> None:
    from rankwise.store.postgres import PostgresStore

    monkeypatch.setenv("RANKWISE_COMPACT_EVERY", "0.1")
    pg = private_postgres
    store = PostgresStore(pg.dsn, wait_timeout=2.0)
    ref = direct(SQLiteStore(tmp_path / "ref.db"))
    ref.migrate()
    try:
        store.migrate()
        key = StreamId("p", "r", "rank-0", 0)
        store.ingest([(key, _records(0, 0, 50))])
        pg.stop("fast")
        time.sleep(1.0)  # the compactor's rounds fail meanwhile
        pg.start()

        def again() -> bool:
            try:
                store.ingest([(key, _records(0, 50, 100))])
                return True
            except Exception:
                return False

        wait_until(again, timeout=60)
        wait_until(lambda: pending(store) == 0, timeout=60)
        ref.ingest([(key, _records(0, 0, 100))])
        assert view(store) == view(ref)
    finally:
        store.close()
        ref.close()


# -- real servers uploading and compacting on PostgreSQL ------------------------------------

LOAD_RANKS, LOAD_SECONDS = 6, 6.0


def _upload(servers: list[Any], run_id: str) -> Any:
    """``LOAD_RANKS`` simulated ranks (``tests.helpers.loadsim``: real frames, the real
    upload protocol) train for ``LOAD_SECONDS`` and drain, their uploads rotating over
    ``servers`` (every third one sent to two at once, a retry crossing its request)."""
    from tests.helpers import loadsim

    urls = [s.url for s in servers] if len(servers) > 1 else []
    cfg = loadsim.Config(servers[0].url, run_id, list(range(LOAD_RANKS)), LOAD_SECONDS,
                         drain_timeout=90.0, token=servers[0].token, replicas=urls,
                         duplicate=3 if urls else 0)  # fmt: skip
    stats = loadsim.run_clients(cfg, 1)
    assert not stats.undrained, stats.statuses
    assert stats.statuses.get("500", 0) == 0, stats.statuses
    return stats


def _folded_exactly_once(dsn: str, run_id: str, stats: Any) -> None:
    """The servers' compactors (still running) fold every upload; then every value is
    stored once, and a final compaction finds nothing left to double."""
    from rankwise.store.postgres import PostgresStore
    from tests.helpers import loadsim

    with PostgresStore(dsn) as st:
        # pending() reads the table as it is: no read here folds anything first.
        wait_until(lambda: pending(st) == 0, timeout=60)
        steps = stats.steps
        assert min(steps.values()) >= 1, steps
        problems = loadsim.history_problems(st, run_id, steps)
        assert problems + loadsim.double_problems(st, run_id, steps) == []
        st.compact()
        assert loadsim.double_problems(st, run_id, steps) == []


def test_two_servers_compact_one_postgres_database_while_ranks_upload(
    pg_dsn: str, tmp_path: Path, monkeypatch: Any
) -> None:
    """Two ``rankwise server`` processes on one database, each with its compactor folding
    every 0.2 s, while ranks upload through both (the same upload to both at once, now
    and then): every value stored exactly once, no fold doubled."""
    from tests.helpers import loadsim
    from tests.helpers.env import free_port

    monkeypatch.setenv("RANKWISE_COMPACT_EVERY", "0.2")  # the servers inherit it
    a = loadsim.Server(pg_dsn, free_port(), log=tmp_path / "a.log")
    b = loadsim.Server(pg_dsn, free_port(), log=tmp_path / "b.log", token=a.token)
    try:
        a.start(timeout=90)
        b.start(timeout=90)
        stats = _upload([a, b], "two")
        assert all(stats.served.get(s.url, 0) > 0 for s in (a, b)), stats.served
        _folded_exactly_once(pg_dsn, "two", stats)
    finally:
        a.stop()
        b.stop()


def test_server_compactor_recovers_from_a_postgres_restart(
    private_postgres: PrivatePostgres, tmp_path: Path, monkeypatch: Any
) -> None:
    """PostgreSQL stopped for 5 s under a real server once ranks upload (longer than the
    store's 3 s wait for a connection, so an upload that arrives cannot just wait it
    out): the server answers 503 meanwhile and acknowledges again after the ranks'
    retries; its compactor's rounds fail meanwhile (logged) and then fold everything,
    once."""
    import threading

    import psycopg

    from tests.helpers import loadsim
    from tests.helpers.env import free_port

    pg = private_postgres
    monkeypatch.setenv("RANKWISE_COMPACT_EVERY", "0.2")
    server = loadsim.Server(pg.dsn, free_port(), log=tmp_path / "server.log")
    outage: list[str] = []

    def uploading() -> bool:
        with psycopg.connect(pg.dsn) as conn:
            row = conn.execute("SELECT COUNT(*) FROM runs WHERE run_id = 'restart'").fetchone()
        return bool(row and row[0])

    def restart() -> None:  # once the ranks' uploads arrive, however slowly they started
        wait_until(uploading, timeout=90, every=0.1)
        pg.stop("fast")
        outage.append("down")
        time.sleep(5.0)
        pg.start()
        outage.append("up")

    try:
        server.start(timeout=90)
        fault = threading.Thread(target=restart, daemon=True)
        fault.start()
        stats = _upload([server], "restart")
        fault.join(120)
        assert outage == ["down", "up"]
        assert stats.statuses.get("503", 0) > 0, stats.statuses  # told to come back
        _folded_exactly_once(pg.dsn, "restart", stats)
        assert "compaction failed, retrying" in server.log.read_text()
    finally:
        server.stop()


# -- migration from today's schema -----------------------------------------------------------


def test_a_version_14_database_migrates_and_goes_on(tmp_path: Path) -> None:
    """The version-14 file of ``tests/data/make_v14_store.py`` (written by the code before
    this change): migrated, it reads as a fresh store given the same records, and the
    streams go on logging through the new write path."""
    path = unpack(tmp_path / "old.db")
    ref = SQLiteStore(tmp_path / "ref.db")
    ref.migrate()
    with SQLiteStore(path) as old:
        assert old.schema_version() == 14
        old.migrate()
        assert old.schema_version() == M.LATEST >= 17
        for rank in range(V14_RANKS):
            key = StreamId("p", "old", f"rank-{rank}", 0)
            ref.ingest([(key, v14_records(rank, 0, V14_STEPS + 1))])
        assert view(old, "old") == view(ref, "old")
        for rank in range(V14_RANKS):
            key = StreamId("p", "old", f"rank-{rank}", 0)
            more = v14_records(rank, V14_STEPS + 1, V14_STEPS + 301)
            assert old.ingest([(key, more)])[key] == V14_STEPS + 300
            ref.ingest([(key, more)])
        assert pending(old) == V14_RANKS
        assert view(old, "old") == view(ref, "old")
        assert pending(old) == V14_RANKS  # merged in memory by the reads, not folded
        old.compact()
        assert pending(old) == 0
        assert view(old, "old") == view(ref, "old")
    ref.close()


def test_reads_see_a_value_the_moment_it_is_acknowledged(store: SQLStore) -> None:
    key = StreamId("p", "r", "rank-0", 0)
    for n in range(1, 30):
        mark = store.ingest([(key, _records(0, n - 1, n))])[key]
        rows = store.history("p", "r")
        assert len(rows) == len([r for r in _records(0, 0, mark + 1) if type(r) is R.Metrics])


def _metrics(rank: int, seqs: range, step: Any, at: Any, value: Any) -> list[R.AnyRecord]:
    """Rank ``rank``'s records ``seqs`` (a StreamStart at seq 0), one ``loss`` each."""
    out: list[R.AnyRecord] = []
    for seq in seqs:
        if seq == 0:
            out.append(R.StreamStart(0, T0, "p", "m", f"rank-{rank}", 0, rank=rank, world_size=2))
        else:
            out.append(R.Metrics(seq, at(seq), step(seq), {"loss": value(seq)}))
    return out


def test_a_band_by_time_merges_a_block_stored_outside_the_range(store: SQLStore) -> None:
    """A step's time is its earliest point's. Rank 1's step 5, compacted, came at T0+50;
    rank 0's, pending, at T0+15: merged, step 5 falls in [T0+10, T0+20] with both ranks'
    values, though its stored block's times lie outside that range."""
    late = StreamId("p", "m", "rank-1", 0)
    store.ingest([(late, _metrics(1, range(2), lambda s: 5, lambda s: T0 + 50, lambda s: 3.0))])
    store.compact()
    early = StreamId("p", "m", "rank-0", 0)
    store.ingest([(early, _metrics(0, range(2), lambda s: 5, lambda s: T0 + 15, lambda s: 1.0))])
    assert pending(store) == 1
    band = store.band("p", "m", "loss", x="time", lo=T0 + 10, hi=T0 + 20)
    assert (band.step, band.n, band.mean, band.x) == ([5], [2], [2.0], [T0 + 15])
    last = store.cross_rank_last("p", "m")["loss"]
    assert (last.step, last.n, last.min, last.max) == (5, 2, 1.0, 3.0)


def test_a_chart_sized_read_merges_pending_points_into_the_stored_tiers(store: SQLStore) -> None:
    """12,000 compacted points per rank (chunks read through their summaries) and 700
    pending: the chart keeps every bucket's extremes, the newest point included, and
    returns only points that were logged."""
    n_old, n_new = 12_000, 700
    ys = {r: [((s * 7919 + r * 104729) % 1000) / 10.0 for s in range(n_old + n_new + 1)]
          for r in range(2)}  # fmt: skip
    ys[1][n_old + 300] = -5.0  # the lowest value of all, still pending
    ys[0][n_old - 2] = 250.0  # the highest, compacted
    for rank in range(2):
        key = StreamId("p", "m", f"rank-{rank}", 0)
        recs = _metrics(rank, range(n_old + 1), lambda s: s, lambda s: T0 + s,
                        lambda s, r=rank: ys[r][s])  # fmt: skip
        store.ingest([(key, recs)])
    store.compact()
    for rank in range(2):
        key = StreamId("p", "m", f"rank-{rank}", 0)
        recs = _metrics(rank, range(n_old + 1, n_old + n_new + 1), lambda s: s,
                        lambda s: T0 + s, lambda s, r=rank: ys[r][s])  # fmt: skip
        store.ingest([(key, recs)])
    assert pending(store) == 2
    for got in store.series("p", "m", "loss", max_points=80):
        r = int(got.label.split("-")[1])
        assert got.downsampled and len(got.x) <= 80 * 2
        assert got.x[0] == 1 and got.x[-1] == n_old + n_new  # the newest point is drawn
        truth = {float(s): ys[r][s] for s in range(1, n_old + n_new + 1)}
        assert all(truth[x] == y for x, y in zip(got.x, got.y))
        assert min(got.y) == min(truth.values()) and max(got.y) == max(truth.values())
    band = store.band("p", "m", "loss", max_points=80)
    assert band.step[-1] == n_old + n_new and min(band.min) == -5.0 and max(band.max) == 250.0
    assert pending(store) == 2  # the reads merged, nothing was folded
