"""The rank x step heatmap of one metric (``GET .../heatmap``), mixed into ``SQLStore``.

One read, bounded by what it returns: the caller asks for at most ``MAX_ROWS`` ranks
(a page of the run's stream labels, ``offset``/``limit``) and ``MAX_BUCKETS`` buckets.
The x range is cut into equal buckets and each cell is the exact mean of the finite
values the rank logged in it, from the stored chunks of the page's streams (fetched in
one query per 500 streams, decoded once each; ``rankwise.store.chunks``). The chunks'
M4 summaries cannot give a mean, and at a few thousand steps per bucket the chunks are
read whole anyway.

Per bucket, the median across the page's rows, and its robust spread (1.4826 x the
median absolute deviation, floored at a millionth of the median's size so that ranks
logging the same value do not divide by zero); per row, ``score`` is the mean over its
buckets of ``|value - median| / spread``: about 0.8 for a rank in the crowd, tens for a
straggler, a drifting loss or a hot GPU's temperature.
"""

from __future__ import annotations

import base64
import warnings
from typing import NamedTuple

import msgspec
import numpy as np

from ..errors import UsageError
from ..stream import records as R
from ..wire.charts import XAxis
from ..wire.heatmap import HeatmapReply, HeatmapRow
from .chunks import decode_xy, decode_y, unpack_ints
from .pending_view import EMPTY, PendingView
from .sqlbase import SQLBase
from .tx import Tx, marks

MAX_ROWS = 1024
MAX_BUCKETS = 2000
_start_dec = msgspec.msgpack.Decoder(R.StreamStart)
_RANGE = {"step": " AND step_hi >= ? AND step_lo <= ?", "time": " AND t_hi >= ? AND t_lo <= ?"}
# The x column a heatmap reads: on the step axis the steps part of ``xs`` alone (the
# times, 8 bytes a point, stay in the database; ``chunks.decode_xy`` lays ``xs`` out).
_XS = {"step": "substr(xs, 1, CAST(length(xs) - 8 * n AS INTEGER))", "time": "xs"}
_BOUNDS = {"step": "MIN(step_lo), MAX(step_hi)", "time": "MIN(t_lo), MAX(t_hi)"}


def check_heatmap(x: str, buckets: int, offset: int, limit: int) -> None:
    if x not in _RANGE:
        raise UsageError(f"x={x!r} is not an axis: use 'step' or 'time'")
    if not 1 <= buckets <= MAX_BUCKETS:
        raise UsageError(f"buckets={buckets}: ask for 1 to {MAX_BUCKETS}")
    if not 1 <= limit <= MAX_ROWS:
        raise UsageError(f"limit={limit}: ask for 1 to {MAX_ROWS} ranks a page (offset pages)")
    if offset < 0:
        raise UsageError(f"offset={offset} must be 0 or more")


class _Row:
    __slots__ = ("host", "label", "local_rank", "node", "rank", "sids")

    def __init__(self, label: str) -> None:
        self.label, self.sids = label, list[int]()
        self.rank, self.node, self.local_rank, self.host = -1, -1, -1, ""


