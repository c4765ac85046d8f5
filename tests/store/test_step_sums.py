"""Closed chunks' block sums (``chunk_sums``, ``rankwise.store.step_sums``) and the
heatmap's whole-step buckets that read them (``rankwise.store.heatmap_steps``), on both
stores: the cells equal the means of the values logged whether they come from the sums,
from the points (the rows deleted, as in a database written before version 19) or from
uploads not yet compacted; every closed chunk has exactly one row, rewritten chunks none
stale, and a purge leaves none. Expected values come from the values logged."""

from __future__ import annotations

import itertools
import math
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rankwise.store import step_sums
from rankwise.store.chunks import MERGE_BELOW, Points
from rankwise.store.heatmap_steps import layout
from rankwise.store.sql import SQLStore
from rankwise.store.sqlite import SQLiteStore
from rankwise.stream import records as R
from rankwise.stream.identity import StreamId
from tests.data.make_v14_store import RANKS as V14_RANKS
from tests.data.make_v14_store import STEPS as V14_STEPS
from tests.data.make_v14_store import unpack, v14_records
from tests.helpers.stores import open_sql_store
from tests.helpers.streams import make_stream
from tests.store.test_heatmap import _expected, cells

RANKS, STEPS = 4, 6000


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    st_ = open_sql_store(request.param, tmp_path, request)
    st_.migrate()
    yield st_
    st_.close()


def _vals() -> np.ndarray:
    rng = np.random.default_rng(7)
    v = rng.normal(0, 1, (RANKS, STEPS)).cumsum(axis=1)
    v[1, 2000:2100] = np.nan  # a NaN spell inside a closed chunk: not a zero
    v[2, 4500] = math.inf
    v[3, ::997] = -math.inf
    return v


def _ingest(store: SQLStore, vals: np.ndarray, cuts: list[int], run: str = "r") -> None:
    """Every rank's 'loss' at every step and 'sparse' every 10th step (an int), uploaded
    in pieces at ``cuts`` (each compacted before the next: the series' tail merges)."""
    recs = {}
    for r in range(RANKS):
        key = StreamId("p", run, f"rank-{r}", 0)

        def values(s: int, r: int = r) -> dict[str, Any]:
            out: dict[str, Any] = {"loss": float(vals[r, s])}
            if s % 10 == 0:
                out["sparse"] = r * 1000 + s
            return out

        recs[key] = make_stream(key, STEPS, rank=r, world=RANKS, values=values)
    bounds = [0, *cuts, STEPS + 2]
    for a, b in itertools.pairwise(bounds):
        store.ingest([(key, rs[a:b]) for key, rs in recs.items()])
        store.compact()


def _sparse(vals: np.ndarray) -> np.ndarray:
    return np.array([[r * 1000 + s for s in range(0, STEPS, 10)] for r in range(RANKS)], float)


def _table(store: SQLStore, sql: str) -> list[tuple[Any, ...]]:
    return store._read(lambda tx: tx.all(sql))


def _check(store: SQLStore, vals: np.ndarray, **kw: Any) -> Any:
    got = store.heatmap("p", "r", "loss", **kw)
    assert got is not None
    want = _expected(vals, got)
    np.testing.assert_allclose(cells(got), want, rtol=1e-6)  # float32 on the wire
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns
        med = np.nanmedian(want, axis=0)
    np.testing.assert_allclose(np.array(got.median, float), med, rtol=1e-9)  # float64
    sparse = store.heatmap("p", "r", "sparse", **kw)
    assert sparse is not None
    want = _expected(_sparse(vals), sparse, np.arange(0, STEPS, 10))
    np.testing.assert_allclose(cells(sparse), want, rtol=1e-6)
    return got


