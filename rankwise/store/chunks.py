"""Columnar chunks: how one stream's points of one metric are stored.

A series (one stream x one metric) is a sequence of chunks, in ``seq`` order, each
holding at most ``CHUNK`` points as numpy columns (seq, step, time, value, weight). Every
chunk also carries summaries so that a chart-sized query rarely decodes raw points:

* ``head``: six representative points of the whole chunk, and
* ``subs``: the same six points for each run of ``MID`` consecutive points, followed by
  those of each run of ``SUB`` points (a reader wanting only the coarser tier reads the
  blob's first ``mid_count(n) * UNIT_BYTES`` bytes),

where the six are the first and last by step, the first and last by time, and the
minimum and maximum value (NaN never wins unless all are NaN). Each representative
point is stored as (step, time, value) float64 triples. Step and seq columns that progress
evenly (0, 1, 2, ...) are stored as their start and stride (``pack_ints``).

Invariants:

* A unit (a whole chunk, a mid- or a sub-block) contributes its four points for the x
  axis (first, last, min, max); grouping whole units into buckets therefore keeps every
  bucket's true extremes exactly (see ``rankwise.store.downsample.extremes``).
* Only the series' open tail is ever rewritten (its last chunks, each under
  ``MERGE_BELOW`` points: ``rankwise.store.ingest.append_series`` merges new points
  with the newest of them, a merge keeping the oldest merged chunk's id), and only under
  the stream's mark check, so chunk ids ascend in ``seq`` order.
* Values keep their type: a chunk whose values are all ``int`` (or all ``bool``) stores
  them as such (``kind`` ``i``/``b``) so history returns what was logged; charts read
  everything as float64.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

F8 = npt.NDArray[np.float64]
I8 = npt.NDArray[np.int64]

CHUNK = 4096  # points per chunk at most
# A chunk of a series' open tail takes in later batches while it is smaller than this:
# small batches coalesce, while large ones never rewrite what is stored.
MERGE_BELOW = CHUNK // 4
SUB = 64  # points per sub-block summary
MID = 8 * SUB  # points per mid-block summary (eight sub-blocks)
UNIT_BYTES = 6 * 3 * 8  # one unit's representative points
_DTYPE = {"f": np.float64, "i": np.int64, "b": np.bool_}
# Representative roles, in storage order.
STEP_FIRST, STEP_LAST, TIME_FIRST, TIME_LAST, Y_MIN, Y_MAX = range(6)
AXIS_ROLES = {
    "step": [STEP_FIRST, STEP_LAST, Y_MIN, Y_MAX],
    "time": [TIME_FIRST, TIME_LAST, Y_MIN, Y_MAX],
}


@dataclass
class Points:
    """Points of one series in ``seq`` order; ``weight`` is NaN where none was logged."""

    seq: I8
    step: I8
    time: F8
    value: npt.NDArray[Any]  # float64, int64 or bool, per ``kind``
    weight: F8
    kind: str = "f"

    def __len__(self) -> int:
        return int(self.seq.shape[0])

    def fvalue(self) -> F8:
        return self.value.astype(np.float64, copy=False)

    def take(self, a: int, b: int) -> Points:
        return Points(
            self.seq[a:b],
            self.step[a:b],
            self.time[a:b],
            self.value[a:b],
            self.weight[a:b],
            self.kind,
        )

    @staticmethod
    def concat(parts: list[Points]) -> Points:
        if len(parts) == 1:
            return parts[0]
        kinds = {p.kind for p in parts}
        kind = kinds.pop() if len(kinds) == 1 else "f"
        return Points(
            np.concatenate([p.seq for p in parts]),
            np.concatenate([p.step for p in parts]),
            np.concatenate([p.time for p in parts]),
            np.concatenate([p.value.astype(_DTYPE[kind], copy=False) for p in parts]),
            np.concatenate([p.weight for p in parts]),
            kind,
        )


@dataclass
class ChunkRow:
    """The stored form of a chunk (column values of the ``chunks`` table)."""

    n: int
    step_lo: int
    step_hi: int
    t_lo: float
    t_hi: float
    kind: str
    xs: bytes  # step int64 column then time float64 column
    ys: bytes
    seqs: bytes
    weights: bytes | None  # None when no point carried a weight
    head: bytes
    subs: bytes


def _first_hits(hit: npt.NDArray[np.bool_], unit: npt.NDArray[np.intp]) -> npt.NDArray[np.intp]:
    """Index of the first True of each unit (every unit has one), in unit order."""
    where = np.flatnonzero(hit)
    u = unit[where]
    first = np.empty(u.shape[0], np.bool_)
    first[:1] = True
    np.not_equal(u[1:], u[:-1], out=first[1:])
    return where[first]


_ROLE_REDUCE = (  # (column of the (step, time, value) triple, reduction) per role
    (0, np.minimum),
    (0, np.maximum),
    (1, np.minimum),
    (1, np.maximum),
    (2, np.minimum),
    (2, np.maximum),
)


def _pick(roles: list[F8], starts: npt.NDArray[np.intp]) -> npt.NDArray[np.intp]:
    """For each unit and role, the index of the role's extreme: shape (units, 6)."""
    n = roles[0].shape[0]
    unit = np.repeat(np.arange(starts.shape[0]), np.diff(np.append(starts, n)))
    picks = []
    for key, (_, ufunc) in zip(roles, _ROLE_REDUCE):
        best = ufunc.reduceat(key, starts)
        picks.append(_first_hits(key == best[unit], unit))
    return np.stack(picks, 1)


