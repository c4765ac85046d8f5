"""Cross-rank aggregates per (run, metric, step) as a commutative monoid over numpy columns.

An ``Agg`` holds, for a sorted set of distinct steps, the columns

    n      values seen at that step (finite values only)
    nw     how many of them carried a weight
    sum    sum of the values
    m2     sum of squared deviations from the step's mean
    wsum   sum of weight * value
    wtot   sum of the weights
    min    smallest value
    max    largest value
    tsum   sum of the values' wall times (x = time plots the step at its mean time)
    tmin   earliest of those times
    tmax   latest of those times

Invariants:

* ``merge`` is associative and commutative (up to floating-point rounding) and ``empty()``
  is its identity, so aggregates computed per ingest batch and merged into stored blocks
  in any order, by any number of ingesters, equal the aggregate of all points at once.
  Exactly-once is the store's job (the stream mark moves in the same transaction); this
  module only promises that merging the same points once gives the same answer.
* ``m2`` is the sum of squares made numerically stable: parts are combined with the law
  of total variance (Chan et al.), so a std of 1e-3 around a mean of 1e6 survives.
* NaN and ±Inf values are left out: one rank's NaN must not erase the job's mean.
* ``wmean`` is the weighted mean only where every value at the step carried a weight and
  the weights sum to more than zero; elsewhere it equals ``mean``. ``std`` is the
  population standard deviation (numpy's ``std`` with ``ddof=0``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

F8 = npt.NDArray[np.float64]
I8 = npt.NDArray[np.int64]

FIELDS = ("n", "nw", "sum", "m2", "wsum", "wtot", "min", "max", "tsum", "tmin", "tmax")
_NF = len(FIELDS)


@dataclass
class Agg:
    """Aggregate columns over sorted, distinct ``step`` (see the module docstring)."""

    step: I8
    cols: F8  # shape (len(FIELDS), len(step)), rows in FIELDS order

    def __len__(self) -> int:
        return int(self.step.shape[0])

    def col(self, name: str) -> F8:
        row: F8 = self.cols[FIELDS.index(name)]
        return row

    @classmethod
    def empty(cls) -> Agg:
        return cls(np.zeros(0, np.int64), np.zeros((_NF, 0), np.float64))

    @classmethod
    def from_points(cls, step: I8, value: F8, weight: F8, time: F8) -> Agg:
        """The aggregate of single points; ``weight`` is NaN where none was logged."""
        keep = np.isfinite(value)
        if not keep.all():
            step, value, weight, time = step[keep], value[keep], weight[keep], time[keep]
        return reduce(step.astype(np.int64, copy=False), point_cols(value, weight, time))

    def merge(self, other: Agg, inplace: bool = False) -> Agg:
        """The aggregate of both: matching steps combine in place, new steps are inserted
        in order (both sides are sorted and distinct, so no sort is needed).

        ``inplace`` lets the result reuse (and overwrite) this aggregate's columns.
        """
        if not len(other):
            return self
        if not len(self):
            return other
        pos = np.searchsorted(self.step, other.step)
        at = np.minimum(pos, len(self) - 1)
        hit = self.step[at] == other.step
        cols = self.cols if inplace and self.cols.flags.writeable else self.cols.copy()
        if hit.all():
            a, b = int(at[0]), int(at[-1]) + 1
            if b - a == len(other):  # the usual case: a run of steps already stored
                _combine(cols[:, a:b], other.cols)
            else:
                for i, row in enumerate(_combine(cols[:, at], other.cols)):
                    cols[i, at] = row
            return Agg(self.step, cols)
        if hit.any():
            where = at[hit]
            for i, row in enumerate(_combine(cols[:, where], other.cols[:, hit])):
                cols[i, where] = row
        miss = ~hit
        return Agg(
            np.insert(self.step, pos[miss], other.step[miss]),
            np.insert(cols, pos[miss], other.cols[:, miss], axis=1),
        )

    def between(self, lo: int | None, hi: int | None) -> Agg:
        """The steps in ``[lo, hi]`` (either end open when None)."""
        a = 0 if lo is None else int(np.searchsorted(self.step, lo, "left"))
        b = len(self) if hi is None else int(np.searchsorted(self.step, hi, "right"))
        return Agg(self.step[a:b], self.cols[:, a:b])

    # -- derived columns --------------------------------------------------------------

    def mean(self) -> F8:
        return self.col("sum") / np.maximum(self.col("n"), 1.0)

    def wmean(self) -> F8:
        n, nw, wtot = self.col("n"), self.col("nw"), self.col("wtot")
        weighted = (nw == n) & (wtot > 0)
        safe = np.where(weighted, wtot, 1.0)
        return np.where(weighted, self.col("wsum") / safe, self.mean())

    def std(self) -> F8:
        return np.sqrt(np.maximum(self.col("m2"), 0.0) / np.maximum(self.col("n"), 1.0))

    def time(self) -> F8:
        return self.col("tsum") / np.maximum(self.col("n"), 1.0)

    # -- storage ----------------------------------------------------------------------

    def to_bytes(self) -> bytes:
        return self.step.tobytes() + np.ascontiguousarray(self.cols).tobytes()

    @classmethod
    def from_bytes(cls, blob: bytes | memoryview) -> Agg:
        k = len(blob) // (8 * (_NF + 1))
        step = np.frombuffer(blob, np.int64, k)
        cols = np.frombuffer(blob, np.float64, k * _NF, 8 * k).reshape(_NF, k)
        return cls(step, cols)

    @classmethod
    def concat(cls, parts: list[Agg]) -> Agg:
        """Join aggregates over disjoint, ascending step ranges (stored blocks)."""
        if not parts:
            return cls.empty()
        if len(parts) == 1:
            return parts[0]
        return cls(
            np.concatenate([p.step for p in parts]), np.concatenate([p.cols for p in parts], 1)
        )


def point_cols(value: F8, weight: F8, time: F8) -> F8:
    """Aggregate columns of single finite points, one entry each (not yet reduced)."""
    cols = np.empty((_NF, value.shape[0]), np.float64)
    has_w = np.isfinite(weight)
    w = np.where(has_w, weight, 0.0)
    cols[0] = 1.0
    cols[1] = has_w
    cols[2] = value
    cols[3] = 0.0
    cols[4] = w * value
    cols[5] = w
    cols[6] = value
    cols[7] = value
    cols[8] = time
    cols[9] = time
    cols[10] = time
    return cols


def _combine(a: F8, b: F8) -> F8:
    """Fold aggregate columns ``b`` into ``a`` (same steps), in place; returns ``a``."""
    na, nb = a[0].copy(), b[0]
    n = np.maximum(na + nb, 1.0)
    dev = b[2] / np.maximum(nb, 1.0) - a[2] / np.maximum(na, 1.0)
    a[3] += b[3] + dev * dev * (na * nb / n)
    for i in (0, 1, 2, 4, 5, 8):  # n, nw, sum, wsum, wtot, tsum add up
        a[i] += b[i]
    np.minimum(a[6], b[6], out=a[6])
    np.maximum(a[7], b[7], out=a[7])
    np.minimum(a[9], b[9], out=a[9])
    np.maximum(a[10], b[10], out=a[10])
    return a


def reduce(step: I8, cols: F8) -> Agg:
    """Combine the entries of equal steps into one (the monoid's merge, vectorised)."""
    if step.shape[0] == 0:
        return Agg(step, cols.reshape(_NF, 0))
    if (step[1:] > step[:-1]).all():
        return Agg(step, cols)  # already distinct and sorted
    order = np.argsort(step, kind="stable")
    step, cols = step[order], cols[:, order]
    new = np.empty(step.shape[0], np.bool_)
    new[:1] = True
    np.not_equal(step[1:], step[:-1], out=new[1:])
    starts = np.flatnonzero(new)
    out = np.empty((_NF, starts.shape[0]), np.float64)
    add = np.add.reduceat
    n = add(cols[0], starts)
    s = add(cols[2], starts)
    out[0] = n
    out[1] = add(cols[1], starts)
    out[2] = s
    # Law of total variance: m2 = sum(m2_i) + sum(n_i * (mean_i - mean)^2).
    group = np.cumsum(new) - 1
    mean_i = cols[2] / np.maximum(cols[0], 1.0)
    mean = s / np.maximum(n, 1.0)
    dev = mean_i - mean[group]
    out[3] = add(cols[3] + cols[0] * dev * dev, starts)
    out[4] = add(cols[4], starts)
    out[5] = add(cols[5], starts)
    out[6] = np.minimum.reduceat(cols[6], starts)
    out[7] = np.maximum.reduceat(cols[7], starts)
    out[8] = add(cols[8], starts)
    out[9] = np.minimum.reduceat(cols[9], starts)
    out[10] = np.maximum.reduceat(cols[10], starts)
    return Agg(step[starts], out)
