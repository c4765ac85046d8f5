"""Chart-sized series: M4 downsampling (Jugel et al., "M4: A Visualization-Oriented Time
Series Data Aggregation", VLDB 2014).

The x range is cut into ``k = max_points // 4`` equal buckets (about two pixels each when
``max_points`` is twice the chart's width) and each bucket keeps four points: its first
and last by x, and its minimum and maximum y. A line drawn through them looks the same as
one drawn through every point, and no spike is ever sampled away.

Invariants of ``m4`` (checked with hypothesis in ``tests/store/test_store_downsample.py``):

* every bucket's true minimum and maximum y (ignoring NaN) are in the output, and so are
  the first and last points of the whole input;
* the output has at most ``max(max_points, 4)`` points (a single bucket still keeps its
  four), and nothing is dropped when the input already fits (``len(x) <= max_points``);
* the returned indices sort the points by x (ties keep input order).

``extremes`` is the general form the stores use: points are grouped by an arbitrary
``group`` array (a store groups whole pre-summarised chunks by the bucket of their first
x, so that every group's extremes stay exact), and any number of y columns contribute
their minima and maxima (a band keeps the extremes of min, max and mean).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

F8 = npt.NDArray[np.float64]
IDX = npt.NDArray[np.intp]


def is_sorted(a: npt.NDArray[Any]) -> bool:
    return bool(a.shape[0] < 2 or (a[1:] >= a[:-1]).all())


def bucket_of(x: F8, k: int, lo: float | None = None, hi: float | None = None) -> IDX:
    """The bucket (0..k-1) of each x when ``[lo, hi]`` is cut into ``k`` equal parts.

    ``lo``/``hi`` default to the data's own range; points outside are clamped to the
    first or last bucket.
    """
    if x.shape[0] == 0:
        return np.zeros(0, np.intp)
    lo = float(x.min()) if lo is None else float(lo)
    hi = float(x.max()) if hi is None else float(hi)
    if not hi > lo:
        return np.zeros(x.shape[0], np.intp)
    b = np.floor((x - lo) * (k / (hi - lo)))
    return np.clip(b, 0, k - 1).astype(np.intp)


def _first_hits(hit: npt.NDArray[np.bool_], group: IDX) -> IDX:
    """Index of the first True of each group (every group has one), in group order."""
    where = np.flatnonzero(hit)
    g = group[where]
    return where[np.r_[True, g[1:] != g[:-1]]]


def extremes(
    x: F8,
    group: IDX,
    mins: Sequence[F8],
    maxs: Sequence[F8],
) -> IDX:
    """Indices of each group's first and last point by x, and of the minimum of every
    array in ``mins`` and the maximum of every array in ``maxs`` (NaN never wins unless a
    group is all NaN). Returned sorted by x, without repeats.
    """
    n = x.shape[0]
    if n == 0:
        return np.zeros(0, np.intp)
    if is_sorted(group) and is_sorted(x):
        order: IDX | None = None
        gs, xs = group, x
    else:
        order = np.lexsort((x, group))
        gs, xs = group[order], x[order]
    starts = np.flatnonzero(np.r_[True, gs[1:] != gs[:-1]])
    ends = np.r_[starts[1:], n] - 1
    gid = np.cumsum(np.r_[False, gs[1:] != gs[:-1]])
    picks = [starts, ends]
    for ys, fill, ufunc in [(a, np.inf, np.minimum) for a in mins] + [
        (a, -np.inf, np.maximum) for a in maxs
    ]:
        ys = ys if order is None else ys[order]
        key = np.where(np.isnan(ys), fill, ys)
        best = ufunc.reduceat(key, starts)
        picks.append(_first_hits(key == best[gid], gid))
    pos = np.unique(np.concatenate(picks))
    idx = pos if order is None else order[pos]
    if order is not None or not is_sorted(xs[pos]):
        idx = idx[np.argsort(x[idx], kind="stable")]
    return idx.astype(np.intp, copy=False)


def m4(x: F8, y: F8, max_points: int, lo: float | None = None, hi: float | None = None) -> IDX:
    """Indices of the M4 points of ``(x, y)`` for a chart of ``max_points`` points.

    When everything fits, every index is returned (sorted by x). ``lo``/``hi`` pin the
    bucket grid to the requested range so that buckets line up with the chart's pixels.
    """
    n = x.shape[0]
    if n <= max_points:
        return np.argsort(x, kind="stable").astype(np.intp)
    k = max(1, max_points // 4)
    return extremes(x, bucket_of(x, k, lo, hi), [y], [y])