def bucket_stats(cells: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per column of ``cells`` (rows x buckets, NaN: empty): the median across rows, and
    each row's score (see the module docstring; NaN where undefined)."""
    if not cells.shape[0]:
        return np.full(cells.shape[1], np.nan), np.zeros(0)
    # np.median where no cell is empty: nanmedian goes column by column in Python.
    median = np.nanmedian if np.isnan(cells).any() else np.median
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns and rows
        med = median(cells, axis=0)
        dev = np.abs(cells - med)
        spread = 1.4826 * median(dev, axis=0)
        spread = np.fmax(spread, 1e-6 * np.abs(med))
        spread = np.where(spread > 0, spread, 1e-300)
        score = np.nanmean(dev / spread, axis=1)
    return med, score


class _Cols(NamedTuple):
    """A chunk's points' buckets (``col``), which are inside the range (None: all), and,
    when the buckets come in runs (sorted, all inside), where each run starts, its bucket
    and its length (each bucket once, so the cells can be added to by index)."""

    col: np.ndarray
    inside: np.ndarray | None
    runs: tuple[np.ndarray, np.ndarray, np.ndarray] | None  # starts, buckets, lengths


def _is_sorted(a: np.ndarray) -> bool:
    return bool(a.shape[0] < 2 or (a[1:] >= a[:-1]).all())


class HeatmapReads(SQLBase):
    """``heatmap``: see the module docstring."""

    def _heatmap_rows(self, tx: Tx, project: str, run_id: str) -> list[_Row] | None:
        got = tx.all(
            "SELECT s.id, s.label, s.incarnation, s.start FROM streams s "
            "JOIN runs r ON r.id = s.run "
            "WHERE r.project = ? AND r.run_id = ? AND s.acked_seq >= 0 "
            "ORDER BY s.label, s.incarnation",
            (project, run_id),
        )
        if not got:
            known = tx.one("SELECT 1 FROM runs WHERE project = ? AND run_id = ?", (project, run_id))
            return None if known is None else []
        rows: dict[str, _Row] = {}
        for sid, label, _inc, start in got:
            row = rows.setdefault(label, _Row(label))
            row.sids.append(int(sid))
            if start:  # the latest incarnation's identity wins (rows are in incarnation order)
                st = _start_dec.decode(start)
                row.rank, row.node, row.local_rank, row.host = (
                    st.rank,
                    st.node_rank,
                    st.local_rank,
                    st.host,
                )
        return sorted(rows.values(), key=lambda r: (r.rank < 0, r.rank, r.label))

    def heatmap(
        self,
        project: str,
        run_id: str,
        key: str,
        *,
        x: XAxis = "step",
        lo: float | None = None,
        hi: float | None = None,
        buckets: int = 500,
        offset: int = 0,
        limit: int = MAX_ROWS,
    ) -> HeatmapReply | None:
        """One page of the heatmap's rows; None for an unknown run."""
        check_heatmap(x, buckets, offset, limit)

        def read(tx: Tx, pending: PendingView) -> HeatmapReply | None:
            every = self._heatmap_rows(tx, project, run_id)
            if every is None:
                return None
            page = every[offset : offset + limit]
            mrow = tx.one("SELECT id FROM metrics WHERE name = ?", (key,))
            sids = [s for r in page for s in r.sids]
            a, b = lo, hi
            if mrow is not None and sids and (a is None or b is None):
                first, last = self._bounds(tx, sids, int(mrow[0]), x, pending)
                if first is not None and last is not None:
                    a = first if a is None else a
                    b = last if b is None else b
            a = 0.0 if a is None else float(a)
            b = a if b is None else float(b)
            if b < a:
                raise UsageError(f"from={a} is above to={b}: pass from <= to")
            k = buckets
            if x == "step":  # no bucket narrower than a step
                k = max(1, min(buckets, int(np.floor(b) - np.ceil(a)) + 1))
            cells = np.full((len(page), k), np.nan)
            if mrow is not None and sids:
                cells = self._cells(tx, page, int(mrow[0]), x, a, b, k, pending)
            med, score = bucket_stats(cells)
            rows = [
                HeatmapRow(
                    label=r.label,
                    rank=r.rank,
                    node=r.node,
                    local_rank=r.local_rank,
                    host=r.host,
                    score=None if np.isnan(s) else round(float(s), 4),
                )
                for r, s in zip(page, score)
            ]
            return HeatmapReply(
                key=key, x=x, lo=a, hi=b, buckets=k, total_rows=len(every), offset=offset,
                rows=rows,
                values=base64.b64encode(cells.astype("<f4").tobytes()).decode("ascii"),
                median=[None if np.isnan(v) else float(v) for v in med],
            )  # fmt: skip

        return self._read_merged(project, run_id, read)

    def _bounds(
        self, tx: Tx, sids: list[int], metric: int, x: XAxis, pending: PendingView = EMPTY
    ) -> tuple[float | None, float | None]:
        """The x range the streams logged the metric over (None, None: nothing)."""
        lo_v: float | None = None
        hi_v: float | None = None
        late, _ = pending.xs(sids, metric, x)
        if late.shape[0]:
            lo_v, hi_v = float(late.min()), float(late.max())
        for i in range(0, len(sids), 500):
            part = sids[i : i + 500]
            got = tx.one(
                f"SELECT {_BOUNDS[x]} FROM chunks WHERE stream IN ({marks(len(part))}) "
                "AND metric = ?",
                [*part, metric],
            )
            if got is not None and got[0] is not None:
                lo_v = float(got[0]) if lo_v is None else min(lo_v, float(got[0]))
                hi_v = float(got[1]) if hi_v is None else max(hi_v, float(got[1]))
        return lo_v, hi_v

    def _cells(
        self,
        tx: Tx,
        page: list[_Row],
        metric: int,
        x: XAxis,
        a: float,
        b: float,
        k: int,
        pending: PendingView = EMPTY,
    ) -> np.ndarray:
        """rows x k means of each row's finite values per bucket of ``[a, b]`` (the
        pending points too)."""
        row_of = {sid: i for i, r in enumerate(page) for sid in r.sids}
        sids = list(row_of)
        total = np.zeros(len(page) * k)
        count = np.zeros(len(page) * k)
        scale = k / (b - a) if b > a else 0.0

        def columns(xv: np.ndarray) -> _Cols:
            """Each point's bucket, and which points are in [a, b] (None: all)."""
            inside = None if xv[0] >= a and xv[-1] <= b else (xv >= a) & (xv <= b)
            col = np.floor((xv - a) * scale).astype(np.intp)
            np.clip(col, 0, k - 1, out=col)
            if inside is not None or not _is_sorted(col):
                return _Cols(col, inside, None)
            starts = np.flatnonzero(np.r_[True, col[1:] != col[:-1]])
            sizes = np.diff(np.r_[starts, col.shape[0]])
            return _Cols(col, None, (starts, col[starts], sizes.astype(np.float64)))

        # Ranks log the same steps: an evenly spaced chunk's buckets, computed once.
        even: dict[bytes, _Cols] = {}
        for i in range(0, len(sids), 500):
            part = sids[i : i + 500]
            got = tx.all(
                f"SELECT stream, n, {_XS[x]}, ys, kind FROM chunks WHERE stream IN "
                f"({marks(len(part))}) AND metric = ?{_RANGE[x]}",
                [*part, metric, *((int(np.floor(a)), int(np.ceil(b))) if x == "step" else (a, b))],
            )
            at_parts: list[np.ndarray] = []
            ys_parts: list[np.ndarray] = []
            for sid, n, xs, ys, kind in got:
                n = int(n)
                if x == "step":  # only the steps were read (16 bytes when evenly spaced)
                    key = bytes(xs) + n.to_bytes(8, "little") if len(xs) == 16 else b""
                    got_cols = even.get(key) if key else None
                    if got_cols is None:
                        got_cols = columns(unpack_ints(xs, n).astype(np.float64))
                        if key:
                            even[key] = got_cols
                    value = decode_y(n, ys, kind)
                else:
                    _step, time, value = decode_xy(n, xs, ys, kind)
                    got_cols = columns(time)
                base = row_of[int(sid)] * k
                keep = np.isfinite(value)
                if got_cols.runs is not None and keep.all():
                    # Buckets are runs of points: a sum per run, straight into the cells.
                    starts, cols, lengths = got_cols.runs
                    total[cols + base] += np.add.reduceat(value, starts)
                    count[cols + base] += lengths
                    continue
                col = got_cols.col
                if got_cols.inside is not None:
                    keep &= got_cols.inside
                if not keep.all():
                    col, value = col[keep], value[keep]
                at_parts.append(col + base)
                ys_parts.append(value)
            for sid in part if pending else ():
                xv, value = pending.xs([sid], metric, x)
                keep = np.isfinite(value) & (xv >= a) & (xv <= b)
                if keep.any():
                    col = np.clip(np.floor((xv[keep] - a) * scale).astype(np.intp), 0, k - 1)
                    at_parts.append(col + row_of[sid] * k)
                    ys_parts.append(value[keep])
            if at_parts:  # one bincount over the batch's points, not one per chunk
                at = np.concatenate(at_parts)
                total += np.bincount(at, np.concatenate(ys_parts), len(total))
                count += np.bincount(at, minlength=len(total))
        with np.errstate(invalid="ignore", divide="ignore"):
            cells = np.where(count > 0, total / np.maximum(count, 1), np.nan)
        return cells.reshape(len(page), k)
