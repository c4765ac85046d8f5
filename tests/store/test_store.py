"""One suite for both stores (SQLite always; PostgreSQL with RANKWISE_TEST_POSTGRES).

Test data are real records (``rankwise.stream.records``); expected values are computed
from those records with numpy, never read back from the store under test.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rankwise.errors import SchemaTooNewError, UsageError
from rankwise.store import migrations as M
from rankwise.store import open_store
from rankwise.store.base import RunQuery
from rankwise.store.fold_cache import decode_fold
from rankwise.store.sql import SQLStore
from rankwise.stream import records as R
from rankwise.stream.identity import StreamId
from rankwise.wire.runs import CrossRankValue
from tests.helpers.env import REPO, clean_env
from tests.helpers.stores import open_sql_store, race
from tests.helpers.streams import T0, make_stream


def metric_points(recs: list[R.AnyRecord], name: str) -> list[tuple[int, float]]:
    return [
        (r.step, float(r.values[name])) for r in recs if type(r) is R.Metrics and name in r.values
    ]


# -- schema ----------------------------------------------------------------------------------


def test_migrations_numbered_and_repeatable(raw_store: SQLStore) -> None:
    assert raw_store.schema_version() == 0
    raw_store.migrate(target=1)
    assert raw_store.schema_version() == 1
    key = StreamId("p", "r", "rank-0", 0)
    raw_store.ingest([(key, make_stream(key, 10))])  # version 1 already holds data
    raw_store.migrate()
    raw_store.migrate()
    assert raw_store.schema_version() == M.LATEST == len(M.MIGRATIONS)
    assert raw_store.acked(key) == 11
    assert len(raw_store.history("p", "r")) == 10
    # Blocks written in the current form before a data migration are left as they are.
    assert raw_store.band("p", "r", "loss").n == [1] * 10
    versions = raw_store._read(lambda tx: tx.all("SELECT version FROM schema_version ORDER BY 1"))
    assert [v for (v,) in versions] == [m.version for m in M.MIGRATIONS]


def test_newer_schema_is_refused(store: SQLStore) -> None:
    store._write(
        lambda tx: tx.run(
            "INSERT INTO schema_version (version, name, applied) VALUES (?, ?, ?)",
            (M.LATEST + 1, "from the future", 0.0),
        )
    )
    with pytest.raises(SchemaTooNewError, match="upgrade rankwise"):
        store.migrate()


# -- exactly once ----------------------------------------------------------------------------


def _fingerprint(st: SQLStore, project: str, run_id: str) -> Any:
    run = st.get_run(project, run_id)
    assert run is not None
    band = st.band(project, run_id, "loss", max_points=10**6)
    return (
        st.history(project, run_id),
        (band.x, band.n, band.min, band.max),
        # sums depend on the order batches merged in, by an ulp at most
        np.round(np.array([band.mean, band.std]), 12).tolist(),
        [(s.label, s.incarnation, s.acked_seq, s.points, s.last_step) for s in run.streams],
        run.summary,
    )


def test_replays_change_nothing(store: SQLStore, tmp_path: Path) -> None:
    keys = [StreamId("p", "r", f"rank-{i}", 0) for i in range(3)]
    streams = {k: make_stream(k, 300, rank=i, world=3) for i, k in enumerate(keys)}
    rng = random.Random(7)
    for k, recs in streams.items():
        cuts = sorted(rng.sample(range(1, len(recs)), 6))
        for a, b in zip([0, *cuts], [*cuts, len(recs)]):
            # every batch re-sends a random stretch already applied before its new records
            store.ingest([(k, recs[rng.randrange(0, a + 1) : b])])
            store.ingest([(k, recs[:b])])  # the whole prefix again
    for k, recs in streams.items():
        assert store.ingest([(k, recs)]) == {k: len(recs) - 1}  # the whole stream twice
    got = _fingerprint(store, "p", "r")

    from rankwise.store.sqlite import SQLiteStore

    with SQLiteStore(tmp_path / "once.db") as once:
        once.migrate()
        once.ingest(list(streams.items()))
        assert _fingerprint(once, "p", "r") == got
    run = store.get_run("p", "r")
    assert run is not None and sum(s.points for s in run.streams) == 3 * 300 * 2
    assert len(store.history("p", "r", keys=["loss"])) == 900


def test_gaps_are_refused_and_order_restored(store: SQLStore) -> None:
    key = StreamId("p", "r", "rank-0", 0)
    recs = make_stream(key, 50)
    assert store.ingest([(key, recs[:10])]) == {key: 9}
    assert store.ingest([(key, recs[15:30])]) == {key: 9}  # a gap: nothing applied
    assert store.acked(key) == 9
    shuffled = recs[10:30] + recs[5:12]
    random.Random(1).shuffle(shuffled)
    assert store.ingest([(key, shuffled)]) == {key: 29}  # sorted, repeats once
    # a batch that runs into a gap applies up to it and stops
    assert store.ingest([(key, recs[30:40] + recs[45:])]) == {key: 39}
    assert store.ingest([(key, []), (key, recs[40:])]) == {key: len(recs) - 1}
    steps = [r["step"] for r in store.history("p", "r")]
    assert steps == list(range(50))
    assert store.acked(StreamId("p", "r", "nope", 0)) == -1


def test_a_bound_stream_takes_only_its_secret(store: SQLStore) -> None:
    """Both stores check, under the stream's row lock, the secret each upload presents
    against the digest the stream's first StreamStart names; a refused batch applies
    nothing, also when merged with a good one of the same stream (the group commit then
    retries them one by one). Without ``secrets`` (the local indexer) nothing is asked."""
    from rankwise.store.ingest import StreamKeyRefused
    from rankwise.stream import streamkey

    key = StreamId("p", "bound", "rank-0", 0)
    recs = make_stream(key, 20)
    first = recs[0]
    assert isinstance(first, R.StreamStart)
    first.key_digest = streamkey.digest("s3cret")
    assert store.ingest([(key, recs[:5])], ["s3cret"]) == {key: 4}
    for wrong in (None, "guess"):
        with pytest.raises(StreamKeyRefused):
            store.ingest([(key, recs[5:10])], [wrong])
    with pytest.raises(StreamKeyRefused):  # merged with a good upload: all or nothing
        store.ingest([(key, recs[5:8]), (key, recs[8:10])], ["s3cret", None])
    assert store.acked(key) == 4
    assert store.ingest([(key, recs[5:])], ["s3cret"]) == {key: len(recs) - 1}
    other = StreamId("p", "bound", "rank-1", 0)
    unbound = make_stream(other, 3)
    assert store.ingest([(other, unbound)], [None]) == {other: len(unbound) - 1}
    assert [r["step"] for r in store.history("p", "bound", label="rank-0")] == list(range(20))


def test_two_ingesters_never_double(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Two stores on one database (own connections, own caches) race over the same streams."""
    first = open_sql_store(kind, tmp_path, request)
    second = open_sql_store(kind, tmp_path, request)
    try:
        first.migrate()
        second.migrate()
        keys = [StreamId("p", "race", f"rank-{i}", 0) for i in range(4)]
        streams = {
            k: make_stream(
                k, 400, rank=i, world=4, values=lambda s, i=i: {f"m{s % 7}": s + i, "x": i}
            )
            for i, k in enumerate(keys)
        }

        def ingester(st: SQLStore, seed: int) -> None:
            rng = random.Random(seed)
            for _ in range(25):
                k, k2 = rng.choice(keys), rng.choice(keys)
                recs = streams[k]
                a = rng.randrange(0, len(recs))
                b = rng.randrange(a, len(recs) + 1)
                resend = recs[max(0, st.acked(k) - 3) : b]
                st.ingest([(k, resend), (k2, streams[k2][:a])])
            for k in keys:
                st.ingest([(k, streams[k])])

        race(ingester, [first, second, first, second])
        for k, recs in streams.items():
            assert first.acked(k) == second.acked(k) == len(recs) - 1
        run = first.get_run("p", "race")
        assert run is not None
        assert sorted(s.points for s in run.streams) == [800] * 4
        band = second.band("p", "race", "x", max_points=10**6)
        assert band.n == [4] * 400
        assert band.mean == [1.5] * 400
        hist = first.history("p", "race")
        assert len(hist) == 1600
        assert len({(h["label"], h["step"]) for h in hist}) == 1600
    finally:
        first.close()
        second.close()


