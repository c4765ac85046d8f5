"""The heatmap's cells on the step axis: whole-step buckets, from the closed chunks'
block sums where they fit and from the points elsewhere.

Buckets on the step axis are ``w`` whole steps wide, the first starting at step ``a0``:
bucket ``j`` holds steps ``a0 + j * w`` to ``a0 + j * w + w - 1``, and the reply's
``hi`` is ``a0 + k * w``, the end of the last one (so the dashboard's
``(hi - lo) / buckets`` is ``w``). Every cell averages the same number of steps.

``w`` and ``a0`` are multiples of a power of two ``Q``, the *quantum*: the largest at
most a quarter of the natural width (the range over the buckets asked for), so that
rounding the width up to it widens it by at most a quarter (10,000 steps in 500 buckets:
``Q`` = 4, ``w`` = 20). The layout depends on the range and ``buckets`` alone, never on
what is stored. A ``chunk_sums`` row whose blocks are at most ``Q`` wide then has each
block inside one bucket and adds its sums and counts (``rankwise.store.step_sums``);
every other chunk, and the points not yet compacted, add their points. 1,024 ranks x
10,000 steps read 3,072 rows of 10 KB instead of 190 MB of points.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .chunks import decode_y, unpack_ints
from .pending_view import PendingView
from .step_sums import decode, has_sums
from .tx import Tx, marks

# The steps part of ``xs`` alone (the times, 8 bytes a point, stay in the database;
# ``chunks.decode_xy`` lays ``xs`` out).
_STEPS = "substr(xs, 1, CAST(length(xs) - 8 * n AS INTEGER))"


I64_MIN, I64_MAX = -(2**63), 2**63 - 1  # the steps a chunk can hold


class Layout(NamedTuple):
    """``k`` buckets of ``w`` steps from ``a0``; ``quantum``: see the module docstring."""

    a0: int
    w: int
    k: int
    quantum: int

    @property
    def end(self) -> int:
        return self.a0 + self.k * self.w

    def cols(self, step: np.ndarray) -> np.ndarray:
        """Each step's bucket (outside ``[0, k)``: outside the range). In unsigned
        arithmetic, so that steps at int64's ends cannot wrap into the range: a step
        below ``a0`` comes out past ``k`` (or negative once cast back)."""
        off = step.astype(np.int64, copy=False).view(np.uint64) - np.uint64(self.a0 % 2**64)
        return (off // np.uint64(self.w)).astype(np.int64)


def _pow2_floor(v: int) -> int:
    return 1 << (max(1, v).bit_length() - 1)


def layout(lo: int, hi: int, buckets: int) -> Layout:
    """Buckets over steps ``lo..hi`` (``lo <= hi``), at most ``buckets`` of them, aligned
    to the widest blocks that cost at most a quarter more width (the same whatever is
    stored, so a run's heatmap keeps its buckets as its chunks close)."""
    w0 = -(-(hi - lo + 1) // buckets)
    q = _pow2_floor(w0 // 4) if w0 >= 4 else 1
    w = -(-w0 // q) * q
    a0 = (lo // q) * q
    while -(-(hi - a0 + 1) // w) > buckets:
        w += q
    return Layout(a0, w, -(-(hi - a0 + 1) // w), q)


_Parts = tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]


class _Sums(NamedTuple):
    stream: int
    step_lo: int
    step_hi: int
    wlog: int
    b0: int
    blob: bytes


class StepReader:
    """The step-axis cells of one page of rows for one metric (see the module docstring)."""

    def __init__(self, tx: Tx, row_of: dict[int, int], metric: int, pending: PendingView):
        self.tx, self.row_of, self.metric, self.pending = tx, row_of, metric, pending
        self.sids = list(row_of)

    def gather(self, lo: float | None, hi: float | None, margin: int) -> None:
        """Find the sums rows and the other chunks (with ``lo``/``hi`` both given, only
        those within ``margin`` steps of the range)."""
        rng, args, low = "", list[int](), None
        if lo is not None and hi is not None:
            rng = " AND step_lo <= ?"
            args = [min(I64_MAX, math.floor(hi) + margin)]
            low = math.ceil(lo) - margin
        self.sums: dict[int, _Sums] = {}
        self.raw: list[int] = []
        if has_sums(self.tx):
            for i in range(0, len(self.sids), 500):
                part = self.sids[i : i + 500]
                for cid, stream, step_lo, step_hi, wlog, b0, blob in self.tx.all(
                    "SELECT id, stream, step_lo, step_hi, wlog, b0, sums FROM chunk_sums "
                    f"WHERE stream IN ({marks(len(part))}) AND metric = ?{rng}",
                    [*part, self.metric, *args],
                ):
                    self.sums[int(cid)] = _Sums(
                        int(stream), int(step_lo), int(step_hi), int(wlog), int(b0), bytes(blob)
                    )
        for i in range(0, len(self.sids), 500):  # the index alone (stream, metric, step_lo)
            part = self.sids[i : i + 500]
            for (cid,) in self.tx.all(
                f"SELECT id FROM chunks WHERE stream IN ({marks(len(part))}) AND metric = ?{rng}",
                [*part, self.metric, *args],
            ):
                if int(cid) not in self.sums:
                    self.raw.append(int(cid))
        if low is not None:
            self.sums = {c: s for c, s in self.sums.items() if s.step_hi >= low}

    def bounds(self) -> tuple[int | None, int | None]:
        """The steps the page logged the metric at, lowest and highest (None: none)."""
        lows = [s.step_lo for s in self.sums.values()]
        highs = [s.step_hi for s in self.sums.values()]
        for i in range(0, len(self.raw), 500):
            part = self.raw[i : i + 500]
            got = self.tx.one(
                f"SELECT MIN(step_lo), MAX(step_hi) FROM chunks WHERE id IN ({marks(len(part))})",
                part,
            )
            if got is not None and got[0] is not None:
                lows.append(int(got[0]))
                highs.append(int(got[1]))
        for sid in self.sids:
            p = self.pending.points(sid, self.metric) if self.pending else None
            if p is not None and len(p):
                lows.append(int(p.step.min()))
                highs.append(int(p.step.max()))
        return (min(lows), max(highs)) if lows else (None, None)

    def cells(self, lay: Layout, rows: int) -> np.ndarray:
        """rows x k means of each row's finite values per bucket."""
        size = rows * lay.k
        total, count = np.zeros(size), np.zeros(size)
        blocks = self._sums_parts(lay)
        points = self._point_parts(lay)
        for at, sums, counts in (blocks, points):  # one bincount each, not one a chunk
            if at:
                where = np.concatenate(at)
                total += np.bincount(where, np.concatenate(sums), size)
                count += (
                    np.bincount(where, np.concatenate(counts), size)
                    if counts
                    else np.bincount(where, minlength=size)
                )
        with np.errstate(invalid="ignore", divide="ignore"):
            out = np.where(count > 0, total / np.maximum(count, 1), np.nan)
        return out.reshape(rows, lay.k)

    def _sums_parts(self, lay: Layout) -> _Parts:
        """The usable rows' blocks: (bucket + row offset, sums, counts) arrays."""
        out: _Parts = ([], [], [])
        # Ranks log the same steps: a row's blocks' buckets, computed once per shape.
        shapes: dict[tuple[int, int, int], tuple[np.ndarray, np.ndarray | None]] = {}
        for cid, s in self.sums.items():
            if (1 << s.wlog) > lay.quantum:  # blocks wider than the buckets allow
                self.raw.append(cid)
                continue
            sums, counts = decode(s.blob)
            shape = (s.b0, s.wlog, sums.shape[0])
            got = shapes.get(shape)
            if got is None:
                col = lay.cols((s.b0 + np.arange(sums.shape[0], dtype=np.int64)) << s.wlog)
                inside = (col >= 0) & (col < lay.k)
                got = shapes[shape] = (col, None if inside.all() else inside)
            col, keep = got
            if keep is not None:
                col, sums, counts = col[keep], sums[keep], counts[keep]
            out[0].append(col + self.row_of[s.stream] * lay.k)
            out[1].append(sums)
            out[2].append(counts.astype(np.float64))
        return out

    def _point_parts(self, lay: Layout) -> _Parts:
        """The points of the other chunks and the pending ones: (bucket + row offset,
        values, []) arrays (each point counts one)."""
        out: _Parts = ([], [], [])
        even: dict[bytes, np.ndarray] = {}  # evenly spaced steps' buckets, once per shape
        raw = sorted(self.raw)
        for i in range(0, len(raw), 500):
            part = raw[i : i + 500]
            for sid, n, xs, ys, kind in self.tx.all(
                f"SELECT stream, n, {_STEPS}, ys, kind FROM chunks WHERE id IN "
                f"({marks(len(part))}) AND step_hi >= ? AND step_lo <= ?",
                [*part, lay.a0, min(I64_MAX, lay.end - 1)],
            ):
                n = int(n)
                key = bytes(xs) + n.to_bytes(8, "little") if len(xs) == 16 else b""
                col = even.get(key) if key else None
                if col is None:
                    col = lay.cols(unpack_ints(xs, n))
                    if key:
                        even[key] = col
                self._points(lay, int(sid), col, decode_y(n, ys, kind), out)
        if self.pending:
            for sid in self.sids:
                p = self.pending.points(sid, self.metric)
                if p is not None and len(p):
                    self._points(lay, sid, lay.cols(p.step), p.fvalue(), out)
        return out

    def _points(
        self, lay: Layout, sid: int, col: np.ndarray, value: np.ndarray, out: _Parts
    ) -> None:
        keep = np.isfinite(value) & (col >= 0) & (col < lay.k)
        if not keep.all():
            col, value = col[keep], value[keep]
        out[0].append(col + self.row_of[sid] * lay.k)
        out[1].append(value.astype(np.float64, copy=False))
