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
    tmin   the earliest wall time a value of that step was logged (its x when x = time)
    nan    NaN values seen at that step
    posinf +Inf values seen at that step
    neginf -Inf values seen at that step

Invariants:

* ``merge`` is associative and commutative (up to floating-point rounding) and ``empty()``
  is its identity, so aggregates computed per ingest batch and merged into stored blocks
  in any order, by any number of ingesters, equal the aggregate of all points at once.
  Exactly-once is the store's job (the stream mark moves in the same transaction); this
  module only promises that merging the same points once gives the same answer.
* ``m2`` is the sum of squares made numerically stable: parts are combined with the law
  of total variance (Chan et al.), so a std of 1e-3 around a mean of 1e6 survives.
* NaN and ±Inf values are left out of every column but their own counts (``nan``,
  ``posinf``, ``neginf``) and ``tmin``: one rank's NaN must not erase the job's mean, yet
  a step whose every value was NaN is still a step (``n == 0``), so the chart can mark it.
  A non-finite point is the monoid's identity in the other columns (``min`` +Inf, ``max``
  -Inf, the sums 0).
* ``wmean`` is the weighted mean only where every value at the step carried a weight and
  the weights sum to more than zero; elsewhere it equals ``mean``. ``std`` is the
  population standard deviation (numpy's ``std`` with ``ddof=0``).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

F8 = npt.NDArray[np.float64]
I8 = npt.NDArray[np.int64]

FIELDS = ("n", "nw", "sum", "m2", "wsum", "wtot", "min", "max", "tmin", "nan", "posinf", "neginf")
_NF = len(FIELDS)
COUNTS = slice(9, 12)  # the non-finite counts: nan, posinf, neginf
_FULL, _CONSTANT, _SAME_AS_SUM, _ZERO = 0, 1, 2, 3  # how a column is stored
_ZERO_BITS = struct.pack("<d", 0.0)
# Set in a stored block's step count when it holds every column of FIELDS; a block
# without it was stored before the non-finite counts (schema version 5: 9 columns).
WITH_COUNTS = 1 << 31
_V5_COLUMNS = 9


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

    def nonfinite(self) -> F8:
        """What a step with no finite value stands for: NaN where a NaN (or both +Inf
        and -Inf) was logged, else the infinity that was; NaN elsewhere too (no value)."""
        nan, pos, neg = self.cols[COUNTS]
        out = np.full(len(self), np.nan)
        out[(pos > 0) & (nan == 0) & (neg == 0)] = np.inf
        out[(neg > 0) & (nan == 0) & (pos == 0)] = -np.inf
        return out

    def shown(self, column: F8) -> F8:
        """``column`` (a mean, min or max) with each step that holds no finite value
        standing for its non-finite values (``nonfinite``): an honest NaN, never 0."""
        empty = self.col("n") == 0
        if not empty.any():
            return column
        return np.where(empty, self.nonfinite(), column)

    def wmean(self) -> F8:
        n, nw, wtot = self.col("n"), self.col("nw"), self.col("wtot")
        weighted = (nw == n) & (wtot > 0)
        safe = np.where(weighted, wtot, 1.0)
        return np.where(weighted, self.col("wsum") / safe, self.mean())

    def std(self) -> F8:
        return np.sqrt(np.maximum(self.col("m2"), 0.0) / np.maximum(self.col("n"), 1.0))

    def time(self) -> F8:
        return self.col("tmin")

    # -- storage ----------------------------------------------------------------------

    def to_bytes(self, base: int = 0) -> bytes:
        """The stored form of a block whose steps lie in ``[base, base + 65536)``.

        Steps are kept as 16-bit offsets from ``base``, and a column that is one constant
        throughout (``n`` for a run whose every rank logs every step, the weight columns
        when nobody logs weights, ``m2`` for one rank) or equal to ``sum`` (``min`` and
        ``max`` where one value was seen) takes a byte or nine instead of 8 per step: a
        one-rank run's aggregates cost 18 bytes per step rather than 80. A column that is
        zero throughout (the non-finite counts of a healthy run) takes its byte alone.
        The step count carries ``WITH_COUNTS``: ``from_bytes`` still reads a block stored
        without it (schema version 5), as one whose counts are zero.
        """
        k = len(self)
        head = bytearray(struct.pack("<I", k | WITH_COUNTS))
        body = [(self.step - base).astype(np.uint16).tobytes()]
        cols = self.cols
        # Two numpy calls for every column's flags (this runs per block per ingest).
        const = (cols == cols[:, :1]).all(axis=1).tolist() if k else [False] * len(cols)
        same = (cols[6:8] == cols[2]).all(axis=1).tolist() if k else [False, False]
        for i, row in enumerate(cols):
            if i in (6, 7) and same[i - 6]:
                head.append(_SAME_AS_SUM)
            elif const[i]:
                first = struct.pack("<d", row[0])
                if first == _ZERO_BITS:  # bit for bit: -0.0 keeps its sign
                    head.append(_ZERO)
                else:
                    head.append(_CONSTANT)
                    body.append(first)
            else:
                head.append(_FULL)
                body.append(row.tobytes())
        return bytes(head) + b"".join(body)

    @classmethod
    def from_bytes(cls, blob: bytes | memoryview, base: int = 0) -> Agg:
        (word,) = struct.unpack_from("<I", blob)
        k = word & ~WITH_COUNTS
        stored = _NF if word & WITH_COUNTS else _V5_COLUMNS  # a v5 block counted nothing
        codes = bytes(blob[4 : 4 + stored]) + bytes([_ZERO]) * (_NF - stored)
        pos = 4 + stored
        step = np.frombuffer(blob, np.uint16, k, pos).astype(np.int64) + base
        pos += 2 * k
        cols = np.empty((_NF, k), np.float64)
        for i, code in enumerate(codes):
            if code == _FULL:
                cols[i] = np.frombuffer(blob, np.float64, k, pos)
                pos += 8 * k
            elif code == _CONSTANT:
                cols[i] = struct.unpack_from("<d", blob, pos)[0]
                pos += 8
            elif code == _ZERO:
                cols[i] = 0.0
        for i, code in enumerate(codes):
            if code == _SAME_AS_SUM:
                cols[i] = cols[2]
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


# Values near the float range (a diverging loss of 1e300, a logged -1e308) make sums,
# weighted sums and squared deviations overflow to ±inf (and inf - inf to NaN): those are
# the honest aggregates of such values, not errors, so numpy is not asked to warn.
_FLOAT_RANGE = np.errstate(over="ignore", invalid="ignore")


@_FLOAT_RANGE
def point_cols(value: F8, weight: F8, time: F8) -> F8:
    """Aggregate columns of single points, one entry each (not yet reduced). A NaN or
    ±Inf point counts in its own column and is the identity everywhere else."""
    cols = np.empty((_NF, value.shape[0]), np.float64)
    has_w = np.isfinite(weight)
    finite = np.isfinite(value)
    bad: npt.NDArray[np.bool_] | None = None
    if finite.all():
        cols[COUNTS] = 0.0
    else:  # the rare batch: a few more passes over its points
        bad = ~finite
        cols[9] = np.isnan(value)
        cols[10] = np.isposinf(value)
        cols[11] = np.isneginf(value)
        has_w &= finite
        value = np.where(finite, value, 0.0)
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
    if bad is not None:
        cols[0, bad] = 0.0
        cols[6, bad] = np.inf
        cols[7, bad] = -np.inf
    return cols


@_FLOAT_RANGE
def _combine(a: F8, b: F8) -> F8:
    """Fold aggregate columns ``b`` into ``a`` (same steps), in place; returns ``a``."""
    na, nb = a[0].copy(), b[0]
    n = np.maximum(na + nb, 1.0)
    dev = b[2] / np.maximum(nb, 1.0) - a[2] / np.maximum(na, 1.0)
    a[3] += b[3] + dev * dev * (na * nb / n)
    for i in (0, 1, 2, 4, 5):  # n, nw, sum, wsum, wtot add up
        a[i] += b[i]
    np.minimum(a[6], b[6], out=a[6])
    np.maximum(a[7], b[7], out=a[7])
    np.minimum(a[8], b[8], out=a[8])
    a[COUNTS] += b[COUNTS]
    return a


@_FLOAT_RANGE
def reduce(step: I8, cols: F8) -> Agg:
    """Combine the entries of equal steps into one (the monoid's merge, vectorised)."""
    if step.shape[0] == 0:
        return Agg(step, cols.reshape(_NF, 0))
    if (step[1:] > step[:-1]).all():
        return Agg(step, cols)  # already distinct and sorted
    order = np.argsort(step, kind="stable")
    # Counts are all zero in almost every batch: then they are neither gathered nor summed.
    counted = bool(cols[COUNTS].any())
    step, cols = step[order], cols[: _NF if counted else COUNTS.start, order]
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
    out[8] = np.minimum.reduceat(cols[8], starts)
    out[COUNTS] = add(cols[COUNTS], starts, axis=1) if counted else 0.0
    return Agg(step[starts], out)