# -- aggregates ------------------------------------------------------------------------------


def test_band_equals_numpy_over_ranks(store: SQLStore) -> None:
    rng = np.random.default_rng(3)
    ranks, steps = 5, 240
    vals = rng.normal(10.0, 3.0, (ranks, steps))
    wts = rng.uniform(0.5, 4.0, (ranks, steps))
    vals[2, 17] = np.nan  # left out of the band
    batches = []
    for i in range(ranks):
        key = StreamId("p", "agg", f"rank-{i}", 0)

        def values(s: int, i: int = i) -> dict[str, float]:
            out = {"loss": float(vals[i, s])}
            if s % 3 or i:  # rank 0 skips some steps
                out["acc"] = float(s * (i + 1))
            return out

        recs = make_stream(key, steps, rank=i, world=ranks, values=values,
                           weight=lambda s, i=i: float(wts[i, s]))  # fmt: skip
        batches.append((key, recs[:100]))
        batches.append((key, recs[90:]))
    store.ingest(batches)
    band = store.band("p", "agg", "loss", max_points=10**6)
    assert band.x == list(range(steps)) and not band.downsampled
    for s in range(steps):
        v, w = vals[:, s], wts[:, s]
        ok = np.isfinite(v)
        v, w = v[ok], w[ok]
        assert band.n[s] == len(v)
        assert band.mean[s] == pytest.approx(np.mean(v), rel=1e-12)
        assert band.min[s] == np.min(v) and band.max[s] == np.max(v)
        assert band.std[s] == pytest.approx(np.std(v), rel=1e-9)
        assert band.wmean[s] == pytest.approx(np.average(v, weights=w), rel=1e-12)
    acc = store.band("p", "agg", "acc", max_points=10**6)
    for x, n in zip(acc.x, acc.n):
        assert n == (ranks if int(x) % 3 else ranks - 1)


