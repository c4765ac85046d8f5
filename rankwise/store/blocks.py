"""Stored aggregate blocks: a run's per-step aggregates, ``BLOCK`` steps to a row.

``merge_blocks`` folds a batch's points into the ``aggs`` rows of its run, inside the
ingest transaction that also moves the streams' marks (so each point is merged once).

Invariants:

* A constant number of numpy calls per batch, whatever the number of metrics: points
  are keyed by (metric, step) as one int64 and reduced, merged into the stored blocks
  they touch (``Agg.merge``: a binary search, no sort), and cut back into blocks.
* Rows are locked in (metric, block) order (``SELECT ... ORDER BY ... FOR UPDATE``), then
  missing blocks are inserted in the same order; ingesters of different ranks of one run
  may wait for each other but never deadlock. A block that another ingester inserted
  first (``ON CONFLICT DO NOTHING`` changed nothing) is locked and merged into instead.
* ``t_lo``/``t_hi`` are the least and greatest ``tmin`` of the block's steps (their x
  when x = time), so that a query by time reads only the blocks that can hold its range.
* NaN and ±Inf points are merged too, as counts per step (``rankwise.store.aggregate``):
  a step whose every value was NaN is stored, with ``n == 0``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .aggregate import I8, Agg, point_cols, reduce
from .chunks import Points
from .tx import Tx, marks

BLOCK = 1024  # steps per stored aggregate block


def _cuts(a: I8) -> I8:
    """Starts of the runs of equal values of ``a``."""
    flag = np.empty(a.shape[0], np.bool_)
    flag[:1] = True
    np.not_equal(a[1:], a[:-1], out=flag[1:])
    return np.flatnonzero(flag)


def _where(p: Points, mask: np.ndarray) -> Points:
    return Points(p.seq[mask], p.step[mask], p.time[mask], p.value[mask], p.weight[mask], p.kind)


def merge_blocks(tx: Tx, run: int, per_metric: dict[int, list[Points]]) -> None:
    mids = sorted(per_metric)
    parts = [(rank, p) for rank, mid in enumerate(mids) for p in per_metric[mid]]
    step = np.concatenate([p.step for _, p in parts])
    value = np.concatenate([p.fvalue() for _, p in parts])
    weight = np.concatenate([p.weight for _, p in parts])
    time = np.concatenate([p.time for _, p in parts])
    rank = np.concatenate([np.full(len(p), r, np.int64) for r, p in parts])
    if step.shape[0] == 0:
        return
    block = step // BLOCK
    b0, b1 = int(block.min()), int(block.max())
    nb = b1 - b0 + 1
    base = b0 * BLOCK
    stride = nb * BLOCK
    if stride * len(mids) >= 2**62:  # one batch spanning absurd step ranges: go per metric
        if len(mids) > 1:
            for mid in mids:
                merge_blocks(tx, run, {mid: per_metric[mid]})
        else:  # one metric whose steps span most of int64: its lower half, then its upper
            cut = (int(step.min()) + int(step.max())) // 2
            for keep in (np.less_equal, np.greater):
                half = [_where(p, keep(p.step, cut)) for _, p in parts]
                merge_blocks(tx, run, {mids[0]: [p for p in half if len(p)]})
        return
    touched = set(np.flatnonzero(np.bincount(rank * nb + (block - b0))).tolist())
    delta = reduce(rank * stride + (step - base), point_cols(value, weight, time))
    keys, cols, found = [], [], set()
    for mid, blk, data in _lock_existing(tx, run, mids, b0, b1):
        k = mids.index(mid) * nb + (blk - b0)
        if k in touched:
            old = Agg.from_bytes(data, blk * BLOCK)
            keys.append(mids.index(mid) * stride + (old.step - base))
            cols.append(old.cols)
            found.add(k)
    # Stored blocks come in (metric, block) order: joined, they are sorted and distinct.
    stored = Agg(np.concatenate(keys), np.concatenate(cols, 1)) if keys else Agg.empty()
    merged = stored.merge(delta, inplace=True)
    m_rank = merged.step // stride
    m_step = merged.step % stride + base
    m_key = m_rank * nb + (m_step // BLOCK - b0)
    spans = _spans(m_key)
    starts = np.array([a for a, _ in spans], np.intp)
    t_lo = np.minimum.reduceat(merged.col("tmin"), starts).tolist()
    t_hi = np.maximum.reduceat(merged.col("tmin"), starts).tolist()
    updates: list[tuple[Any, ...]] = []
    fresh: list[tuple[int, int, Agg]] = []
    for i, (a, b) in enumerate(spans):
        k = int(m_key[a])
        mid = mids[int(m_rank[a])]
        blk = int(m_step[a]) // BLOCK
        part = Agg(m_step[a:b], merged.cols[:, a:b])
        if k in found:
            updates.append((part.to_bytes(blk * BLOCK), t_lo[i], t_hi[i], run, mid, blk))
        else:  # nothing stored: ``part`` is this batch's own points
            fresh.append((mid, blk, part))
    _insert_or_merge(tx, run, fresh)
    if updates:
        tx.many(
            "UPDATE aggs SET data = ?, t_lo = ?, t_hi = ? WHERE run = ? AND metric = ? "
            "AND block = ?",
            updates,
        )


def _spans(key: I8) -> list[tuple[int, int]]:
    starts = _cuts(key).tolist()
    return list(zip(starts, [*starts[1:], int(key.shape[0])]))


def _lock_existing(
    tx: Tx, run: int, mids: list[int], b0: int, b1: int
) -> list[tuple[int, int, bytes]]:
    out = []
    for a in range(0, len(mids), 500):
        part = mids[a : a + 500]
        out += [
            (int(m), int(b), d)
            for m, b, d in tx.all(
                "SELECT metric, block, data FROM aggs WHERE run = ? "
                f"AND metric IN ({marks(len(part))}) AND block BETWEEN ? AND ? "
                f"ORDER BY metric, block{tx.for_update}",
                [run, *part, b0, b1],
            )
        ]
    return out


def _insert_or_merge(tx: Tx, run: int, fresh: list[tuple[int, int, Agg]]) -> None:
    """Insert new blocks (in one pipelined go); merge into any another ingester inserted
    first."""
    rows = []
    for mid, blk, own in fresh:
        tmin = own.col("tmin")
        rows.append(
            (run, mid, blk, float(tmin.min()), float(tmin.max()), own.to_bytes(blk * BLOCK))
        )
    got = tx.many_returning(
        "INSERT INTO aggs (run, metric, block, t_lo, t_hi, data) VALUES (?, ?, ?, ?, ?, ?) "
        "ON CONFLICT DO NOTHING RETURNING block",
        rows,
    )
    for (mid, blk, own), inserted in zip(fresh, got):
        if inserted is None:
            _merge_into(tx, (run, mid, blk), own)


def _merge_into(tx: Tx, key: tuple[int, int, int], own: Agg) -> None:
    blk = key[2]
    row = tx.one(
        f"SELECT data FROM aggs WHERE run = ? AND metric = ? AND block = ?{tx.for_update}", key
    )
    if row is None:
        raise RuntimeError(f"aggregate block {key} could be neither inserted nor read")
    merged = Agg.from_bytes(row[0], blk * BLOCK).merge(own)
    tx.run(
        "UPDATE aggs SET data = ?, t_lo = ?, t_hi = ? WHERE run = ? AND metric = ? AND block = ?",
        (
            merged.to_bytes(blk * BLOCK),
            float(merged.col("tmin").min()),
            float(merged.col("tmin").max()),
            *key,
        ),
    )