def _no_nan(y: F8, fill: float) -> F8:
    return np.where(np.isnan(y), fill, y)


def summarize(step: F8, time: F8, y: F8, starts: npt.NDArray[np.intp]) -> F8:
    """Representative points of the units beginning at ``starts``: shape (units, 6, 3)."""
    roles = [step, step, time, time, _no_nan(y, np.inf), _no_nan(y, -np.inf)]
    idx = _pick(roles, starts)
    return np.stack([step[idx], time[idx], y[idx]], 2)


def coarsen(reps: F8, starts: npt.NDArray[np.intp]) -> F8:
    """Summaries of runs of consecutive units (beginning at ``starts``) from theirs.

    Exact: a unit's extreme of each role is among its parts' extremes of that role, and
    taking the first of equal extremes keeps the earliest point, as ``summarize`` does.
    """
    roles = []
    for r, (c, _) in enumerate(_ROLE_REDUCE):
        key = reps[:, r, c]
        roles.append(_no_nan(key, np.inf if r == 4 else -np.inf) if c == 2 else key)
    idx = _pick(roles, starts)
    return reps[idx, np.arange(6)[None, :], :]


def encode_many(pieces: list[Points]) -> list[ChunkRow]:
    """Encode chunks, summarising all of them with a dozen numpy calls in all."""
    if not pieces:
        return []
    sizes = np.array([len(p) for p in pieces], np.intp)
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.intp)
    step = np.concatenate([p.step for p in pieces])
    time = np.concatenate([p.time for p in pieces])
    y = np.concatenate([p.fvalue() for p in pieces])
    step_f = step.astype(np.float64)
    subs_per = (sizes + SUB - 1) // SUB
    first_sub = np.cumsum(subs_per) - subs_per
    sub_starts = np.repeat(offsets, subs_per) + SUB * (
        np.arange(int(subs_per.sum())) - np.repeat(first_sub, subs_per)
    )
    subs = summarize(step_f, time, y, sub_starts.astype(np.intp))
    heads = coarsen(subs, first_sub.astype(np.intp))
    per = MID // SUB
    mids_per = (subs_per + per - 1) // per
    first_mid = np.cumsum(mids_per) - mids_per
    mid_starts = np.repeat(first_sub, mids_per) + per * (
        np.arange(int(mids_per.sum())) - np.repeat(first_mid, mids_per)
    )
    mids = coarsen(subs, mid_starts.astype(np.intp))
    mid_at = np.concatenate([[0], np.cumsum(mids_per)]).tolist()
    sub_at = np.concatenate([[0], np.cumsum(subs_per)]).tolist()
    step_lo = np.minimum.reduceat(step, offsets).tolist()
    step_hi = np.maximum.reduceat(step, offsets).tolist()
    t_lo = np.minimum.reduceat(time, offsets).tolist()
    t_hi = np.maximum.reduceat(time, offsets).tolist()
    step_even = _progressions(step, offsets, sizes)
    seq_even = _progressions(np.concatenate([p.seq for p in pieces]), offsets, sizes)
    out = []
    for i, p in enumerate(pieces):
        has_w = not np.isnan(p.weight).all()
        out.append(
            ChunkRow(
                n=len(p),
                step_lo=int(step_lo[i]),
                step_hi=int(step_hi[i]),
                t_lo=float(t_lo[i]),
                t_hi=float(t_hi[i]),
                kind=p.kind,
                xs=_packed(p.step, step_even[i]) + p.time.tobytes(),
                ys=p.value.astype(_DTYPE[p.kind], copy=False).tobytes(),
                seqs=_packed(p.seq, seq_even[i]),
                weights=p.weight.tobytes() if has_w else None,
                head=heads[i].tobytes(),
                subs=mids[mid_at[i] : mid_at[i + 1]].tobytes()
                + subs[sub_at[i] : sub_at[i + 1]].tobytes(),
            )
        )
    return out