def test_wmean_is_mean_unless_every_value_weighted(store: SQLStore) -> None:
    for i, weight in enumerate([2.0, None, 3.0]):
        key = StreamId("p", "w", f"rank-{i}", 0)
        store.ingest(
            [
                (
                    key,
                    make_stream(
                        key, 4, rank=i, values=lambda s, i=i: {"v": float(i + s)}, weight=weight
                    ),
                )
            ]
        )
    band = store.band("p", "w", "v")
    assert band.wmean == band.mean == [1.0, 2.0, 3.0, 4.0]
    one = StreamId("p", "w2", "rank-0", 0)
    two = StreamId("p", "w2", "rank-1", 0)
    store.ingest(
        [
            (one, make_stream(one, 2, values=lambda s: {"v": 1.0}, weight=1.0)),
            (two, make_stream(two, 2, rank=1, values=lambda s: {"v": 4.0}, weight=2.0)),
        ]
    )
    assert store.band("p", "w2", "v").wmean == [3.0, 3.0]


def test_band_ranges_and_downsampling(store: SQLStore) -> None:
    steps = 5000
    for i in range(2):
        key = StreamId("p", "big", f"rank-{i}", 0)
        spike = lambda s, i=i: {"loss": 100.0 if s == 3333 and i else float(np.sin(s / 50))}  # noqa: E731
        store.ingest([(key, make_stream(key, steps, rank=i, values=spike))])
    full = store.band("p", "big", "loss", max_points=10**6)
    part = store.band("p", "big", "loss", lo=1000, hi=1999)
    assert part.x == [float(s) for s in range(1000, 2000)]
    assert part.mean == full.mean[1000:2000]
    small = store.band("p", "big", "loss", max_points=200)
    assert small.downsampled and len(small.x) <= 200
    assert small.x == sorted(small.x) and small.x[0] == 0 and small.x[-1] == steps - 1
    assert max(small.max) == 100.0 and 3333.0 in small.x
    assert min(small.min) == min(full.min)
    timed = store.band("p", "big", "loss", x="time", lo=T0 + 11, hi=T0 + 20)
    assert timed.x == [T0 + 1 + s for s in range(10, 20)]


# -- runs ------------------------------------------------------------------------------------


def _run(store: SQLStore, run_id: str, ranks: int = 1, **kw: Any) -> None:
    store.ingest([
        (k, make_stream(k, kw.pop("steps", 5) if i == ranks - 1 else 5, rank=i, world=ranks, **kw))
        for i, k in enumerate(StreamId("proj", run_id, f"rank-{i}", 0) for i in range(ranks))
    ])  # fmt: skip


