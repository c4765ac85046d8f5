"""The rank x step heatmap read (``Store.heatmap``), on both stores: every cell is the
mean of the finite values its rank logged in its bucket, the median and the scores are
numpy's over the same cells, pages and bounds hold. Expected values come from the
values logged, never from the store."""

from __future__ import annotations

import base64
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rankwise.errors import UsageError
from rankwise.store.sql import SQLStore
from rankwise.stream.identity import StreamId
from rankwise.wire.heatmap import HeatmapReply
from tests.helpers.stores import open_sql_store
from tests.helpers.streams import make_stream

RANKS, STEPS = 12, 300


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    st = open_sql_store(request.param, tmp_path, request)
    st.migrate()
    yield st
    st.close()


def _vals() -> np.ndarray:
    rng = np.random.default_rng(3)
    v = 1.0 + rng.normal(0, 0.01, (RANKS, STEPS))
    v[5] += np.linspace(0, 2, STEPS)  # rank 5's loss drifts away
    v[2, 40:60] = np.nan  # a NaN spell: skipped in the means, not a zero
    v[3, 100] = math.inf
    return v


def _fill(store: SQLStore, vals: np.ndarray, run: str = "r") -> None:
    batches = []
    for r in range(vals.shape[0]):
        key = StreamId("p", run, f"rank-{r}", 0)
        recs = make_stream(key, vals.shape[1], rank=r, world=vals.shape[0],
                           values=lambda s, r=r: {"loss": float(vals[r, s])},
                           node_rank=r // 4, local_rank=r % 4, local_world_size=4)  # fmt: skip
        batches.append((key, recs))
    store.ingest(batches)


def cells(reply: HeatmapReply) -> np.ndarray:
    raw = np.frombuffer(base64.b64decode(reply.values), "<f4")
    return raw.reshape(len(reply.rows), reply.buckets).astype(np.float64)


def _expected(vals: np.ndarray, got: HeatmapReply, steps: np.ndarray | None = None) -> np.ndarray:
    """Each rank's mean of its finite values per bucket of the reply: on the step axis
    ``buckets`` whole-step buckets of ``(hi - lo) / buckets`` steps from ``lo``."""
    steps = np.arange(vals.shape[1]) if steps is None else steps
    w = (got.hi - got.lo) / got.buckets
    assert w == int(w) and got.lo == int(got.lo), "step buckets are whole steps"
    col = (steps - int(got.lo)) // int(w)
    out = np.full((vals.shape[0], got.buckets), np.nan)
    for r in range(vals.shape[0]):
        for c in range(got.buckets):
            pick = vals[r, col == c]
            fin = pick[np.isfinite(pick)]
            if len(fin):
                out[r, c] = fin.mean()
    return out


def test_cells_are_bucket_means_and_the_drifting_rank_scores_highest(store: SQLStore) -> None:
    vals = _vals()
    _fill(store, vals)
    got = store.heatmap("p", "r", "loss", buckets=30)
    assert got is not None
    # 30 buckets of 10 steps: bucket j holds steps 10j to 10j + 9, and hi ends the last.
    assert (got.lo, got.hi, got.buckets, got.total_rows, got.offset) == (0, STEPS, 30, RANKS, 0)
    assert [r.rank for r in got.rows] == list(range(RANKS))
    assert [(r.node, r.local_rank) for r in got.rows][5] == (1, 1)
    want = _expected(vals, got)
    np.testing.assert_allclose(cells(got), want, rtol=1e-6)  # float32 on the wire
    med = np.nanmedian(want, axis=0)
    np.testing.assert_allclose(np.array(got.median, float), med, rtol=1e-9)
    scores = [r.score for r in got.rows]
    assert max(range(RANKS), key=lambda i: scores[i] or 0) == 5
    assert all(s is not None and s < 3 for i, s in enumerate(scores) if i != 5)


def test_range_pages_and_step_resolution(store: SQLStore) -> None:
    vals = _vals()
    _fill(store, vals)
    got = store.heatmap("p", "r", "loss", lo=50, hi=149, buckets=10, offset=4, limit=3)
    assert got is not None
    assert [r.label for r in got.rows] == ["rank-4", "rank-5", "rank-6"]
    assert got.total_rows == RANKS and got.offset == 4
    assert (got.lo, got.hi, got.buckets) == (50, 150, 10)
    np.testing.assert_allclose(cells(got), _expected(vals, got)[4:7], rtol=1e-6)
    # No bucket narrower than a step: 2,000 asked over 300 steps gives 300.
    fine = store.heatmap("p", "r", "loss", buckets=2000)
    assert fine is not None and fine.buckets == STEPS
    np.testing.assert_allclose(cells(fine)[0], vals[0], rtol=1e-6)


def test_unknown_run_metric_and_bad_arguments(store: SQLStore) -> None:
    _fill(store, _vals())
    assert store.heatmap("p", "nope", "loss") is None
    empty = store.heatmap("p", "r", "no-such-metric", buckets=8)
    assert empty is not None and len(empty.rows) == RANKS
    assert np.isnan(cells(empty)).all() and all(m is None for m in empty.median)
    for kw, word in (({"buckets": 0}, "buckets"), ({"buckets": 2001}, "buckets"),
                     ({"limit": 1025}, "limit"), ({"offset": -1}, "offset"),
                     ({"x": "epoch"}, "axis"), ({"lo": 9, "hi": 1}, "from")):  # fmt: skip
        with pytest.raises(UsageError, match=word):
            store.heatmap("p", "r", "loss", **kw)


def test_time_axis_buckets_are_equal_spans_of_the_range(store: SQLStore) -> None:
    vals = _vals()
    _fill(store, vals)
    got = store.heatmap("p", "r", "loss", x="time", buckets=7)
    assert got is not None and got.buckets == 7 and got.x == "time"
    t = np.arange(STEPS) + got.lo  # make_stream logs step s at T0 + 1 + s
    assert got.hi - got.lo == STEPS - 1
    col = np.clip(np.floor((t - got.lo) * (7 / (got.hi - got.lo))), 0, 6).astype(int)
    want = np.array([[np.mean(f[np.isfinite(f)]) for c in range(7) if (f := vals[r, col == c]).size]
                     for r in range(RANKS)])  # fmt: skip
    np.testing.assert_allclose(cells(got), want, rtol=1e-6)
    store.compact()  # the same from the stored chunks as from the pending uploads
    np.testing.assert_allclose(cells(store.heatmap("p", "r", "loss", x="time", buckets=7)), want,
                               rtol=1e-6)  # fmt: skip
