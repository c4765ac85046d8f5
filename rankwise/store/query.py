"""Chart-sized reads shared by both stores: series, band and history over stored chunks.

A series query costs what it returns, not what the series holds. For a range holding
``N`` points and a chart of ``max_points`` points (``max_points // 4`` buckets) it picks
the coarsest unit of which the range holds at least ``max_points // 2``, so that a bucket
spans two units or more (``choose_level``):

* a whole chunk (up to ``CHUNK`` points), from its ``head`` summary;
* a mid-block of ``MID`` points, from the first part of the chunk's ``subs`` summary;
* a sub-block of ``SUB`` points, from the rest of it;
* a single point, decoding the chunk's columns.

Tiers are 8 or 64 times apart, so the chosen one holds fewer than ``32 * max_points``
representative points whatever ``N`` is (at the chunk tier the per-chunk metadata rows,
``N / CHUNK`` of them, are still read). M4 (``downsample.extremes``) then runs over the
units' representative points, grouping each unit by the bucket of its first x: every
bucket is a union of whole units, so its first, last, minimum and maximum are exact.
Chunks cut by the range's ends are always decoded, so nothing outside ``[lo, hi]`` leaks
in. When the range holds no more than ``max_points`` points, they are all returned,
undownsampled.

The band reads the run's aggregate blocks over the range (``rankwise.store.blocks``) and
keeps, per bucket of ``max_points // 8``, the first and last step and the steps holding
the extremes of ``min``, ``max``, ``mean``, ``wmean`` and ``sum`` (any of them may be a
metric's line, ``rankwise.metric_defs``), and of the NaN, +Inf and -Inf
counts (and a step with no finite value, if any): each point's counts are its step's own,
and no bucket holding a non-finite value is drawn without one that says so.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ..wire.charts import Band, Series, XAxis
from ..wire.runs import CrossRankValue
from .aggregate import Agg
from .blocks import BLOCK
from .chunks import AXIS_ROLES, MID, SUB, UNIT_BYTES, decode, decode_xy, units
from .downsample import F8, bucket_of, extremes, m4
from .pending_view import EMPTY, PendingView
from .tx import Tx, marks

_AXIS_COL = {"step": 0, "time": 1}
_RANGE = {
    "step": " AND step_hi >= ? AND step_lo <= ?",
    "time": " AND t_hi >= ? AND t_lo <= ?",
}
_BIG = 2.0**62


def _where(
    streams: Sequence[int], x: XAxis, lo: float | None, hi: float | None
) -> tuple[str, list[Any]]:
    sql = f"stream IN ({marks(len(streams))}) AND metric = ?"
    if lo is None and hi is None:
        return sql, []
    a = -_BIG if lo is None else lo
    b = _BIG if hi is None else hi
    if x == "step":  # integer columns compare with integers, in both databases
        a, b = int(np.floor(a)), int(np.ceil(b))
    return sql + _RANGE[x], [a, b]


def metric_names(tx: Tx, ids: Iterable[int]) -> dict[int, str]:
    """Metric id -> name of ``ids`` (the known ones), 500 ids a query."""
    wanted = sorted(set(ids))
    out: dict[int, str] = {}
    for a in range(0, len(wanted), 500):
        part = wanted[a : a + 500]
        rows = tx.all(f"SELECT id, name FROM metrics WHERE id IN ({marks(len(part))})", part)
        out.update((int(i), str(n)) for i, n in rows)
    return out


def series_of(
    tx: Tx,
    label: str,
    streams: Sequence[int],
    metric: int,
    x: XAxis,
    lo: float | None,
    hi: float | None,
    max_points: int,
    pending: PendingView = EMPTY,
) -> Series:
    """One label's series (all its incarnations), downsampled to ``max_points``; the
    points not yet compacted (``pending``) count as single-point units."""
    where, extra = _where(streams, x, lo, hi)
    params = [*streams, metric, *extra]
    meta = tx.all(
        f"SELECT id, n, step_lo, step_hi, t_lo, t_hi, head FROM chunks WHERE {where} ORDER BY id",
        params,
    )
    lo_f = -np.inf if lo is None else float(lo)
    hi_f = np.inf if hi is None else float(hi)
    late_x, late_y = pending.xs(list(streams), metric, x)
    if late_x.shape[0] and (lo is not None or hi is not None):
        keep = (late_x >= lo_f) & (late_x <= hi_f)
        late_x, late_y = late_x[keep], late_y[keep]
    if not meta and not late_x.shape[0]:
        return Series(label, [], [])
    xi = _AXIS_COL[x]
    inside: list[tuple[Any, ...]] = []
    partial: list[tuple[Any, ...]] = []
    for row in meta:
        x_lo, x_hi = (row[2], row[3]) if x == "step" else (row[4], row[5])
        (inside if lo_f <= x_lo and x_hi <= hi_f else partial).append(row)
    n_inside: int = sum(int(r[1]) for r in inside)
    n_total: int = n_inside + sum(int(r[1]) for r in partial) + late_x.shape[0]
    level = choose_level(n_total, n_inside, len(inside), max_points)
    if level == "raw":
        partial, inside = meta, []
    xs_parts: list[F8] = []
    ys_parts: list[F8] = []
    ux_parts: list[F8] = []
    if partial:
        ids = [int(r[0]) for r in partial]
        px, py = _raw(tx, ids, x, lo_f, hi_f)
        xs_parts.append(px)
        ys_parts.append(py)
        ux_parts.append(px)
    if inside:
        if level == "head":
            reps = units([r[6] for r in inside])
        else:
            wanted = {int(r[0]) for r in inside}
            rows = tx.all(
                f"SELECT id, {_TIER_SQL[level]} FROM chunks WHERE {where} ORDER BY id", params
            )
            reps = units([r[1] for r in rows if int(r[0]) in wanted])
        roles = AXIS_ROLES[x]
        pts = reps[:, roles, :]
        xs_parts.append(pts[:, :, xi].ravel())
        ys_parts.append(pts[:, :, 2].ravel())
        ux_parts.append(np.repeat(reps[:, roles[0], xi], len(roles)))
    if late_x.shape[0]:
        xs_parts.append(late_x)
        ys_parts.append(late_y)
        ux_parts.append(late_x)
    xv = np.concatenate(xs_parts)
    yv = np.concatenate(ys_parts)
    if level == "raw":
        idx = m4(xv, yv, max_points, lo, hi)
        return Series(label, xv[idx].tolist(), yv[idx].tolist(), len(idx) < len(xv))
    k = max(1, max_points // 4)
    idx = extremes(xv, bucket_of(np.concatenate(ux_parts), k, lo, hi), [yv], [yv])
    xv, yv = xv[idx], yv[idx]
    # A unit's first point is often its minimum too: show each point once.
    keep = np.r_[True, (xv[1:] != xv[:-1]) | (yv[1:] != yv[:-1])]
    return Series(label, xv[keep].tolist(), yv[keep].tolist(), True)


# A tier of the ``subs`` blob: its first mid_count(n) units, or the units after them.
_MIDS = f"CAST((n + {MID - 1}) / {MID} * {UNIT_BYTES} AS INTEGER)"
_TIER_SQL = {
    "mid": f"substr(subs, 1, {_MIDS})",
    "sub": f"substr(subs, {_MIDS} + 1)",
}


def choose_level(n_total: int, n_inside: int, chunks_inside: int, max_points: int) -> str:
    """The tier a series query reads (see the module docstring)."""
    if n_total <= max_points:
        return "raw"
    need = max(1, max_points // 2)
    if chunks_inside >= need:
        return "head"
    if n_inside // MID >= need:
        return "mid"
    if n_inside // SUB >= need:
        return "sub"
    return "raw"


def _raw(tx: Tx, ids: list[int], x: XAxis, lo: float, hi: float) -> tuple[F8, F8]:
    xs_parts, ys_parts = [], []
    for a in range(0, len(ids), 500):
        part = ids[a : a + 500]
        rows = tx.all(
            f"SELECT n, xs, ys, kind FROM chunks WHERE id IN ({marks(len(part))}) ORDER BY id",
            part,
        )
        for n, xs, ys, kind in rows:
            step, time, value = decode_xy(int(n), xs, ys, kind)
            xv = step.astype(np.float64) if x == "step" else time
            xs_parts.append(xv)
            ys_parts.append(value)
    xv = np.concatenate(xs_parts) if xs_parts else np.zeros(0)
    yv = np.concatenate(ys_parts) if ys_parts else np.zeros(0)
    if lo > -np.inf or hi < np.inf:
        keep = (xv >= lo) & (xv <= hi)
        xv, yv = xv[keep], yv[keep]
    return xv, yv


def band_of(
    tx: Tx,
    run: int,
    metric: int,
    x: XAxis,
    lo: float | None,
    hi: float | None,
    max_points: int,
    pending: Agg | None = None,
) -> Band:
    """The cross-rank aggregate per step; downsampled keeping each bucket's first, last
    and the extremes of ``min``, ``max``, ``mean`` and ``wmean``. ``pending``: the
    aggregate of the run's points not yet compacted, merged in."""
    sql = "SELECT block, data FROM aggs WHERE run = ? AND metric = ?"
    params: list[Any] = [run, metric]
    conds: list[str] = []
    if x == "step":
        if lo is not None:
            conds.append("block >= ?")
            params.append(int(np.floor(lo)) // BLOCK)
        if hi is not None:
            conds.append("block <= ?")
            params.append(int(np.ceil(hi)) // BLOCK)
    else:
        if lo is not None:
            conds.append("t_hi >= ?")
            params.append(float(lo))
        if hi is not None:
            conds.append("t_lo <= ?")
            params.append(float(hi))
        if conds and pending is not None and len(pending):
            # A step's time is its earliest point's: the blocks the pending points
            # touch are read whatever their stored times, merged, then filtered.
            touched = sorted(set((pending.step // BLOCK).tolist()))
            conds = [f"(({' AND '.join(conds)}) OR block IN ({marks(len(touched))}))"]
            params += touched
    if conds:
        sql += " AND " + " AND ".join(conds)
    rows = tx.all(sql + " ORDER BY block", params)
    agg = Agg.concat([Agg.from_bytes(data, int(block) * BLOCK) for block, data in rows])
    if pending is not None and len(pending):
        agg = agg.merge(pending)
    if x == "step":
        agg = agg.between(
            None if lo is None else int(np.ceil(lo)), None if hi is None else int(np.floor(hi))
        )
        xv = agg.step.astype(np.float64)
    else:
        xv = agg.time()
        keep = np.ones(len(agg), bool)
        if lo is not None:
            keep &= xv >= lo
        if hi is not None:
            keep &= xv <= hi
        if not keep.all():
            agg = Agg(agg.step[keep], agg.cols[:, keep])
            xv = xv[keep]
    n = agg.col("n")
    mean, wmean = agg.shown(agg.mean()), agg.shown(agg.wmean())
    mn, mx = agg.shown(agg.col("min")), agg.shown(agg.col("max"))
    total = agg.shown(agg.col("sum"))
    nan, pos, neg = agg.col("nan"), agg.col("posinf"), agg.col("neginf")
    if len(agg) <= max_points:
        idx = np.argsort(xv, kind="stable")
    else:
        k = max(1, max_points // 8)
        # A bucket keeps a step with the most NaN, +Inf and -Inf values each, and one with
        # no finite value at all, so that downsampling never hides a non-finite value.
        # A column of zeros picks nothing the bucket's first point does not: a run with no
        # NaN or ±Inf (the common case) pays for none of these.
        blank = ((n == 0) & (nan + pos + neg > 0)).astype(np.float64)
        counts = [c for c in (nan, pos, neg, blank) if c.any()]
        idx = extremes(
            xv,
            bucket_of(xv, k, lo, hi),
            [mn, mean, wmean, total],
            [mx, mean, wmean, total, *counts],
        )
    return Band(
        x=xv[idx].tolist(),
        n=n[idx].astype(np.int64).tolist(),
        mean=mean[idx].tolist(),
        wmean=wmean[idx].tolist(),
        min=mn[idx].tolist(),
        max=mx[idx].tolist(),
        std=np.where(n == 0, np.nan, agg.std())[idx].tolist(),
        downsampled=len(idx) < len(agg),
        step=agg.step[idx].tolist(),
        nw=agg.col("nw")[idx].astype(np.int64).tolist(),
        nan=nan[idx].astype(np.int64).tolist(),
        posinf=pos[idx].astype(np.int64).tolist(),
        neginf=neg[idx].astype(np.int64).tolist(),
        sum=total[idx].tolist(),
    )


def last_complete_of(
    tx: Tx, run: int, upto: int | None, pending: PendingView = EMPTY
) -> dict[int, CrossRankValue]:
    """Per metric id, the cross-rank aggregate at its last step ``<= upto`` (any step
    when None), as ``rankwise.read.summary`` folds it from files (a step of NaN alone says
    NaN). Reads one stored block per metric (two where the newest one holds only later
    steps), never the whole run; the points not yet compacted (``pending``) merged in."""
    cap = "" if upto is None else " AND b.block <= ?"
    params: list[Any] = [run] + ([] if upto is None else [upto // BLOCK])
    rows = tx.all(
        "SELECT a.metric, a.block, a.data FROM aggs a WHERE a.run = ? AND a.block = "
        f"(SELECT MAX(b.block) FROM aggs b WHERE b.run = a.run AND b.metric = a.metric{cap})",
        params,
    )
    return _cross_values(_with_pending(_last_aggs(tx, run, upto, rows), pending, upto))


def last_complete_of_runs(
    tx: Tx, uptos: dict[int, int | None], pending: dict[int, PendingView] | None = None
) -> dict[int, dict[int, CrossRankValue]]:
    """``last_complete_of`` of many runs (run id -> its ``upto``): one query for the
    newest block of each metric of each run, one for their data; a run with a newest
    block past its ``upto`` is read alone. ``pending``: the runs' points not yet
    compacted, per run that has some."""
    pending = pending or {}
    out: dict[int, dict[int, CrossRankValue]] = {run: {} for run in uptos}
    ids = list(uptos)
    found: dict[int, list[tuple[Any, Any, Any]]] = {}
    alone: set[int] = set()
    newest: list[tuple[int, int, int]] = []
    for a in range(0, len(ids), 500):
        part = ids[a : a + 500]
        newest += tx.all(
            "SELECT run, metric, MAX(block) FROM aggs "
            f"WHERE run IN ({', '.join('?' * len(part))}) GROUP BY run, metric",
            part,
        )
    for a in range(0, len(newest), 300):  # then their data, by key
        keys = newest[a : a + 300]
        rows = tx.all(
            "SELECT run, metric, block, data FROM aggs WHERE (run, metric, block) IN "
            f"({', '.join(['(?, ?, ?)'] * len(keys))})",
            [x for key in keys for x in key],
        )
        for run, metric, block, data in rows:
            upto = uptos[int(run)]
            if upto is not None and int(block) > upto // BLOCK:
                alone.add(int(run))
            found.setdefault(int(run), []).append((metric, block, data))
    for run in uptos:
        view = pending.get(run, EMPTY)
        if run in alone:
            out[run] = last_complete_of(tx, run, uptos[run], view)
        elif run in found or view:
            last = _last_aggs(tx, run, uptos[run], found.get(run, []))
            out[run] = _cross_values(_with_pending(last, view, uptos[run]))
    return out


def _last_aggs(
    tx: Tx, run: int, upto: int | None, rows: Sequence[tuple[Any, Any, Any]]
) -> dict[int, Agg]:
    """Per metric, its last stored step ``<= upto`` (a one-step ``Agg``), from the
    (metric, block, data) of each metric's newest block up to ``upto``."""
    out: dict[int, Agg] = {}
    for metric, block, data in rows:
        agg = Agg.from_bytes(data, int(block) * BLOCK).between(None, upto)
        if not len(agg) and int(block) > 0:
            prev = tx.all(
                "SELECT block, data FROM aggs WHERE run = ? AND metric = ? AND block < ? "
                "ORDER BY block DESC LIMIT 1",
                [run, metric, block],
            )
            if prev:
                agg = Agg.from_bytes(prev[0][1], int(prev[0][0]) * BLOCK).between(None, upto)
        if len(agg):
            out[int(metric)] = agg.between(int(agg.step[-1]), None)
    return out


def _with_pending(last: dict[int, Agg], pending: PendingView, upto: int | None) -> dict[int, Agg]:
    """``last`` with the pending points: a metric's last step is the later of its last
    stored and last pending step ``<= upto``; the same step in both merges."""
    for metric, mine in pending.lasts(upto).items():
        stored = last.get(metric)
        if stored is None or mine.step[0] > stored.step[0]:
            last[metric] = mine
        elif mine.step[0] == stored.step[0]:
            last[metric] = stored.merge(mine)
    return last


def _cross_values(last: dict[int, Agg]) -> dict[int, CrossRankValue]:
    out: dict[int, CrossRankValue] = {}
    for metric, agg in last.items():
        i = len(agg) - 1
        out[metric] = CrossRankValue(
            step=int(agg.step[i]),
            n=int(agg.col("n")[i]),
            mean=float(agg.shown(agg.mean())[i]),
            wmean=float(agg.shown(agg.wmean())[i]),
            min=float(agg.shown(agg.col("min"))[i]),
            max=float(agg.shown(agg.col("max"))[i]),
            sum=float(agg.shown(agg.col("sum"))[i]),
            nan=int(agg.col("nan")[i]),
            posinf=int(agg.col("posinf")[i]),
            neginf=int(agg.col("neginf")[i]),
        )
    return out


def history_of(
    tx: Tx,
    streams: dict[int, tuple[str, int]],
    metrics: dict[int, str],
    pending: PendingView = EMPTY,
) -> list[dict[str, Any]]:
    """One row per logged ``Metrics`` record holding any of ``metrics``, as
    ``rankwise.Api`` returns them: sorted by step, then time (then stream and seq); the
    points not yet compacted (``pending``) too."""
    if not streams or not metrics:
        return []
    rows: dict[tuple[int, int], dict[str, Any]] = {}
    sids = list(streams)
    mids = list(metrics)
    found = tx.all(
        f"SELECT stream, metric, n, kind, xs, ys, seqs, weights FROM chunks "
        f"WHERE stream IN ({marks(len(sids))}) AND metric IN ({marks(len(mids))}) "
        "ORDER BY id",
        [*sids, *mids],
    )
    got = [
        (sid, mid, decode(int(n), kind, xs, ys, seqs, weights), weights is not None)
        for sid, mid, n, kind, xs, ys, seqs, weights in found
    ]
    for sid in sids:  # then the points not yet compacted
        for mid in mids:
            p = pending.points(sid, mid)
            if p is not None:
                got.append((sid, mid, p, True))
    for sid, mid, p, has_w in got:
        name, label = metrics[mid], streams[sid][0]
        for seq, step, t, v, w in zip(
            p.seq.tolist(), p.step.tolist(), p.time.tolist(), p.value.tolist(),
            p.weight.tolist(),
        ):  # fmt: skip
            row = rows.get((sid, seq))
            if row is None:
                row = rows[(sid, seq)] = {"step": step, "time": t, "label": label}
                if has_w and w == w:
                    row["weight"] = w
            row[name] = v
    order = sorted(rows, key=lambda k: (rows[k]["step"], rows[k]["time"], streams[k[0]], k[1]))
    return [rows[k] for k in order]
