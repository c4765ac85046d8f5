"""NaN and ±Inf in the cross-rank aggregates: counted per step, on both stores.

The band's ``nan``/``posinf``/``neginf`` at every step must equal numpy's count over the
ranks' values there; replays and two ingesters must not double them; downsampling must
keep them; a version-5 database (made by rankwise before the counts existed) upgrades and
reads back. Expected values are computed from the values logged, never from the store.
"""

from __future__ import annotations

import gzip
import math
import random
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rankwise.store import migrations as M
from rankwise.store.aggregate import Agg
from rankwise.store.downsample import bucket_of
from rankwise.store.sql import SQLStore
from rankwise.stream import records as R
from rankwise.stream.identity import StreamId
from rankwise.wire.charts import Band
from rankwise.wire.runs import CrossRankValue
from tests.data.make_v5_store import RANKS as V5_RANKS
from tests.data.make_v5_store import STEPS as V5_STEPS
from tests.data.make_v5_store import T0 as V5_T0
from tests.data.make_v5_store import v5_values
from tests.helpers.stores import open_sql_store, race
from tests.helpers.streams import make_stream

V5_DB = Path(__file__).parents[1] / "data" / "v5_store.sqlite.gz"


def _values(ranks: int, steps: int, seed: int) -> np.ndarray:
    """Normal values with NaN, +Inf and -Inf sprinkled in, and whole steps of each."""
    rng = np.random.default_rng(seed)
    vals = rng.normal(1.0, 0.5, (ranks, steps))
    pick = rng.uniform(size=(ranks, steps))
    vals[pick < 0.03] = np.nan
    vals[(pick >= 0.03) & (pick < 0.05)] = np.inf
    vals[(pick >= 0.05) & (pick < 0.06)] = -np.inf
    vals[:, 7] = np.nan  # every rank NaN
    vals[:, 1500] = np.inf  # every rank +Inf
    vals[:, 2500:2600] = np.nan  # the loss turned NaN for a while
    vals[0, 2999] = -np.inf
    return vals


def _streams(vals: np.ndarray, run: str) -> dict[StreamId, list[R.AnyRecord]]:
    ranks, steps = vals.shape
    out = {}
    for i in range(ranks):
        key = StreamId("p", run, f"rank-{i}", 0)
        out[key] = make_stream(
            key, steps, rank=i, world=ranks,
            values=lambda s, i=i: {"loss": float(vals[i, s])}, weight=float(i + 1),
        )  # fmt: skip
    return out


def _assert_band_counts(band: Band, vals: np.ndarray, steps: list[int] | None = None) -> None:
    """Every point of ``band`` holds numpy's counts and finite aggregates of its step."""
    steps = list(range(vals.shape[1])) if steps is None else steps
    assert band.step == steps
    for j, s in enumerate(band.step):
        v = vals[:, s]
        fin = v[np.isfinite(v)]
        assert band.nan[j] == int(np.isnan(v).sum()), s
        assert band.posinf[j] == int(np.isposinf(v).sum()), s
        assert band.neginf[j] == int(np.isneginf(v).sum()), s
        assert band.n[j] == len(fin), s
        if len(fin):
            assert band.mean[j] == pytest.approx(float(np.mean(fin)), rel=1e-12)
            assert band.min[j] == float(np.min(fin)) and band.max[j] == float(np.max(fin))
        else:  # every value non-finite: the band says which, never 0
            nan, pos, neg = band.nan[j], band.posinf[j], band.neginf[j]
            want = (
                math.inf
                if pos and not (nan or neg)
                else -math.inf
                if neg and not (nan or pos)
                else math.nan
            )
            for got in (band.mean[j], band.wmean[j], band.min[j], band.max[j]):
                assert got == want or (math.isnan(got) and math.isnan(want)), s
            assert math.isnan(band.std[j])