def test_list_runs_filters_sort_and_paging(store: SQLStore) -> None:
    _run(
        store,
        "a1",
        group="g1",
        job_type="train",
        tags=["x", "y"],
        name="Alpha",
        t0=T0 + 3,
        steps=30,
    )
    _run(store, "b2", group="g1", job_type="eval", tags=["x"], name="beta", t0=T0 + 1, steps=10)
    _run(store, "c3", group="g2", tags=["y"], name="Gamma", t0=T0 + 2, finish="failed", steps=20)
    _run(store, "d4", ranks=2, name="delta", t0=T0 + 4, finish=None)  # silent for ages: crashed
    k = StreamId("other", "z9", "rank-0", 0)
    store.ingest([(k, make_stream(k, 3))])
    assert store.projects() == ["other", "proj"]

    def ids(**q: Any) -> list[str]:
        rows, total = store.list_runs(RunQuery(project="proj", **q))
        assert total >= len(rows)
        return [r.id for r in rows]

    assert ids() == ["d4", "a1", "c3", "b2"]  # -created
    assert ids(sort="created") == ["b2", "c3", "a1", "d4"]
    assert ids(sort="name") == ["a1", "c3", "b2", "d4"]  # case-sensitive, as stored
    assert ids(sort="-steps") == ["a1", "c3", "b2", "d4"]
    assert ids(sort="state") == ["d4", "c3", "a1", "b2"]
    assert ids(group="g1") == ["a1", "b2"]
    assert ids(job_type="eval") == ["b2"]
    assert ids(tags=["x", "y"]) == ["a1"]
    assert ids(states=["failed", "crashed"]) == ["d4", "c3"]
    assert ids(search="ALP") == ["a1"] and ids(search="c3") == ["c3"]
    rows, total = store.list_runs(RunQuery(project="proj", limit=2, offset=1))
    assert [r.id for r in rows] == ["a1", "c3"] and total == 4
    rows, total = store.list_runs(RunQuery())
    assert total == 5
    d4 = store.get_run("proj", "d4")
    assert d4 is not None and d4.state == "crashed" and d4.crashed == ["rank-0", "rank-1"]
    with pytest.raises(UsageError, match="created, updated, name, state, steps"):
        store.list_runs(RunQuery(sort="color"))


def test_get_run_and_metric_keys(store: SQLStore) -> None:
    keys = [StreamId("p", "r", f"rank-{i}", 0) for i in range(2)]
    recs0 = make_stream(
        keys[0], 3, config={"lr": 0.1, "layers": [1, 2]}, name="nice", group="g", tags=["t"],
        notes="hello", run_mode="shared", num_nodes=2, finish=None,
    )  # fmt: skip
    recs0 += [
        R.ConfigUpdate(seq=len(recs0), time=T0 + 10, items={"lr": 0.2, "extra": {"a": 1}}),
        R.SummaryUpdate(seq=len(recs0) + 1, time=T0 + 11, items={"best": 0.5}),
        R.Finish(seq=len(recs0) + 2, time=T0 + 12, state="finished", exit_code=0),
    ]
    recs1 = make_stream(keys[1], 5, rank=1, values=lambda s: {"other": s}, finish="killed")
    store.ingest([(keys[0], recs0), (keys[1], recs1)])
    run = store.get_run("p", "r")
    assert run is not None
    assert (run.name, run.group, run.tags, run.notes, run.run_mode) == (
        "nice",
        "g",
        ["t"],
        "hello",
        "shared",
    )
    assert run.config == {"lr": 0.2, "layers": [1, 2], "extra": {"a": 1}}
    assert run.summary == {"loss": 1.0 / 3, "step_count": 2, "best": 0.5, "other": 4}
    assert run.state == "finished" and run.crashed == []  # the primary's state
    assert run.steps == 5 and run.num_nodes == 2 and run.world_size == 1
    assert run.created == T0 and run.updated == T0 + 12
    by_label = {s.label: s for s in run.streams}
    # killed and an exit code: its Finish record (without one: running or crashed)
    assert by_label["rank-1"].state == "killed" and by_label["rank-1"].exit_code is not None
    assert by_label["rank-0"].rank == 0 and by_label["rank-0"].started is not None  # its start
    # The stream's own start record is kept as logged: its config before the update.
    start = store._read(
        lambda tx: (
            decode_fold(
                tx.one(
                    "SELECT s.fold FROM streams s JOIN runs r ON r.id = s.run "
                    "WHERE r.project = ? AND r.run_id = ? AND s.label = ?",
                    ("p", "r", "rank-0"),
                )[0]
            ).start
        )
    )
    assert start is not None and start.config == {"lr": 0.1, "layers": [1, 2]}
    assert by_label["rank-0"].acked_seq == len(recs0) - 1 and by_label["rank-0"].points == 6
    assert store.metric_keys("p", "r") == ["loss", "other", "step_count"]
    assert store.get_run("p", "missing") is None and store.metric_keys("p", "missing") == []