def test_every_closed_chunk_has_one_row_and_cells_match_with_and_without_them(
    store: SQLStore,
) -> None:
    vals = _vals()
    # Small uploads first (the tail merges, some merges close a chunk in place), then a
    # big one (chunks of CHUNK points), then a last small one (left open).
    _ingest(store, vals, [300, 700, 1100, 1500, 5800])
    chunks = _table(store, "SELECT id, n, step_lo, step_hi FROM chunks WHERE metric > 0")
    sums = {int(r[0]): r for r in _table(store, "SELECT id, step_lo, step_hi FROM chunk_sums")}
    closed = {int(c[0]): c for c in chunks if int(c[1]) >= MERGE_BELOW}
    assert set(sums) == set(closed) and len(closed) >= 2 * RANKS
    assert any(int(c[1]) < MERGE_BELOW for c in chunks)  # open tails, read as points
    for cid, c in closed.items():
        assert (int(sums[cid][1]), int(sums[cid][2])) == (int(c[2]), int(c[3]))
    full = _check(store, vals, buckets=500)
    # 6,000 steps in 500 buckets: 12 steps each (a multiple of the rows' 4-step blocks).
    assert (full.lo, full.hi, full.buckets) == (0, STEPS, 500)
    for kw in ({"buckets": 100}, {"buckets": 37}, {"buckets": 2000},
               {"lo": 1234, "hi": 4321, "buckets": 100}, {"lo": 1234, "hi": 4321, "buckets": 9},
               {"lo": 4100.5, "hi": 4107.2, "buckets": 3}, {"lo": 5990, "buckets": 7}):  # fmt: skip
        _check(store, vals, **kw)
    # The wide buckets read the rows, not the points: rows emptied (sums and counts 0)
    # leave the closed chunks' buckets empty, the open tail's full.
    rows = _table(store, "SELECT id, sums FROM chunk_sums")
    store._write(lambda tx: tx.many("UPDATE chunk_sums SET sums = ? WHERE id = ?",
                                    [(bytes(len(b)), int(i)) for i, b in rows]))  # fmt: skip
    wide = store.heatmap("p", "r", "loss", buckets=100)  # 94 of 64 steps: blocks of 4 fit
    assert wide is not None and wide.buckets == 94
    hollow = cells(wide)
    first_open = min(int(c[2]) for c in _table(store, "SELECT c.id, c.n, c.step_lo FROM chunks c "
                     "JOIN metrics m ON m.id = c.metric WHERE m.name = 'loss'")
                     if int(c[1]) < MERGE_BELOW)  # fmt: skip
    assert first_open > 5000
    assert np.isnan(hollow[:, : first_open // 64 - 1]).all()
    assert np.isfinite(hollow[:, -1]).all()
    # The same answers from the points alone (a database written before version 19).
    store._write(lambda tx: tx.run("DELETE FROM chunk_sums"))
    again = _check(store, vals, buckets=500)
    assert again.values == full.values or np.allclose(cells(again), cells(full), rtol=1e-12)
    for kw in ({"buckets": 100}, {"lo": 1234, "hi": 4321, "buckets": 9}):
        _check(store, vals, **kw)


def test_pending_points_and_sums_add_up_and_a_purge_leaves_no_row(store: SQLStore) -> None:
    vals = _vals()
    _ingest(store, vals, [5000])  # compacted: closed chunks up to step 4095
    # A second run, one upload left uncompacted: its points are read as they are.
    more = make_stream(StreamId("p", "q", "rank-0", 0), 3000,
                       values=lambda s: {"loss": float(vals[0, s])})  # fmt: skip
    store.ingest([(StreamId("p", "q", "rank-0", 0), more)])
    got = store.heatmap("p", "q", "loss", buckets=100)
    assert got is not None
    np.testing.assert_allclose(cells(got), _expected(vals[:1, :3000], got), rtol=1e-6)
    _check(store, vals, buckets=250)
    before = _table(store, "SELECT COUNT(*) FROM chunk_sums")[0][0]
    store.compact()  # run q's 3,000 points: one closed chunk, one row
    assert _table(store, "SELECT COUNT(*) FROM chunk_sums")[0][0] == before + 1
    np.testing.assert_array_equal(cells(store.heatmap("p", "q", "loss", buckets=100)), cells(got))
    assert store.delete_runs("p", ["r"], "test") == ["r"]
    assert store.purge_runs("p", ["r"], "test", None) == ["r"]
    left = _table(store, "SELECT r.run_id FROM chunk_sums c JOIN streams s ON s.id = c.stream "
                         "JOIN runs r ON r.id = s.run")  # fmt: skip
    assert [str(r[0]) for r in left] == ["q"]


def test_block_sums_of_a_chunk() -> None:
    step = np.array([8, 9, 10, 11, 12, 13, 14, 15, 16, 30, 31], np.int64)
    value = np.array([1, 2, np.nan, 4, 5, math.inf, 7, 8, 9, 10, 11], float)
    p = Points(np.arange(11), step, step * 1.0, value, np.full(11, np.nan))
    wlog, b0, blob = step_sums.encode(p)
    assert step_sums.block_width(8, 31, 11) == wlog == 3  # (31 >> 3) - (8 >> 3) = 2 blocks
    sums, counts = step_sums.decode(blob)
    assert b0 == 1 and list(sums) == [1 + 2 + 4 + 5 + 7 + 8, 9, 21]
    assert list(counts) == [6, 1, 2]


@settings(max_examples=300, deadline=None)
@given(lo=st.integers(-(10**6), 10**7), span=st.integers(0, 10**6), buckets=st.integers(1, 2000))
def test_layout_covers_the_range_in_whole_aligned_buckets(lo: int, span: int, buckets: int) -> None:
    hi = lo + span
    lay = layout(lo, hi, buckets)
    w0 = -(-(span + 1) // buckets)  # the natural width
    assert 1 <= lay.k <= buckets and lay.a0 <= lo and lay.end > hi
    assert lay.end - lay.w <= hi  # no bucket wholly past the range
    q = lay.quantum
    assert q & (q - 1) == 0 and lay.a0 % q == 0 and lay.w % q == 0
    assert (q == 1 and lay.w == w0) or (4 * q <= w0 and w0 <= lay.w < 1.5 * w0)
    assert layout(lo + 7 * q, hi + 7 * q, buckets).a0 == lay.a0 + 7 * q  # shifts with the range


def test_a_database_from_before_the_sums_reads_its_chunks_as_points(tmp_path: Path) -> None:
    """The real version-14 file (``tests/data/make_v14_store.py``: closed chunks, no
    ``chunk_sums``) migrates, its heatmap equals a fresh store's given the same records
    (whose closed chunks have rows), and what it logs next gets rows."""
    path = unpack(tmp_path / "old.db")
    ref = SQLiteStore(tmp_path / "ref.db")
    ref.migrate()
    with SQLiteStore(path) as old:
        old.migrate()
        assert _table(old, "SELECT COUNT(*) FROM chunk_sums") == [(0,)]
        for rank in range(V14_RANKS):
            key = StreamId("p", "old", f"rank-{rank}", 0)
            ref.ingest([(key, v14_records(rank, 0, V14_STEPS + 1))])
        ref.compact()
        assert _table(ref, "SELECT COUNT(*) FROM chunk_sums")[0][0] >= V14_RANKS * 2  # loss, n

        def same(**kw: Any) -> None:
            for key in ("loss", "n", "sparse"):
                a, b = old.heatmap("p", "old", key, **kw), ref.heatmap("p", "old", key, **kw)
                assert a is not None and b is not None and (a.lo, a.hi, a.buckets) == (
                    b.lo, b.hi, b.buckets)  # fmt: skip
                np.testing.assert_allclose(cells(a), cells(b), rtol=1e-6)
                np.testing.assert_allclose(np.array(a.median, float), np.array(b.median, float),
                                           rtol=1e-9)  # fmt: skip

        same(buckets=100)
        same(lo=200, hi=1300, buckets=50)
        for rank in range(V14_RANKS):
            key = StreamId("p", "old", f"rank-{rank}", 0)
            more = v14_records(rank, V14_STEPS + 1, V14_STEPS + 2001)
            old.ingest([(key, more)])
            ref.ingest([(key, more)])
        old.compact()
        ref.compact()
        assert _table(old, "SELECT COUNT(*) FROM chunk_sums")[0][0] >= V14_RANKS * 2
        same(buckets=100)
    ref.close()


def test_steps_at_the_ends_of_int64_compact_and_bucket(store: SQLStore) -> None:
    """A rank logging steps at int64's ends (a hostile or broken client): compaction
    folds them (one metric's aggregate blocks in halves), and the heatmap puts each in
    its bucket; a range past int64 is clamped to its ends (no overflow, no error)."""
    key = StreamId("p", "x", "rank-0", 0)
    steps = [-(2**63), 0, 5, 2**63 - 1]
    recs = make_stream(key, 0, finish=None)
    recs += [R.Metrics(seq=i + 1, time=2.0 + i, step=s, values={"loss": float(i + 1)})
             for i, s in enumerate(steps)]  # fmt: skip
    store.ingest([(key, recs)])
    for folded in (False, True):
        if folded:
            store.compact()
            assert _table(store, "SELECT COUNT(*) FROM upload_blocks") == [(0,)]
        got = store.heatmap("p", "x", "loss", buckets=3)
        assert got is not None and (got.lo, got.buckets) == (-(2**63), 3)
        assert list(cells(got)[0]) == [1.0, 2.5, 4.0]
        wide = store.heatmap("p", "x", "loss", lo=-1e300, hi=1e300, buckets=3)
        assert wide is not None and wide.values == got.values
        past = store.heatmap("p", "x", "loss", lo=1e300, hi=1e301)
        assert past is not None and (past.lo, past.buckets) == (2**63 - 1, 1)  # clamped
        assert list(cells(past)[0]) == [4.0]
