"""The rank x step heatmap of one metric (``GET .../heatmap``), mixed into ``SQLStore``.

One read, bounded by what it returns: the caller asks for at most ``MAX_ROWS`` ranks
(a page of the run's stream labels, ``offset``/``limit``) and ``MAX_BUCKETS`` buckets.
Each cell is the exact mean of the finite values the rank logged in its bucket.

* On the step axis the buckets are whole steps wide and aligned so that the closed
  chunks' stored block sums fall inside them: the cells add those sums and counts, and
  the points of the other chunks and of the uploads not yet compacted
  (``rankwise.store.heatmap_steps``, ``rankwise.store.step_sums``).
* On the time axis ``buckets`` equal spans of the range, from the stored chunks' points
  (fetched in one query per 500 streams, decoded once each; ``rankwise.store.chunks``)
  and the pending ones. The chunks' M4 summaries cannot give a mean.

Per bucket, the median across the page's rows, and its robust spread (1.4826 x the
median absolute deviation, floored at a millionth of the median's size so that ranks
logging the same value do not divide by zero); per row, ``score`` is the mean over its
buckets of ``|value - median| / spread``: about 0.8 for a rank in the crowd, tens for a
straggler, a drifting loss or a hot GPU's temperature.
"""

from __future__ import annotations

import base64
import math
import warnings

import msgspec
import numpy as np

from ..errors import UsageError
from ..stream import records as R
from ..wire.charts import XAxis
from ..wire.heatmap import HeatmapReply, HeatmapRow
from .chunks import decode_xy
from .heatmap_steps import I64_MAX, I64_MIN, StepReader, layout
from .pending_view import EMPTY, PendingView
from .sqlbase import SQLBase
from .tx import Tx, marks

MAX_ROWS = 1024
MAX_BUCKETS = 2000
_start_dec = msgspec.msgpack.Decoder(R.StreamStart)
_AXES = ("step", "time")


def check_heatmap(x: str, buckets: int, offset: int, limit: int) -> None:
    if x not in _AXES:
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
            metric = None if mrow is None else int(mrow[0])
            if x == "step":
                a, b, k, cells = self._step_cells(tx, page, metric, lo, hi, buckets, pending)
            else:
                a, b, k, cells = self._time_cells(tx, page, metric, lo, hi, buckets, pending)
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

    def _step_cells(
        self,
        tx: Tx,
        page: list[_Row],
        metric: int | None,
        lo: float | None,
        hi: float | None,
        buckets: int,
        pending: PendingView,
    ) -> tuple[float, float, int, np.ndarray]:
        """(lo, hi, buckets, cells) on the step axis (``rankwise.store.heatmap_steps``)."""
        row_of = {sid: i for i, r in enumerate(page) for sid in r.sids}
        reader = StepReader(tx, row_of, metric, pending) if metric is not None and row_of else None
        a, b = lo, hi
        if reader is not None:
            margin = 0
            if a is not None and b is not None:
                _order(a, b)
                margin = 4 * -(-(math.floor(b) - math.ceil(a) + 1) // buckets) + 4
            reader.gather(a, b, margin)
            if a is None or b is None:
                first, last = reader.bounds()
                a = first if a is None else a
                b = last if b is None else b
        a = 0.0 if a is None else float(a)
        b = a if b is None else float(b)
        _order(a, b)
        # Steps are int64: a range past its ends is clamped to them.
        first_step = min(max(math.ceil(a), I64_MIN), I64_MAX)
        last_step = min(max(math.floor(b), I64_MIN), I64_MAX)
        lay = layout(first_step, max(first_step, last_step), buckets)
        if reader is None:
            return lay.a0, lay.end, lay.k, np.full((len(page), lay.k), np.nan)
        return lay.a0, lay.end, lay.k, reader.cells(lay, len(page))

    def _time_cells(
        self,
        tx: Tx,
        page: list[_Row],
        metric: int | None,
        lo: float | None,
        hi: float | None,
        buckets: int,
        pending: PendingView,
    ) -> tuple[float, float, int, np.ndarray]:
        """(lo, hi, buckets, cells) on the time axis: ``buckets`` equal spans of
        ``[lo, hi]``, from the points."""
        sids = [s for r in page for s in r.sids]
        a, b = lo, hi
        if metric is not None and sids and (a is None or b is None):
            first, last = self._bounds(tx, sids, metric, pending)
            if first is not None and last is not None:
                a = first if a is None else a
                b = last if b is None else b
        a = 0.0 if a is None else float(a)
        b = a if b is None else float(b)
        _order(a, b)
        cells = np.full((len(page), buckets), np.nan)
        if metric is not None and sids:
            cells = self._cells(tx, page, metric, a, b, buckets, pending)
        return a, b, buckets, cells

    def _bounds(
        self, tx: Tx, sids: list[int], metric: int, pending: PendingView = EMPTY
    ) -> tuple[float | None, float | None]:
        """The times the streams logged the metric over (None, None: nothing)."""
        lo_v: float | None = None
        hi_v: float | None = None
        late, _ = pending.xs(sids, metric, "time")
        if late.shape[0]:
            lo_v, hi_v = float(late.min()), float(late.max())
        for i in range(0, len(sids), 500):
            part = sids[i : i + 500]
            got = tx.one(
                f"SELECT MIN(t_lo), MAX(t_hi) FROM chunks WHERE stream IN ({marks(len(part))}) "
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
        a: float,
        b: float,
        k: int,
        pending: PendingView = EMPTY,
    ) -> np.ndarray:
        """rows x k means of each row's finite values per time bucket of ``[a, b]`` (the
        pending points too)."""
        row_of = {sid: i for i, r in enumerate(page) for sid in r.sids}
        sids = list(row_of)
        total = np.zeros(len(page) * k)
        count = np.zeros(len(page) * k)
        scale = k / (b - a) if b > a else 0.0

        def columns(xv: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            """Each point's bucket, and which points are in [a, b]."""
            col = np.clip(np.floor((xv - a) * scale).astype(np.intp), 0, k - 1)
            return col, (xv >= a) & (xv <= b)

        for i in range(0, len(sids), 500):
            part = sids[i : i + 500]
            got = tx.all(
                f"SELECT stream, n, xs, ys, kind FROM chunks WHERE stream IN "
                f"({marks(len(part))}) AND metric = ? AND t_hi >= ? AND t_lo <= ?",
                [*part, metric, a, b],
            )
            at_parts: list[np.ndarray] = []
            ys_parts: list[np.ndarray] = []
            for sid, n, xs, ys, kind in got:
                _step, time, value = decode_xy(int(n), xs, ys, kind)
                col, keep = columns(time)
                keep &= np.isfinite(value)
                at_parts.append(col[keep] + row_of[int(sid)] * k)
                ys_parts.append(value[keep])
            for sid in part if pending else ():
                xv, value = pending.xs([sid], metric, "time")
                if xv.shape[0]:
                    col, keep = columns(xv)
                    keep &= np.isfinite(value)
                    at_parts.append(col[keep] + row_of[sid] * k)
                    ys_parts.append(value[keep])
            if at_parts:  # one bincount over the batch's points, not one per chunk
                at = np.concatenate(at_parts)
                total += np.bincount(at, np.concatenate(ys_parts), len(total))
                count += np.bincount(at, minlength=len(total))
        with np.errstate(invalid="ignore", divide="ignore"):
            cells = np.where(count > 0, total / np.maximum(count, 1), np.nan)
        return cells.reshape(len(page), k)


def _order(a: float, b: float) -> None:
    if b < a:
        raise UsageError(f"from={a} is above to={b}: pass from <= to")
