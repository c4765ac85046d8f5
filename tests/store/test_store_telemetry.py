"""Rank health in both stores: console lines, system series, step progress and stalls.

SQLite always; PostgreSQL with ``RANKWISE_TEST_POSTGRES`` (skipped without it, failing
under ``CI=true``). Expected values are computed from the records themselves, never read
back from the store under test.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rankwise.health import StreamSteps, assess, step_points
from rankwise.store import migrations as M
from rankwise.store.health import MAX_TEXT, STEP_RESOLUTION, quantity
from rankwise.store.sql import SQLStore
from rankwise.store.types import ConsoleQuery
from rankwise.stream import records as R
from rankwise.stream.identity import StreamId
from tests.helpers.telemetry import (
    T0,
    console_stream,
    expected_lines,
    start,
    steps_stream,
    system_stream,
)


def got(page: Any) -> list[tuple[str, str, float, str]]:
    return [(ln.label, ln.stream, ln.time, ln.text) for ln in page.lines]


@pytest.fixture
def console_run(store: SQLStore) -> list[tuple[str, str, float, str]]:
    rng = random.Random(5)
    keys = [StreamId("p", "r", f"rank-{i}", 0) for i in range(4)]
    streams = {k: console_stream(k, i, i // 2, 700, rng) for i, k in enumerate(keys)}
    # Uploads arrive interleaved, in batches, some re-sent: each line is stored once.
    for k, recs in streams.items():
        cut = len(recs) // 2
        store.ingest([(k, recs[:cut])])
        store.ingest([(k, recs[cut // 2 :])])
        store.ingest([(k, recs)])
    return expected_lines(streams)


def test_console_pages_in_time_order(store: SQLStore, console_run: list[Any]) -> None:
    want = console_run
    assert len(want) == 2800
    tail = store.console("p", "r", ConsoleQuery(limit=100))
    assert tail is not None and got(tail) == want[-100:]
    assert (tail.total, tail.offset) == (2800, 2700)
    # Offset pages tile the whole log.
    pages = []
    for off in range(0, 2800, 333):
        page = store.console("p", "r", ConsoleQuery(offset=off, limit=333, count=False))
        assert page is not None and page.offset == off and page.total is None
        pages += got(page)
    assert pages == want
    # Keyset paging forwards from the first line and backwards from the last.
    first = store.console("p", "r", ConsoleQuery(offset=0, limit=1))
    assert first is not None
    forward, cursor = got(first), first.lines[0].id
    while True:
        page = store.console("p", "r", ConsoleQuery(after=cursor, limit=500))
        assert page is not None
        if not page.lines:
            break
        assert page.offset == len(forward)
        forward += got(page)
        cursor = page.lines[-1].id
    assert forward == want
    back, cursor = got(tail), tail.lines[0].id
    while True:
        page = store.console("p", "r", ConsoleQuery(before=cursor, limit=450))
        assert page is not None
        if not page.lines:
            break
        back = got(page) + back
        assert page.offset == 2800 - len(back)
        cursor = page.lines[0].id
    assert back == want


def test_console_filters(store: SQLStore, console_run: list[Any]) -> None:
    want = console_run

    def check(q: ConsoleQuery, keep: Any) -> None:
        expect = [w for w in want if keep(w)]
        page = store.console("p", "r", q)
        assert page is not None
        assert page.total == len(expect) and got(page) == expect[-q.limit :]

    check(ConsoleQuery(labels=["rank-2"], limit=5000), lambda w: w[0] == "rank-2")
    check(
        ConsoleQuery(labels=["rank-1", "rank-3"], limit=50), lambda w: w[0] in ("rank-1", "rank-3")
    )
    check(ConsoleQuery(nodes=[1], limit=5000), lambda w: w[0] in ("rank-2", "rank-3"))
    check(ConsoleQuery(labels=["rank-0"], nodes=[1], limit=5000), lambda w: w[0] != "rank-1")
    check(ConsoleQuery(labels=["nobody"]), lambda w: False)
    check(ConsoleQuery(stream="stderr", limit=5000), lambda w: w[1] == "stderr")
    check(ConsoleQuery(stream="stdout", labels=["rank-1"], limit=60),
          lambda w: w[1] == "stdout" and w[0] == "rank-1")  # fmt: skip
    # Search: a case-insensitive substring; % and _ are literal characters.
    check(ConsoleQuery(q="nccl warn", limit=5000), lambda w: "NCCL WARN" in w[3])
    check(ConsoleQuery(q="0%_d", limit=5000), lambda w: "0%_d" in w[3])
    check(ConsoleQuery(q="0%_e", limit=5000), lambda w: False)
    # Pages shorter than the matches are counted (counters, or a scan for a search).
    check(ConsoleQuery(q="nccl warn", limit=3), lambda w: "NCCL WARN" in w[3])
    check(
        ConsoleQuery(q="line 1", stream="stderr", limit=7),
        lambda w: "line 1" in w[3] and w[1] == "stderr",
    )
    check(
        ConsoleQuery(stream="stderr", nodes=[0], limit=9),
        lambda w: w[1] == "stderr" and w[0] in ("rank-0", "rank-1"),
    )
    last = store.console("p", "r", ConsoleQuery(offset=2790, limit=50))
    assert (
        last is not None and (last.total, last.offset) == (2800, 2790) and got(last) == want[2790:]
    )
    beyond = store.console("p", "r", ConsoleQuery(offset=3000, limit=50))
    assert beyond is not None and (beyond.total, beyond.lines) == (2800, [])
    check(ConsoleQuery(q="line 12", stream="stderr", labels=["rank-0"], limit=5000),
          lambda w: "line 12" in w[3] and w[1] == "stderr" and w[0] == "rank-0")  # fmt: skip
    # A time range (inclusive), alone and with other filters; counted by the index.
    lo, hi = want[700][2], want[1500][2]
    check(ConsoleQuery(since=lo, until=hi, limit=50), lambda w: lo <= w[2] <= hi)
    check(ConsoleQuery(since=lo, labels=["rank-3"], stream="stderr", limit=20),
          lambda w: lo <= w[2] and w[0] == "rank-3" and w[1] == "stderr")  # fmt: skip
    ranged = store.console("p", "r", ConsoleQuery(since=lo, until=hi, at=want[1000][2]))
    assert ranged is not None and ranged.offset == 300 and ranged.total == 801
    # Jump to a time: the lines from there on, and where they are among all.
    t = want[1234][2]
    page = store.console("p", "r", ConsoleQuery(at=t - 0.01, limit=10))
    assert page is not None and page.offset == 1234 and got(page) == want[1234:1244]
    page = store.console("p", "r", ConsoleQuery(at=t, labels=["rank-2"], limit=3))
    mine = [w for w in want if w[0] == "rank-2"]
    first = next(i for i, w in enumerate(mine) if w[2] >= t)
    assert page is not None and page.offset == first and got(page) == mine[first : first + 3]
    end = store.console("p", "r", ConsoleQuery(at=want[-1][2] + 1))
    assert end is not None and end.lines == [] and end.offset == 2800


def test_console_lines_carry_identity_and_odd_text(store: SQLStore) -> None:
    key = StreamId("p", "odd", "rank-5", 0)
    long = "x" * (MAX_TEXT + 10)
    recs: list[R.AnyRecord] = [
        start(key, 5, 1),
        R.Console(seq=1, time=T0 + 1, stream="stdout", lines=["nul\x00here", "\x1b[31mred\x1b[0m"]),
        R.Console(seq=2, time=T0 + 2, stream="stderr", lines=[long, "<script>x</script>"],
                  times=[T0 + 1.5, T0 + 1.7]),
    ]  # fmt: skip
    store.ingest([(key, recs)])
    page = store.console("p", "odd", ConsoleQuery())
    assert page is not None
    assert [(ln.label, ln.rank, ln.node, ln.stream) for ln in page.lines] == [
        ("rank-5", 5, 1, "stdout"), ("rank-5", 5, 1, "stdout"),
        ("rank-5", 5, 1, "stderr"), ("rank-5", 5, 1, "stderr"),
    ]  # fmt: skip
    # No `times`: every line has the record's time.
    assert [ln.time for ln in page.lines] == [T0 + 1, T0 + 1, T0 + 1.5, T0 + 1.7]
    texts = [ln.text for ln in page.lines]
    assert texts[0] == "nul\ufffdhere" and texts[1] == "\x1b[31mred\x1b[0m"
    assert texts[2].startswith("x" * MAX_TEXT) and texts[2].endswith(
        "[10 more characters not stored]"
    )
    assert texts[3] == "<script>x</script>"
    assert store.console("p", "nope", ConsoleQuery()) is None
    for bad in (
        ConsoleQuery(offset=1, at=2.0),
        ConsoleQuery(limit=0),
        ConsoleQuery(stream="x"),
        ConsoleQuery(since=2.0, until=1.0),
    ):
        with pytest.raises(ValueError):
            store.console("p", "odd", bad)
    with pytest.raises(ValueError, match="no console line"):
        store.console("p", "odd", ConsoleQuery(after=10**9))


def test_system_series_per_node_gpu_and_rank(store: SQLStore) -> None:
    keys = [StreamId("p", "sys", f"rank-{i}", 0) for i in range(4)]
    streams = {
        k: system_stream(k, i, i // 2, 30, node_sampler=i % 2 == 0) for i, k in enumerate(keys)
    }
    for k, recs in streams.items():
        store.ingest([(k, recs[:25])])
        store.ingest([(k, recs)])
    raw = store.system_keys("p", "sys")
    assert raw == sorted(
        ["proc/rss_bytes", "proc/cpu_percent", "node/cpu_percent", "gpu/0/util_percent",
         "gpu/1/util_percent", "node/net_sent_bytes_per_s"]
    )  # fmt: skip
    assert sorted({quantity(k)[0] for k in raw}) == [
        "gpu/util_percent", "node/cpu_percent", "node/net_sent_bytes_per_s",
        "proc/cpu_percent", "proc/rss_bytes",
    ]  # fmt: skip
    # System keys are not metrics: not listed, not in history, no band.
    assert store.metric_keys("p", "sys") == ["loss"]
    assert all(set(row) == {"step", "time", "label", "loss"} for row in store.history("p", "sys"))

    def values(label: str, key: str) -> tuple[list[float], list[float]]:
        recs = streams[next(k for k in keys if k.label == label)]
        pts = [
            (r.time, float(r.values[key])) for r in recs if type(r) is R.System and key in r.values
        ]
        return [t for t, _ in pts], [v for _, v in pts]

    gpu = store.system_series("p", "sys", "gpu/util_percent")
    assert gpu is not None
    assert [(s.name, s.label, s.node, s.gpu, s.host) for s in gpu] == [
        ("node 0 · gpu 0", "rank-0", 0, 0, "node0"), ("node 0 · gpu 1", "rank-0", 0, 1, "node0"),
        ("node 1 · gpu 0", "rank-2", 1, 0, "node1"), ("node 1 · gpu 1", "rank-2", 1, 1, "node1"),
    ]  # fmt: skip
    for s in gpu:
        assert (s.x, s.y) == values(s.label, s.key) and not s.downsampled
    node = store.system_series("p", "sys", "node/cpu_percent")
    assert node is not None and [s.name for s in node] == ["node 0", "node 1"]
    proc = store.system_series("p", "sys", "proc/rss_bytes")
    assert proc is not None and [s.name for s in proc] == [f"rank {i}" for i in range(4)]
    for s in proc:
        assert (s.x, s.y) == values(s.label, "proc/rss_bytes")
    # A time range and chart-sized downsampling (M4 keeps every bucket's extremes).
    part = store.system_series("p", "sys", "proc/rss_bytes", lo=T0 + 95, hi=T0 + 205)
    assert part is not None and part[1].x == [T0 + 10 * i for i in range(10, 21)]
    small = store.system_series("p", "sys", "gpu/util_percent", max_points=8)
    assert small is not None and all(s.downsampled and len(s.x) <= 8 for s in small)
    assert [max(s.y) for s in small] == [max(s.y) for s in gpu]
    assert [min(s.y) for s in small] == [min(s.y) for s in gpu]
    assert store.system_series("p", "sys", "gpu/nothing") == []
    assert store.system_series("p", "nope", "node/cpu_percent") is None
    assert store.system_keys("p", "nope") is None


def test_health_from_the_store_matches_the_records(store: SQLStore) -> None:
    """Step progress stored at ingest gives the same assessment as the raw records."""
    keys = [StreamId("p", "h", f"rank-{i}", 0) for i in range(4)]
    stall = R.Stall(seq=0, time=T0 + 400, idle_seconds=150, where="all_reduce at train.py:88",
                    stacks={"MainThread": 'File "train.py", line 88, in step'})  # fmt: skip
    streams = {
        keys[0]: steps_stream(keys[0], 0, [T0 + s * 1.0 for s in range(400)]),
        keys[1]: steps_stream(keys[1], 1, [T0 + s * 1.0 for s in range(400)]),
        keys[2]: steps_stream(keys[2], 2, [T0 + s * 2.5 for s in range(160)]),  # a straggler
        keys[3]: steps_stream(keys[3], 3, [T0 + s * 1.0 for s in range(250)], stall),
    }
    rng = random.Random(3)
    for k, recs in streams.items():
        cuts = sorted(rng.sample(range(1, len(recs)), 9))
        for a, b in zip([0, *cuts], [*cuts, len(recs)]):
            store.ingest([(k, recs[max(0, a - 5) : b])])
    now = T0 + 420
    got = store.health_streams("p", "h", window=60, now=now)
    assert got is not None
    run, inputs, at = got
    assert run.id == "h" and at == now and [s.label for s in inputs] == [k.label for k in keys]
    assert inputs[3].stall is not None and inputs[3].stall.where == "all_reduce at train.py:88"
    stored = assess(inputs, now=at, window=60)
    reference = assess(
        [
            StreamSteps(s.label, step_points(streams[k]), rank=s.rank, node=s.node,
                        state=s.state, last_seen=s.last_seen, stall=s.stall, host=s.host)
            for k, s in zip(keys, inputs)
        ],
        now=at,
        window=60,
    )  # fmt: skip
    assert stored == reference
    by = {h.label: h for h in stored}
    assert by["rank-2"].slow and not by["rank-0"].slow
    assert by["rank-3"].stalled and by["rank-3"].stall_where == "all_reduce at train.py:88"
    assert by["rank-3"].stacks == stall.stacks
    # Only the points the window needs were read: the first, the last before, the window.
    assert len(inputs[0].points) == 2 + 40  # steps 0, 359, then 360 .. 399
    events = store.stalls("p", "h")
    assert events is not None and [(e.label, e.where, e.cleared) for e in events] == [
        ("rank-3", "all_reduce at train.py:88", False)
    ]
    assert events[0].stacks == stall.stacks and events[0].idle_seconds == 150
    assert store.stalls("p", "h", labels=["rank-0"]) == []
    assert store.health_streams("p", "nope", window=60) is None


def test_fast_steps_are_thinned_but_the_last_step_is_exact(store: SQLStore) -> None:
    key = StreamId("p", "fast", "rank-0", 0)
    n = 60_000
    times = (T0 + np.arange(n) * 0.001).tolist()  # 1000 steps a second for a minute
    recs = steps_stream(key, 0, times)
    for a in range(0, len(recs), 10_000):  # batches of 5 s (as a sync of an offline run)
        store.ingest([(key, recs[a : a + 10_000])])
    got = store.health_streams("p", "fast", window=1000, now=T0 + 60)
    assert got is not None
    (steps,) = got[1]
    pts = list(steps.points)
    assert pts[0] == (0, T0) and pts[-1] == (n - 1, times[-1])
    # 13 batches: a point per STEP_RESOLUTION in each, and each one's last new step.
    assert 60 / STEP_RESOLUTION <= len(pts) <= 13 * (5 / STEP_RESOLUTION + 2)
    window = 30.0
    (h,) = assess([steps], now=T0 + 60, window=window)
    (ref,) = assess([StreamSteps("rank-0", step_points(recs))], now=T0 + 60, window=window)
    assert h.last_step == ref.last_step == n - 1
    # The step at the window's start is at most STEP_RESOLUTION old.
    assert h.step_rate == pytest.approx(ref.step_rate, rel=1.05 * STEP_RESOLUTION / window)


def test_migration_4_over_data_of_version_3(tmp_path: Path) -> None:
    from rankwise.store.sqlite import SQLiteStore

    with SQLiteStore(tmp_path / "old.db") as old:
        old.migrate(target=3)
        key = StreamId("p", "old", "rank-0", 0)
        old.ingest([(key, [start(key, 0, 0), R.Metrics(seq=1, time=T0, step=0, values={"a": 1})])])
        old.migrate()
        assert old.schema_version() == M.LATEST >= 4
        recs = [R.Console(seq=2, time=T0 + 1, stream="stdout", lines=["after the upgrade"])]
        old.ingest([(key, recs)])
        page = old.console("p", "old", ConsoleQuery())
        assert page is not None and [ln.text for ln in page.lines] == ["after the upgrade"]


def test_one_call_of_many_streams_writes_what_one_call_each_does(store: SQLStore) -> None:
    """The streams of one ingest call write their pending rows, console lines and marks
    together at its end (``ingest._Writes``): the same marks, lines, line counts, points
    and pending rows as a call per stream, also when one stream comes twice in a call."""
    from rankwise.store.ingest import apply_streams

    def records(run: str, i: int) -> list[R.AnyRecord]:
        label = f"rank-{i}"
        recs: list[R.AnyRecord] = [R.StreamStart(0, 1.0, "p", run, label, 0, rank=i)]
        for s in range(6):
            recs.append(R.Metrics(len(recs), 2.0 + s, s, {"loss": s + i / 10, "acc": float(i)}))
            if s % 2 == i % 2:
                err = "stderr" if s == 4 else "stdout"
                recs.append(R.Console(len(recs), 2.5 + s, err, [f"{i}:{s}", f"{i}:{s}b"]))
        return recs

    def twice_in_one_transaction(run: str) -> None:
        # the same stream twice in one call: the second part continues the first's mark,
        # which the first has not written yet
        key, recs = StreamId("p", run, "rank-9", 0), records(run, 9)
        sid, run_pk = store._ids(key)
        mids = store._metrics({"loss", "acc"})
        parts = [(sid, run_pk, recs[:5]), (sid, run_pk, recs[5:])]
        assert store._write(lambda tx: apply_streams(tx, parts, mids)) == [4, len(recs) - 1]

    def state(run: str) -> tuple[Any, ...]:
        page = store.console("p", run, ConsoleQuery(limit=1000))
        info = store.get_run("p", run)
        assert page is not None and info is not None
        pk = store._ids(StreamId("p", run, "rank-0", 0))[1]

        def rows(tx: Any) -> tuple[Any, ...]:
            labels = "(SELECT label FROM streams s WHERE s.id = b.stream)"
            pending = tx.all(
                f"SELECT {labels}, seq_lo, seq_hi FROM upload_blocks b WHERE run = ?", (pk,)
            )
            counts = tx.all(
                f"SELECT {labels.replace('b.', 'c.')}, err, n FROM console_counts c "
                "WHERE stream IN (SELECT id FROM streams WHERE run = ?)",
                (pk,),
            )
            return sorted(map(tuple, pending)), sorted(map(tuple, counts))

        return (
            sorted((s.label, s.points, s.last_step) for s in info.streams),
            sorted((ln.label, ln.stream, ln.time, ln.text) for ln in page.lines),
            page.total,
            *store._read(rows),
            [{k: v for k, v in h.items() if k != "run"} for h in store.history("p", run)],
        )

    for i in [*range(5), 9]:  # one call a stream
        recs = records("apart", i)
        key = StreamId("p", "apart", f"rank-{i}", 0)
        store.ingest([(key, recs[:5])])
        store.ingest([(key, recs[5:])])
    together = {StreamId("p", "both", f"rank-{i}", 0): records("both", i) for i in range(5)}
    store.ingest([(k, recs[:5]) for k, recs in together.items()])
    store.ingest([(k, recs[5:]) for k, recs in together.items()])
    twice_in_one_transaction("both")
    apart, both = state("apart"), state("both")
    assert apart == both
    streams, lines, total, pending, counts, history = both
    assert [p for _, p, _ in streams] == [12] * 6 and total == len(lines) == 36
    assert len(pending) == 12 and sum(n for _, _, n in counts) == 36
    assert {e for _, e, _ in counts} == {0, 1} and len(history) == 36


@pytest.mark.parametrize("update_from", [True, False])
def test_multi_row_writes_of_sqlite_with_and_without_update_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, update_from: bool
) -> None:
    """SQLite's ``update_rows``: one ``UPDATE ... FROM (VALUES ...)`` per statement's rows,
    or a row at a time where SQLite is older than 3.33; the same rows either way (NULLs
    and blobs included, by one key column or two), rows not named left alone. And
    ``many_returning`` of a plain insert, as multi-row statements, returns each new id."""
    import sqlite3

    from rankwise.store import sqlite as S

    monkeypatch.setattr(S, "_UPDATE_FROM", update_from)
    conn = sqlite3.connect(tmp_path / "t.db", isolation_level=None)
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, a INTEGER, b BLOB, c REAL)")
    conn.execute("CREATE TABLE u (s INTEGER, m INTEGER, n INTEGER, PRIMARY KEY (s, m))")
    conn.executemany("INSERT INTO t VALUES (?, 0, NULL, 0.5)", [(i,) for i in range(260)])
    conn.executemany(
        "INSERT INTO u VALUES (?, ?, 0)", [(s, m) for s in range(3) for m in range(90)]
    )
    tx = S._Tx(conn)
    rows = [(i * 2, bytes([i % 256]) if i % 3 else None, None, i) for i in range(0, 250, 2)]
    tx.update_rows("t", ("id",), ("a", "b", "c"), rows)
    got = {r[0]: r[1:] for r in conn.execute("SELECT id, a, b, c FROM t")}
    for i in range(260):
        named = i % 2 == 0 and i < 250
        want = (i * 2, bytes([i % 256]) if i % 3 else None, None) if named else (0, None, 0.5)
        assert got[i] == want, i
    tx.update_rows(
        "u", ("s", "m"), ("n",), [(s * 100 + m, s, m) for s in (0, 2) for m in range(90)]
    )
    assert sorted(conn.execute("SELECT s, m, n FROM u")) == [
        (s, m, s * 100 + m if s != 1 else 0) for s in range(3) for m in range(90)
    ]
    conn.execute("BEGIN IMMEDIATE")
    ids = tx.many_returning(
        "INSERT INTO t (a, b, c) VALUES (?, ?, ?) RETURNING id", [(7, None, 1.0)] * 250
    )
    conn.execute("COMMIT")
    assert ids == [(i,) for i in range(260, 510)]
    assert conn.execute("SELECT COUNT(*) FROM t WHERE a = 7 AND id >= 260").fetchone() == (250,)


def test_insert_rows_writes_the_same_rows_on_either_store(store: SQLStore) -> None:
    """``tx.insert_rows``: multi-row statements on SQLite, the one-row statement
    pipelined on PostgreSQL (``Tx.pipelined``); the same rows either way, past one
    statement's rows, and an ``ON CONFLICT`` tail applied to each row (here an upsert
    adding to rows already there)."""
    from rankwise.store.tx import insert_rows, rows_per_statement

    assert rows_per_statement(3) < 250
    key = StreamId("p", "ins", "rank-0", 0)
    store.ingest([(key, [R.StreamStart(0, 1.0, "p", "ins", "rank-0", 0)])])
    sid = store._ids(key)[0]
    head = "INSERT INTO console_counts (stream, err, n) VALUES"
    upsert = " ON CONFLICT (stream, err) DO UPDATE SET n = console_counts.n + excluded.n"
    rows = [(sid, err, err + 1) for err in range(250)]

    def write(tx: Any) -> None:
        insert_rows(tx, head, 3, rows)
        insert_rows(tx, head, 3, rows[::2], upsert)
        insert_rows(tx, head, 3, [])

    store._write(write)
    got = store._read(
        lambda tx: tx.all("SELECT err, n FROM console_counts WHERE stream = ? ORDER BY err", (sid,))
    )
    assert [tuple(r) for r in got] == [(e, (e + 1) * (2 if e % 2 == 0 else 1)) for e in range(250)]
