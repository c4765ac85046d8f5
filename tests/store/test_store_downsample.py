"""M4 downsampling, checked with hypothesis: no bucket loses its extremes."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from rankwise.store.aggregate import Agg
from rankwise.store.chunks import SUB, Points, coarsen, decode, encode, summarize
from rankwise.store.downsample import m4

xs = st.floats(-1e6, 1e6, allow_nan=False)
ys = st.one_of(st.floats(-1e9, 1e9), st.just(float("nan")), st.just(float("inf")))


@st.composite
def series(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, int, float | None, float | None]:
    n = draw(st.integers(0, 400))
    x = np.array(draw(st.lists(xs, min_size=n, max_size=n)), np.float64)
    if draw(st.booleans()):
        x = np.sort(x)  # the usual case: steps or times in order
    if draw(st.booleans()) and n:
        x = np.round(x / 1000.0)  # many equal x
    y = np.array(draw(st.lists(ys, min_size=n, max_size=n)), np.float64)
    max_points = draw(st.integers(1, 120))
    lo = hi = None
    if n and draw(st.booleans()):  # a grid pinned wider than the data, as a chart range is
        lo, hi = float(x.min()) - draw(st.floats(0, 100)), float(x.max()) + draw(st.floats(0, 100))
    return x, y, max_points, lo, hi


@settings(max_examples=150, deadline=None)
@given(series())
def test_m4_keeps_every_bucket_extreme(
    case: tuple[np.ndarray, np.ndarray, int, float | None, float | None],
) -> None:
    x, y, max_points, lo, hi = case
    idx = m4(x, y, max_points, lo, hi)
    n = x.shape[0]
    assert len(set(idx.tolist())) == len(idx) and all(0 <= i < n for i in idx)
    # at most max_points; a single bucket still keeps its four (the documented constant)
    assert len(idx) <= max(max_points, 4)
    assert (np.diff(x[idx]) >= 0).all()
    if n <= max_points:
        assert len(idx) == n
        return
    assert x[idx[0]] == x.min() and x[idx[-1]] == x.max()  # first and last present
    k = max(1, max_points // 4)
    a = x.min() if lo is None else lo
    b = x.max() if hi is None else hi
    bucket = (
        np.clip(np.floor((x - a) * (k / (b - a))), 0, k - 1) if b > a else np.zeros(n)
    ).astype(int)
    chosen = set(idx.tolist())
    for g in np.unique(bucket):
        members = np.flatnonzero(bucket == g)
        kept = [i for i in members if i in chosen]
        assert x[kept].min() == x[members].min() and x[kept].max() == x[members].max()
        finite = members[~np.isnan(y[members])]
        if finite.size:
            assert np.nanmax(y[kept]) == y[finite].max()
            assert np.nanmin(y[kept]) == y[finite].min()


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 30), st.floats(-1e3, 1e3), st.one_of(st.none(), st.floats(0.1, 5))
        ),
        min_size=1,
        max_size=60,
    ),
    st.integers(0, 60),
)
def test_aggregate_merge_is_order_free(
    points: list[tuple[int, float, float | None]], cut: int
) -> None:
    """Merging per-batch aggregates in any split and order equals aggregating at once."""

    def agg(part: list[tuple[int, float, float | None]]) -> Agg:
        step = np.array([p[0] for p in part], np.int64)
        value = np.array([p[1] for p in part], np.float64)
        weight = np.array([np.nan if p[2] is None else p[2] for p in part], np.float64)
        return Agg.from_points(step, value, weight, np.zeros(len(part)))

    whole = agg(points)
    split = agg(points[cut:]).merge(agg(points[:cut])) if 0 < cut < len(points) else whole
    stored = Agg.from_bytes(whole.to_bytes(base=0), base=0)  # the compact stored form
    assert np.array_equal(stored.step, whole.step) and np.array_equal(stored.cols, whole.cols)
    assert np.array_equal(whole.step, split.step)
    np.testing.assert_allclose(split.cols, whole.cols, rtol=1e-9, atol=1e-6)
    for s in whole.step.tolist():
        vals = np.array([p[1] for p in points if p[0] == s])
        i = int(np.searchsorted(whole.step, s))
        assert whole.col("n")[i] == len(vals)
        assert whole.col("min")[i] == vals.min() and whole.col("max")[i] == vals.max()
        np.testing.assert_allclose(whole.mean()[i], vals.mean(), rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(whole.std()[i], vals.std(), rtol=1e-6, atol=1e-6)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 9), st.integers(0, 9), ys), min_size=1, max_size=300))
def test_chunk_summary_from_sub_blocks_is_exact(points: list[tuple[int, int, float]]) -> None:
    """A chunk's head, coarsened from its sub-block summaries, equals summarising it whole."""
    step, time, y = (np.array(c, np.float64) for c in zip(*points))
    subs = summarize(step, time, y, np.arange(0, len(points), SUB))
    whole = summarize(step, time, y, np.array([0]))
    assert np.array_equal(coarsen(subs, np.array([0])), whole, equal_nan=True)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(-(2**40), 2**40), min_size=1, max_size=50),
    st.integers(0, 3),
    st.booleans(),
)
def test_chunk_columns_round_trip(values: list[int], stride: int, progression: bool) -> None:
    """Steps and seqs stored as (start, stride) when they progress evenly, in full else."""
    n = len(values)
    seq = np.arange(n, dtype=np.int64) * stride + values[0] if progression else np.array(values)
    step = np.array(values[::-1], np.int64)
    time = np.linspace(0.0, 1.0, n)
    weight = np.where(np.arange(n) % 2 == 0, np.nan, 2.0)
    p = Points(seq, step, time, np.array(values, np.int64), weight, "i")
    c = encode(p)
    back = decode(c.n, c.kind, c.xs, c.ys, c.seqs, c.weights)
    for a, b in zip(
        (back.seq, back.step, back.time, back.value, back.weight),
        (p.seq, p.step, p.time, p.value, p.weight),
    ):
        assert np.array_equal(a, b, equal_nan=True)