_value = st.one_of(st.floats(-1e3, 1e3), st.sampled_from([math.nan, math.inf, -math.inf]))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 20), _value, st.one_of(st.none(), st.floats(0.1, 5))),
        min_size=1,
        max_size=60,
    ),
    st.integers(0, 60),
    st.integers(0, 60),
)
def test_counts_merge_in_any_split_and_order(
    points: list[tuple[int, float, float | None]], a: int, b: int
) -> None:
    """The counts are part of the monoid: any split, merged in any order, and the stored
    form, equal the aggregate of all points at once, and numpy's counts."""

    def agg(lo: int, hi: int) -> Agg:  # points[lo:hi], each logged at time = its index
        part = points[lo:hi]
        step = np.array([p[0] for p in part], np.int64)
        value = np.array([p[1] for p in part], np.float64)
        weight = np.array([np.nan if p[2] is None else p[2] for p in part], np.float64)
        return Agg.from_points(step, value, weight, np.arange(lo, hi, dtype=np.float64))

    whole = agg(0, len(points))
    a, b = sorted((min(a, len(points)), min(b, len(points))))
    parts = [agg(lo, hi) for lo, hi in ((0, a), (a, b), (b, len(points))) if hi > lo]
    one = parts[0]
    for p in parts[1:]:
        one = one.merge(p)
    other = parts[-1]
    for p in reversed(parts[:-1]):
        other = p.merge(other) if len(p) % 2 else other.merge(p)
    stored = Agg.from_bytes(whole.to_bytes(base=0), base=0)
    assert np.array_equal(stored.step, whole.step) and np.array_equal(stored.cols, whole.cols)
    for got in (one, other):
        assert np.array_equal(got.step, whole.step)
        np.testing.assert_allclose(got.cols, whole.cols, rtol=1e-9, atol=1e-6)
    for i, s in enumerate(whole.step.tolist()):
        v = np.array([p[1] for p in points if p[0] == s])
        fin = v[np.isfinite(v)]
        assert whole.col("nan")[i] == np.isnan(v).sum()
        assert whole.col("posinf")[i] == np.isposinf(v).sum()
        assert whole.col("neginf")[i] == np.isneginf(v).sum()
        assert whole.col("n")[i] == len(fin)
        assert whole.time()[i] == min(j for j, p in enumerate(points) if p[0] == s)
        if len(fin):
            assert whole.col("min")[i] == fin.min() and whole.col("max")[i] == fin.max()


def test_counts_at_every_step_equal_numpy_with_replays(store: SQLStore) -> None:
    vals = _values(3, 3000, seed=5)
    streams = _streams(vals, "nan")
    rng = random.Random(3)
    for k, recs in streams.items():
        cuts = sorted(rng.sample(range(1, len(recs)), 5))
        for a, b in zip([0, *cuts], [*cuts, len(recs)]):
            store.ingest([(k, recs[rng.randrange(0, a + 1) : b])])  # re-sends a stretch
            store.ingest([(k, recs[:b])])  # and the whole prefix
    for k, recs in streams.items():
        store.ingest([(k, recs)])
    band = store.band("p", "nan", "loss", max_points=10**6)
    assert not band.downsampled
    _assert_band_counts(band, vals)
    # Steps 2500..2599 are all NaN: present with n == 0, not missing.
    assert band.n[2550] == 0 and band.nan[2550] == 3
    assert band.n[1500] == 0 and band.posinf[1500] == 3 and band.mean[1500] == math.inf


