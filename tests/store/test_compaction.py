"""Uploads stored whole and compacted later (``rankwise.store.pending``, ``.compact``).

Every read must be what today's write path (each upload appended to its series and the
run's aggregate blocks at once: a store with ``_direct`` set) gives for the same records,
before, during and after compaction, whoever ingests and whoever compacts; a compaction
killed at any point is replayed, never doubled.
"""

from __future__ import annotations

import gzip
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
from tests.data.make_v14_store import v14_records
from tests.helpers.stores import PrivatePostgres, open_sql_store, private_postgres, race
from tests.helpers.wait import wait_until

T0 = 1_700_000_000.0
__all__ = ["private_postgres"]  # the fixture, used by name below

V14_DB = Path(__file__).parents[1] / "data" / "v14_store.sqlite.gz"


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


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_op, min_size=1, max_size=25))
def test_reads_equal_todays_with_replays_and_two_ingesters(ops: list[Any]) -> None:
    tmp = Path(tempfile.mkdtemp())
    a = SQLiteStore(tmp / "s.db")
    a.migrate()
    b = SQLiteStore(tmp / "s.db")  # a second ingester (another process, as far as it knows)
    ref = direct(SQLiteStore(tmp / "ref.db"))
    ref.migrate()
    try:
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
                assert before == 0 or pending(a) == 0  # the read folded what it needed
        assert view(a) == view(ref)
        assert pending(a) == 0
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


def test_server_killed_inside_compaction_replays_it(tmp_path: Path) -> None:
    """A real ``rankwise server`` SIGKILLed while its compactor holds a fold uncommitted:
    the rows are still pending afterwards, and the next compaction folds them once."""
    from tests.helpers.servers import ServerProcess

    db = tmp_path / "kill.db"
    with SQLiteStore(db) as st:
        st.migrate()
        st._compactor = object()  # type: ignore[assignment]  # keep this one from folding
        for first in range(0, 150, 10):
            for rank in range(3):
                key = StreamId("p", "r", f"rank-{rank}", 0)
                st.ingest([(key, _records(rank, first, first + 10))])
        st._compactor = None
        waiting = pending(st)
    assert waiting == 45
    flag = tmp_path / "paused"
    server = ServerProcess.db(f"sqlite:///{db}", tmp_path / "server.log")
    server.extra_env.update(
        {"RANKWISE_TEST_COMPACT_PAUSE": str(flag), "RANKWISE_COMPACT_EVERY": "0.1"}
    )
    server.start(wait=False)  # its compactor holds the write lock from the first fold on
    try:
        wait_until(flag.exists, timeout=60)
        server.kill()  # SIGKILL, inside the compaction transaction
    finally:
        server.stop()
    ref = direct(SQLiteStore(tmp_path / "ref.db"))
    ref.migrate()
    with SQLiteStore(db) as st:
        assert pending(st) == waiting  # the killed fold left nothing half-done
        for first in range(0, 150, 10):
            for rank in range(3):
                key = StreamId("p", "r", f"rank-{rank}", 0)
                ref.ingest([(key, _records(rank, first, first + 10))])
        assert view(st) == view(ref)
        assert pending(st) == 0
        st.compact()  # again: nothing left to double
        assert view(st) == view(ref)
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


# -- migration from today's schema -----------------------------------------------------------


def test_a_version_14_database_migrates_and_goes_on(tmp_path: Path) -> None:
    """The version-14 file of ``tests/data/make_v14_store.py`` (written by the code before
    this change): migrated, it reads as a fresh store given the same records, and the
    streams go on logging through the new write path."""
    path = tmp_path / "old.db"
    with gzip.open(V14_DB) as src, open(path, "wb") as dst:
        shutil.copyfileobj(src, dst)
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
        assert pending(old) == 0
    ref.close()


def test_reads_see_a_value_the_moment_it_is_acknowledged(store: SQLStore) -> None:
    key = StreamId("p", "r", "rank-0", 0)
    for n in range(1, 30):
        mark = store.ingest([(key, _records(0, n - 1, n))])[key]
        rows = store.history("p", "r")
        assert len(rows) == len([r for r in _records(0, 0, mark + 1) if type(r) is R.Metrics])