def test_states_and_crash_timeout(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    st = open_sql_store(kind, tmp_path, request, crash_timeout=5.0)
    try:
        st.migrate()
        now = time.time()
        cases = {
            "live-pid": dict(pid=os.getpid(), t0=now - 1000),  # alive here: running
            "recent": dict(pid=0, t0=now - 2),  # young, unknown pid: running
            "silent": dict(pid=0, t0=now - 60),  # older than the timeout: crashed
            "dead-pid": dict(pid=2**22 + 12345, t0=now - 18),  # pid gone, heartbeat late
        }
        for run_id, kw in cases.items():
            k = StreamId("p", run_id, "rank-0", 0)
            recs = make_stream(k, 2, finish=None, heartbeat_interval=2.0, **kw)
            st.ingest([(k, recs)])
        # A server never judges an uploaded (host, pid) by its own process table: the
        # live pid's silent stream is crashed like any other.
        states = {r.id: r.state for r in st.list_runs(RunQuery(project="p"))[0]}
        assert states["live-pid"] == "crashed"
        st.local_pids = True  # rankwise ui: the streams are this host's own files
        states = {r.id: r.state for r in st.list_runs(RunQuery(project="p"))[0]}
        assert states == {"live-pid": "running", "recent": "running", "silent": "crashed",
                          "dead-pid": "crashed"}  # fmt: skip
        st.local_pids = False
        # a failed rank under a killed primary: the run failed
        keys = [StreamId("p", "fk", f"rank-{i}", 0) for i in range(2)]
        st.ingest([(keys[0], make_stream(keys[0], 2, finish="killed")),
                   (keys[1], make_stream(keys[1], 2, rank=1, finish="failed"))])  # fmt: skip
        run = st.get_run("p", "fk")
        assert run is not None and run.state == "failed"
        # a later incarnation replaces a crashed one
        k0, k1 = StreamId("p", "re", "rank-0", 0), StreamId("p", "re", "rank-0", 1)
        st.ingest([(k0, make_stream(k0, 2, finish=None, t0=now - 500)),
                   (k1, make_stream(k1, 2, finish="finished"))])  # fmt: skip
        run = st.get_run("p", "re")
        assert run is not None and run.state == "finished"
        assert [s.state for s in run.streams] == ["crashed", "finished"]
    finally:
        st.close()


# -- series ----------------------------------------------------------------------------------


def test_series_raw_ranges_and_labels(store: SQLStore) -> None:
    keys = [StreamId("p", "s", f"rank-{i}", 0) for i in range(2)]
    store.ingest([(k, make_stream(k, 300, rank=i)) for i, k in enumerate(keys)])
    restart = StreamId("p", "s", "rank-0", 1)  # a second incarnation continues the label
    store.ingest(
        [(restart, make_stream(restart, 20, values=lambda s: {"loss": -1.0}, t0=T0 + 1000))]
    )
    out = store.series("p", "s", "loss", max_points=10**6)
    assert [s.label for s in out] == ["rank-0", "rank-1"]
    r0 = out[0]
    assert not r0.downsampled and len(r0.x) == 320 and r0.x == sorted(r0.x)
    assert sorted(zip(r0.x, r0.y)) == sorted(
        [(float(s), 1.0 / (s + 1)) for s in range(300)] + [(float(s), -1.0) for s in range(20)]
    )
    (one,) = store.series("p", "s", "loss", labels=["rank-1"], lo=10, hi=19.5)
    assert one.x == [float(s) for s in range(10, 20)]
    assert one.y == [1.0 / (s + 1) + 1 for s in range(10, 20)]
    (timed,) = store.series("p", "s", "loss", labels=["rank-1"], x="time", lo=T0 + 1, hi=T0 + 3)
    assert timed.x == [T0 + 1, T0 + 2, T0 + 3]
    assert store.series("p", "s", "nope") == [] and store.series("p", "zz", "loss") == []
    with pytest.raises(ValueError, match="'step' or 'time'"):
        store.series("p", "s", "loss", x="epoch")


@pytest.mark.parametrize(
    ("max_points", "level"), [(20, "head"), (400, "mid"), (2000, "sub"), (8000, "raw")]
)
def test_series_downsampled_keeps_extremes(
    store: SQLStore, max_points: int, level: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Long series read the chunk, mid- or sub-block summaries; the answer stays honest."""
    from rankwise.store import query

    seen: list[str] = []
    choose = query.choose_level

    def spy(*args: int) -> str:
        seen.append(choose(*args))
        return seen[-1]

    monkeypatch.setattr(query, "choose_level", spy)
    n = 120_000
    rng = np.random.default_rng(max_points)
    y = np.cumsum(rng.normal(0, 1, n))
    y[77_777] = 1e6  # a spike
    y[5] = np.nan
    key = StreamId("p", "long", "rank-0", 0)
    recs = make_stream(key, n, values=lambda s: {"loss": float(y[s])})
    for a in range(0, len(recs), 7000):
        store.ingest([(key, recs[a : a + 7000])])
    store.compact()  # the stored tiers are read (pending points would count as raw ones)
    for lo, hi in [(None, None), (10_000.0, 100_000.5), (77_000.0, None)]:
        (s,) = store.series("p", "long", "loss", lo=lo, hi=hi, max_points=max_points)
        if lo is None:  # the whole series is read at the expected level
            assert seen == [level]
        a = 0 if lo is None else int(np.ceil(lo))
        b = n - 1 if hi is None else int(np.floor(hi))
        xs = np.array(s.x)
        assert s.downsampled and len(xs) <= max_points
        assert (np.diff(xs) >= 0).all() and xs[0] == a and xs[-1] == b
        ys = np.array(s.y)
        steps = xs.astype(int)
        assert np.array_equal(ys, y[steps], equal_nan=True)  # only real points
        window = y[a : b + 1]
        assert np.nanmax(window) in ys and np.nanmin(window) in ys


def test_history_and_value_types(store: SQLStore) -> None:
    key = StreamId("p", "h", "rank-0", 0)
    recs: list[R.AnyRecord] = make_stream(key, 0, finish=None)
    recs += [
        R.Metrics(seq=1, time=T0 + 1, step=0, values={"a": 1, "b": True, "c": 0.5}, weight=2.0),
        R.Metrics(seq=2, time=T0 + 2, step=0, values={"c": float("inf")}),
        R.Metrics(seq=3, time=T0 + 3, step=1, values={"a": 2**40, "d": float("nan")}),
    ]
    store.ingest([(key, recs)])
    hist = store.history("p", "h")
    assert hist[0] == {
        "step": 0,
        "time": T0 + 1,
        "label": "rank-0",
        "weight": 2.0,
        "a": 1,
        "b": True,
        "c": 0.5,
    }
    assert type(hist[0]["a"]) is int and type(hist[0]["b"]) is bool
    assert hist[1] == {"step": 0, "time": T0 + 2, "label": "rank-0", "c": float("inf")}
    assert hist[2]["a"] == 2**40 and np.isnan(hist[2]["d"])
    assert store.history("p", "h", keys=["a"]) == [
        {"step": 0, "time": T0 + 1, "label": "rank-0", "weight": 2.0, "a": 1},
        {"step": 1, "time": T0 + 3, "label": "rank-0", "a": 2**40},
    ]
    assert store.history("p", "h", keys="b", label="rank-9") == []


def test_real_stream_files_tell_the_local_readers_story(store: SQLStore, tmp_path: Path) -> None:
    """Streams written by rankwise.init()/run.log() in a subprocess, read with frames.scan."""
    data = tmp_path / "data"
    script = textwrap.dedent(
        """
        import rankwise
        run = rankwise.init(project="demo", id="real", config={"lr": 0.01}, tags=["t"])
        for step in range(300):
            run.log({"loss": 1.0 / (step + 1), "epoch": step // 100, "ok": step % 2 == 0},
                    step=step, weight=float(step % 4 + 1))
        run.summary["best"] = 0.5
        run.finish()
        """
    )
    env = clean_env(RANKWISE_DIR=str(data))
    subprocess.run([sys.executable, "-c", script], check=True, env=env, cwd=tmp_path, timeout=120)

    import rankwise
    from rankwise.stream.files import list_streams
    from rankwise.stream.frames import scan

    files = list_streams(data / "demo" / "real" / "streams")
    assert files
    for label, inc, path in files:
        found = scan(path.read_bytes())
        assert found.damage is None
        key = StreamId("demo", "real", label, inc)
        mid = len(found.records) // 2
        store.ingest([(key, found.records[:mid])])
        store.ingest([(key, found.records)])
    local = rankwise.Api(dir=data).run("real", project="demo")
    run = store.get_run("demo", "real")
    assert run is not None
    assert (run.state, run.name, run.tags, run.config) == (
        local.state,
        local.name,
        local.tags,
        local.config,
    )
    assert run.summary == local.summary and run.steps == local.steps == 300
    assert store.history("demo", "real") == local.history()
    assert store.history("demo", "real", keys=["epoch"]) == local.history(keys=["epoch"])
    assert store.metric_keys("demo", "real") == local.metric_keys
    band = store.band("demo", "real", "loss")
    assert band.mean == [1.0 / (s + 1) for s in range(300)]
    assert band.wmean == pytest.approx(band.mean, rel=1e-15)  # one weighted value per step


# -- opening stores --------------------------------------------------------------------------


def test_open_store_urls(tmp_path: Path) -> None:
    for url in (f"sqlite://{tmp_path}/a.db", f"sqlite:///{tmp_path}/a.db", str(tmp_path / "a.db")):
        st = open_store(url)
        try:
            assert type(st).__name__ == "SQLiteStore" and st.path == tmp_path / "a.db"  # type: ignore[attr-defined]
        finally:
            st.close()
    from rankwise.store import _CONNINFO

    assert _CONNINFO.fullmatch("host=127.0.0.1 port=5432 dbname=test options='-csearch_path=x'")
    assert not _CONNINFO.fullmatch(str(tmp_path / "host=odd.db"))
    with pytest.raises(ValueError, match="unknown store scheme 'mysql'"):
        open_store("mysql://x")
    with pytest.raises(ValueError, match="needs a file path"):
        open_store(":memory:")


def test_imports_stay_apart() -> None:
    # ``import rankwise`` loads no store at all: tests/sdk/test_sdk.py checks that.
    checks = [
        "import rankwise.store.sqlite\nassert 'psycopg' not in sys.modules",
        "import rankwise.store.postgres\nassert 'sqlite3' not in sys.modules",
    ]
    for code in checks:
        subprocess.run(
            [sys.executable, "-c", "import sys\n" + code], check=True, cwd=REPO, timeout=60
        )


def test_open_store_postgres(pg_dsn: str) -> None:
    st = open_store(pg_dsn)
    try:
        assert type(st).__name__ == "PostgresStore"
        st.migrate()
        assert st.schema_version() == M.LATEST
    finally:
        st.close()


def test_cross_rank_last_reads_the_last_step_at_or_before_upto(store: SQLStore) -> None:
    # "loss" every step up to 1030 (two aggregate blocks); "eval" every 100 steps and
    # at 1030, so at upto=1025 its newest block holds only a later step.
    def values(s: int, rank: int) -> dict[str, float]:
        out = {"loss": float(s + 10 * rank)}
        if s % 100 == 0 or s == 1030:
            out["eval"] = float(s) + rank
        return out

    for rank in range(2):
        key = StreamId("p", "last", f"rank-{rank}", 0)
        recs = make_stream(
            key, 1031, rank=rank, world=2, values=lambda s, r=rank: values(s, r),
            weight=float(rank + 1),
        )  # fmt: skip
        store.ingest([(key, recs)])
    every = store.cross_rank_last("p", "last")
    assert every["loss"] == CrossRankValue(
        step=1030, n=2, mean=1035.0, wmean=(1030 + 2 * 1040) / 3,
        min=1030.0, max=1040.0, nan=0, posinf=0, neginf=0, sum=2070.0,
    )  # fmt: skip
    upto = store.cross_rank_last("p", "last", 1025)
    assert upto["loss"]["step"] == 1025 and upto["loss"]["mean"] == 1030.0
    assert upto["eval"]["step"] == 1000 and upto["eval"]["mean"] == 1000.5
    assert store.cross_rank_last("p", "nope") == {}