def test_two_ingesters_never_double_the_counts(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    first = open_sql_store(kind, tmp_path, request)
    second = open_sql_store(kind, tmp_path, request)
    try:
        first.migrate()
        second.migrate()
        vals = _values(4, 3000, seed=9)
        streams = _streams(vals, "race")
        keys = list(streams)

        def ingester(st: SQLStore, seed: int) -> None:
            rng = random.Random(seed)
            for _ in range(15):
                k = rng.choice(keys)
                recs = streams[k]
                b = rng.randrange(0, len(recs) + 1)
                st.ingest([(k, recs[max(0, st.acked(k) - 50) : b])])
            for k in keys:
                st.ingest([(k, streams[k])])

        race(ingester, [first, second, first, second])
        _assert_band_counts(second.band("p", "race", "loss", max_points=10**6), vals)
    finally:
        first.close()
        second.close()


def test_downsampled_band_keeps_every_kind_in_every_bucket(store: SQLStore) -> None:
    steps, ranks = 20_000, 2
    vals = np.tile(np.sin(np.arange(steps) / 300.0), (ranks, 1))
    rng = np.random.default_rng(1)
    for s in rng.choice(steps, 40, replace=False):  # lone values of each kind
        vals[rng.integers(ranks), s] = [np.nan, np.inf, -np.inf][int(s) % 3]
    vals[:, 12_345] = np.nan  # one step with no finite value at all
    vals[:, 17_000:17_020] = np.inf
    for k, recs in _streams(vals, "long").items():
        store.ingest([(k, recs)])
    max_points = 400
    band = store.band("p", "long", "loss", max_points=max_points)
    assert band.downsampled and len(band.x) < steps
    _assert_band_counts(band, vals, band.step)  # each point's counts are its step's own
    buckets = bucket_of(np.arange(steps, dtype=np.float64), max_points // 8)
    got = bucket_of(np.array(band.x), max_points // 8, 0, steps - 1)
    for b in np.unique(buckets):
        inside = vals[:, buckets == b]
        picked = [j for j, g in enumerate(got) if g == b]
        for name, test in (("nan", np.isnan), ("posinf", np.isposinf), ("neginf", np.isneginf)):
            if test(inside).any():  # the bucket holds one: a point of it says so
                assert any(getattr(band, name)[j] > 0 for j in picked), (b, name)
        if (~np.isfinite(inside)).all(axis=0).any():  # and a step with no finite value
            assert any(band.n[j] == 0 for j in picked), b
    assert 12_345 in band.step
    # The band's own count is kept through a range read as well.
    part = store.band("p", "long", "loss", lo=12_300, hi=12_400)
    _assert_band_counts(part, vals, list(range(12_300, 12_401)))


def test_cross_rank_last_says_nan_when_the_last_step_was_all_nan(store: SQLStore) -> None:
    vals = np.array([[1.0, 2.0, np.nan], [3.0, np.inf, np.nan]])
    for k, recs in _streams(vals, "end").items():
        store.ingest([(k, recs)])
    last = store.cross_rank_last("p", "end")["loss"]
    assert last["step"] == 2 and last["n"] == 0 and last["nan"] == 2
    assert all(math.isnan(last[c]) for c in ("mean", "wmean", "min", "max"))
    one = store.cross_rank_last("p", "end", upto=1)["loss"]
    assert one == CrossRankValue(step=1, n=1, mean=2.0, wmean=2.0, min=2.0, max=2.0,
                                 nan=0, posinf=1, neginf=0, sum=2.0)  # fmt: skip


# -- upgrading a database made before the counts ---------------------------------------------


def _v5_database(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> SQLStore:
    """A store on the version-5 database of ``tests/data/make_v5_store.py``, not migrated
    further. PostgreSQL gets the same rows, blobs as they were, copied into a schema
    migrated to version 5."""
    path = tmp_path / "store.db"  # where ``_open`` puts a SQLite store
    path.write_bytes(gzip.decompress(V5_DB.read_bytes()))
    st = open_sql_store(kind, tmp_path, request)
    if kind == "postgres":
        st.migrate(target=5)
        src = sqlite3.connect(path)
        tables = ["runs", "streams", "metrics", "series", "chunks", "aggs"]

        def copy(tx: Any) -> None:
            for table in tables:
                cur = src.execute(f"SELECT * FROM {table}")
                cols = [d[0] for d in cur.description]
                rows = cur.fetchall()
                over = " OVERRIDING SYSTEM VALUE" if "id" in cols else ""
                tx.many(
                    f"INSERT INTO {table} ({', '.join(cols)}){over} VALUES "
                    f"({', '.join('?' * len(cols))})",
                    rows,
                )
                if "id" in cols:
                    tx.run(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                           f"(SELECT MAX(id) FROM {table}))")  # fmt: skip

        st._write(copy)
        src.close()
    return st


def _v5_matrix(steps: int, extra: Any = None) -> np.ndarray:
    return np.array(
        [[(extra or v5_values)(r, s)["loss"] for s in range(steps)] for r in range(V5_RANKS)]
    )


def test_a_version_5_database_upgrades_and_reads(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    st = _v5_database(kind, tmp_path, request)
    blocks = "SELECT run, metric, block, data FROM aggs ORDER BY run, metric, block"
    try:
        assert st.schema_version() == 5
        before = st._read(lambda tx: tx.all(blocks))
        st.migrate()
        assert st.schema_version() == M.LATEST >= 6  # 6 rewrote the blocks; later ones add tables
        after = st._read(lambda tx: tx.all(blocks))
        # Every block was rewritten to the new form, which reads as the old one did.
        assert [r[:3] for r in before] == [r[:3] for r in after] and len(after) == 4
        for (_, _, blk, old), (_, _, _, new) in zip(before, after):
            assert bytes(old) != bytes(new) and len(new) == len(old) + 3
            was, now = Agg.from_bytes(old, blk * 1024), Agg.from_bytes(new, blk * 1024)
            assert np.array_equal(was.step, now.step) and np.array_equal(was.cols, now.cols)
            assert not now.cols[9:].any()
        old = _v5_matrix(V5_STEPS)
        band = st.band("p", "old", "loss", max_points=10**6)
        assert band.step == list(range(V5_STEPS))
        for s in range(V5_STEPS):
            fin = old[:, s][np.isfinite(old[:, s])]
            assert band.n[s] == len(fin)
            assert band.mean[s] == pytest.approx(float(np.mean(fin)), rel=1e-12)
            assert band.min[s] == float(np.min(fin)) and band.max[s] == float(np.max(fin))
        # Ingested before the upgrade: their NaN and ±Inf were left out, uncounted.
        assert band.nan == band.posinf == band.neginf == [0] * V5_STEPS
        acc = st.band("p", "old", "acc", max_points=10**6)
        w = np.arange(1, V5_RANKS + 1, dtype=np.float64)
        for s in (0, 517, 1099):
            a = np.array([v5_values(r, s)["acc"] for r in range(V5_RANKS)])
            assert acc.wmean[s] == pytest.approx(float(np.average(a, weights=w)), rel=1e-12)

        # Logging goes on after the upgrade, into the same (old) block: counted from here.
        def later(rank: int, step: int) -> dict[str, float]:
            loss = math.nan if rank == 1 or (step == 1150 and rank == 0) else 0.5 + rank
            return {"loss": -math.inf if step == 1160 else loss}

        more = 100
        for rank in range(V5_RANKS):
            key = StreamId("p", "old", f"rank-{rank}", 0)
            recs: list[R.AnyRecord] = [
                R.Metrics(seq=V5_STEPS + 1 + i, time=V5_T0 + 1 + s, step=s,
                          values=later(rank, s), weight=float(rank + 1))
                for i, s in enumerate(range(V5_STEPS, V5_STEPS + more))
            ]  # fmt: skip
            assert st.ingest([(key, recs)]) == {key: V5_STEPS + more}
        new = np.array(
            [[later(r, s)["loss"] for s in range(V5_STEPS, V5_STEPS + more)] for r in range(3)]
        )
        whole = np.concatenate([np.where(np.isfinite(old), old, 0.0), new], axis=1)
        band = st.band("p", "old", "loss", lo=V5_STEPS, max_points=10**6)
        _assert_band_counts(band, whole, list(range(V5_STEPS, V5_STEPS + more)))
        last = st.cross_rank_last("p", "old")["loss"]
        assert last["step"] == V5_STEPS + more - 1 and last["nan"] == 1 and last["n"] == 2
        at = st.cross_rank_last("p", "old", upto=1160)["loss"]
        assert at["n"] == 0 and at["neginf"] == 3 and at["mean"] == -math.inf
    finally:
        st.close()


# -- the HTTP band reply ---------------------------------------------------------------------


def test_http_band_and_summary_carry_the_counts(tmp_path: Path) -> None:
    import msgspec

    from rankwise.server import ServerSettings, create_app
    from rankwise.store import open_store
    from tests.helpers.servers import call

    # rank 1 turns +Inf at step 1; every rank NaN at step 3, the last.
    vals = np.array(
        [[1.0, 2.0, 3.0, np.nan], [1.5, np.inf, 3.5, np.nan], [2.0, 2.5, -np.inf, np.nan]]
    )
    st = open_store(f"sqlite:///{tmp_path / 'db.sqlite'}")
    try:
        st.migrate()
        st.ingest(list(_streams(vals, "http").items()))
        app = create_app(st, ServerSettings(static_dir=tmp_path / "no-static"))
        path = "/api/v1/projects/p/runs/http/series"
        band = call(app, "GET", path, params={"key": "loss", "streams": "none"}).json()["band"]
        assert band["n"] == [3, 2, 2, 0]
        assert band["nan"] == [0, 0, 0, 3]
        assert band["posinf"] == [0, 1, 0, 0] and band["neginf"] == [0, 0, 1, 0]
        assert band["mean"][3] is None and band["mean"][1] == 2.25  # JSON: NaN is null
        packed = call(
            app, "GET", path, params={"key": "loss"}, headers={"Accept": "application/msgpack"}
        )
        exact = msgspec.msgpack.decode(packed.content)["band"]
        assert math.isnan(exact["mean"][3]) and exact["nan"][3] == 3
        cmp = call(app, "POST", "/api/v1/compare",
                   json={"runs": ["p/http"], "key": "loss", "streams": "none"}).json()  # fmt: skip
        assert cmp["runs"][0]["band"]["nan"] == [0, 0, 0, 3]
        run = call(app, "GET", "/api/v1/projects/p/runs/http").json()
        last = run["summary_cross_rank"]["loss"]
        assert last == {"step": 3, "n": 0, "mean": "NaN", "wmean": "NaN", "min": "NaN",
                        "max": "NaN", "nan": 3, "posinf": 0, "neginf": 0, "sum": "NaN",
                        "reduce": "mean"}  # fmt: skip
    finally:
        st.close()