def encode(p: Points) -> ChunkRow:
    return encode_many([p])[0]


def pack_ints(a: I8) -> bytes:
    """An int64 column; an arithmetic progression of three or more (steps 0, 1, 2, ...;
    seqs of a metric logged in every record) as just its start and stride."""
    a = a.astype(np.int64, copy=False)
    if a.shape[0] > 2:
        stride = a[1] - a[0]
        if (np.diff(a) == stride).all():
            return np.array([a[0], stride], np.int64).tobytes()
    return a.tobytes()


def _progressions(
    col: I8, offsets: npt.NDArray[np.intp], sizes: npt.NDArray[np.intp]
) -> list[bool]:
    """Per piece of ``col`` (at ``offsets``, of ``sizes``): is it what ``pack_ints`` packs?"""
    d = np.diff(col.astype(np.int64, copy=False))
    changes = np.zeros(d.shape[0] + 1, np.int64)  # changes[k]: d[j] != d[j - 1], j <= k
    if d.shape[0] > 1:
        np.cumsum(d[1:] != d[:-1], out=changes[1:-1])
    last = np.maximum(offsets + sizes - 2, offsets)  # a piece's last diff, when n > 1
    even = (sizes > 2) & (changes[last] == changes[offsets])
    return even.tolist()  # type: ignore[no-any-return]


def _packed(a: I8, even: bool) -> bytes:
    a = a.astype(np.int64, copy=False)
    if even:
        return np.array([a[0], a[1] - a[0]], np.int64).tobytes()
    return a.tobytes()


def unpack_ints(blob: bytes, n: int) -> I8:
    """Inverse of ``pack_ints`` (the first ``8 * n`` bytes, or 16 when packed)."""
    if n > 2 and len(blob) in (16, 16 + 8 * n):  # packed (the second: a steps+times blob)
        start, stride = np.frombuffer(blob, np.int64, 2)
        out: I8 = start + stride * np.arange(n, dtype=np.int64)
        return out
    return np.frombuffer(blob, np.int64, n)


def _xs(n: int, xs: bytes) -> tuple[I8, F8]:
    step = unpack_ints(xs, n)
    time = np.frombuffer(xs, np.float64, n, len(xs) - 8 * n)
    return step, time


def decode_xy(n: int, xs: bytes, ys: bytes, kind: str) -> tuple[I8, F8, F8]:
    """(step, time, value as float64) of a stored chunk."""
    step, time = _xs(n, xs)
    value = np.frombuffer(ys, _DTYPE[kind], n).astype(np.float64, copy=False)
    return step, time, value


def decode_y(n: int, ys: bytes, kind: str) -> F8:
    """The values of a stored chunk as float64 (no copy when stored as float64)."""
    return np.frombuffer(ys, _DTYPE[kind], n).astype(np.float64, copy=False)


def decode(n: int, kind: str, xs: bytes, ys: bytes, seqs: bytes, weights: bytes | None) -> Points:
    step, time = _xs(n, xs)
    weight = np.frombuffer(weights, np.float64, n) if weights is not None else np.full(n, np.nan)
    return Points(
        unpack_ints(seqs, n),
        step,
        time,
        np.frombuffer(ys, _DTYPE[kind], n),
        weight,
        kind,
    )


def mid_count(n: int) -> int:
    return (n + MID - 1) // MID


def units(blobs: list[bytes]) -> F8:
    """Representative points of many ``head``/``subs`` blobs, shape (units, 6, 3)."""
    return np.frombuffer(b"".join(blobs), np.float64).reshape(-1, 6, 3)


def split(p: Points) -> list[Points]:
    """Cut points into chunks of at most ``CHUNK``."""
    return [p.take(a, a + CHUNK) for a in range(0, len(p), CHUNK)]
