"""The write side shared by both stores: one stream's new records into one transaction.

``apply_stream`` runs inside a transaction that holds the stream's row lock (PostgreSQL
``SELECT ... FOR UPDATE``; SQLite ``BEGIN IMMEDIATE`` on its single writer). Within it:

1. read the stream's mark and folded state;
2. keep the records that continue the mark without a gap (``contiguous``);
3. fold them (``rankwise.stream.fold.StreamFold``, the local reader's rules), cut their
   metric values into per-metric numpy columns, and append those as chunks;
4. merge their per-step aggregates into the run's aggregate blocks, locking blocks in
   (metric, block) order so that ingesters of different ranks never deadlock;
5. move the mark.

Data, aggregates and mark commit together or not at all, so a batch is applied exactly
once however often it is sent and by however many ingesters: a second ingester of the
same stream waits for the row lock and then finds the mark already past its records.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol

import msgspec
import numpy as np

from ..stream import records as R
from ..stream.fold import StreamFold
from .aggregate import Agg
from .chunks import MERGE_BELOW, Points, decode, encode, split

BLOCK = 1024  # steps per stored aggregate block

_enc = msgspec.msgpack.Encoder()
_fold_dec = msgspec.msgpack.Decoder(StreamFold)


class Tx(Protocol):
    """The few cursor operations the shared store code needs (``?`` placeholders)."""

    for_update: str  # " FOR UPDATE" where rows can be locked, else ""

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...

    def one(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None: ...

    def run(self, sql: str, params: Sequence[Any] = ()) -> int: ...

    def many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None: ...


def encode_fold(fold: StreamFold) -> bytes:
    return _enc.encode(fold)


def decode_fold(blob: bytes | None) -> StreamFold:
    return StreamFold() if blob is None else _fold_dec.decode(blob)


def contiguous(records: Iterable[R.AnyRecord], mark: int) -> list[R.AnyRecord]:
    """The records that continue ``mark`` without a gap, in seq order, each once.

    Records at or below the mark are already applied; a record after a gap is refused
    (the caller sees the mark stop short and resends from it).
    """
    fresh = [r for r in records if r.seq > mark]
    if any(fresh[i].seq >= fresh[i + 1].seq for i in range(len(fresh) - 1)):
        fresh.sort(key=lambda r: r.seq)
    out: list[R.AnyRecord] = []
    want = mark + 1
    for rec in fresh:
        if rec.seq < want:
            continue  # a repeat within the batch
        if rec.seq != want:
            break
        out.append(rec)
        want += 1
    return out


def metric_names(records: Iterable[R.AnyRecord]) -> set[str]:
    names: set[str] = set()
    for r in records:
        if type(r) is R.Metrics:
            names.update(r.values)
    return names


def _kind(values: list[Any]) -> str:
    types = set(map(type, values))
    if types == {bool}:
        return "b"
    if types == {int}:
        return "i"
    return "f"


def _floats(values: list[Any]) -> np.ndarray[Any, np.dtype[np.float64]]:
    try:
        return np.array(values, np.float64)
    except OverflowError:  # an int beyond float range: chart it as ±inf
        return np.array(
            [v if abs(v) < 1e308 else np.copysign(np.inf, v) for v in values], np.float64
        )


def extract(records: Sequence[R.AnyRecord]) -> dict[str, Points]:
    """Per metric name, the points of the ``Metrics`` records, in seq order."""
    mets = [r for r in records if type(r) is R.Metrics]
    if not mets:
        return {}
    keys: list[str] = []
    vals: list[Any] = []
    counts: list[int] = []
    for r in mets:
        v = r.values
        keys.extend(v)
        vals.extend(v.values())
        counts.append(len(v))
    m = len(mets)
    cnt = np.array(counts, np.intp)
    seq = np.repeat(np.fromiter((r.seq for r in mets), np.int64, m), cnt)
    step = np.repeat(np.fromiter((r.step for r in mets), np.int64, m), cnt)
    time = np.repeat(np.fromiter((r.time for r in mets), np.float64, m), cnt)
    weight = np.repeat(
        np.fromiter((np.nan if r.weight is None else r.weight for r in mets), np.float64, m),
        cnt,
    )
    value = _floats(vals)
    all_float = set(map(type, vals)) == {float}
    names = list(dict.fromkeys(keys))
    out: dict[str, Points] = {}
    if len(names) == 1:
        groups = [(names[0], np.arange(len(keys)))]
    else:
        index = {k: i for i, k in enumerate(names)}
        kid = np.fromiter(map(index.__getitem__, keys), np.intp, len(keys))
        order = np.argsort(kid, kind="stable")
        bounds = np.flatnonzero(np.diff(kid[order])) + 1
        groups = list(zip(names, np.split(order, bounds)))  # kid i is names[i]
    for name, idx in groups:
        kind, v = "f", value[idx]
        if not all_float:
            raw = [vals[i] for i in idx.tolist()]
            kind = _kind(raw)
            if kind == "i":
                try:
                    v = np.array(raw, np.int64)
                except OverflowError:
                    kind = "f"
            elif kind == "b":
                v = np.array(raw, np.bool_)
        out[name] = Points(seq[idx], step[idx], time[idx], v, weight[idx], kind)
    return out


def apply_stream(
    tx: Tx, stream: int, run: int, records: Sequence[R.AnyRecord], metric_ids: dict[str, int]
) -> int:
    """Apply the records newer than the stream's mark; returns the new mark."""
    row = tx.one(f"SELECT acked_seq, fold FROM streams WHERE id = ?{tx.for_update}", (stream,))
    if row is None:
        raise LookupError(f"stream row {stream} vanished; was the database reset?")
    mark = int(row[0])
    fresh = contiguous(records, mark)
    if not fresh:
        return mark
    fold = decode_fold(row[1])
    fold.apply(fresh)
    points = extract(fresh)
    for name in sorted(points, key=metric_ids.__getitem__):
        _append_series(tx, stream, metric_ids[name], points[name])
    _merge_aggregates(tx, run, {metric_ids[k]: p for k, p in points.items()})
    start = fold.start
    if start is not None and start.config:
        start = msgspec.structs.replace(start, config={})  # listing never needs it
    new_mark = fresh[-1].seq
    tx.run(
        "UPDATE streams SET acked_seq = ?, start = ?, finish = ?, first_time = ?, "
        "last_time = ?, last_step = ?, points = ?, dropped = ?, fold = ? WHERE id = ?",
        (
            new_mark,
            None if start is None else _enc.encode(start),
            None if fold.finish is None else _enc.encode(fold.finish),
            fold.first_time,
            fold.last_time,
            fold.last_step,
            fold.points,
            fold.dropped,
            encode_fold(fold),
            stream,
        ),
    )
    return new_mark


_CHUNK_COLS = "n, step_lo, step_hi, t_lo, t_hi, kind, xs, ys, seqs, weights, head, subs"


def _append_series(tx: Tx, stream: int, metric: int, pts: Points) -> None:
    row = tx.one(
        "SELECT points, open_chunk FROM series WHERE stream = ? AND metric = ?", (stream, metric)
    )
    total = len(pts) + (int(row[0]) if row else 0)
    open_id = row[1] if row else None
    if open_id is not None:
        old = tx.one("SELECT n, kind, xs, ys, seqs, weights FROM chunks WHERE id = ?", (open_id,))
        if old is not None:
            pts = Points.concat([decode(int(old[0]), *old[1:]), pts])
        else:
            open_id = None
    last_id = open_id
    pieces = split(pts)
    for i, piece in enumerate(pieces):
        c = encode(piece)
        cols = (c.n, c.step_lo, c.step_hi, c.t_lo, c.t_hi, c.kind, c.xs, c.ys, c.seqs,
                c.weights, c.head, c.subs)  # fmt: skip
        if i == 0 and open_id is not None:
            tx.run(
                "UPDATE chunks SET n = ?, step_lo = ?, step_hi = ?, t_lo = ?, t_hi = ?, "
                "kind = ?, xs = ?, ys = ?, seqs = ?, weights = ?, head = ?, subs = ? "
                "WHERE id = ?",
                (*cols, open_id),
            )
        else:
            got = tx.one(
                f"INSERT INTO chunks (stream, metric, {_CHUNK_COLS}) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (stream, metric, *cols),
            )
            assert got is not None
            last_id = got[0]
    new_open = last_id if len(pieces[-1]) < MERGE_BELOW else None
    if row is None:
        tx.run(
            "INSERT INTO series (stream, metric, points, open_chunk) VALUES (?, ?, ?, ?)",
            (stream, metric, total, new_open),
        )
    else:
        tx.run(
            "UPDATE series SET points = ?, open_chunk = ? WHERE stream = ? AND metric = ?",
            (total, new_open, stream, metric),
        )


def _merge_aggregates(tx: Tx, run: int, points: dict[int, Points]) -> None:
    parts: list[tuple[int, int, Agg, float, float]] = []
    for metric, p in points.items():
        block = p.step // BLOCK
        if block.shape[0] > 1 and not (block[1:] >= block[:-1]).all():
            order = np.argsort(block, kind="stable")
            p = Points(p.seq[order], p.step[order], p.time[order], p.value[order],
                       p.weight[order], p.kind)  # fmt: skip
            block = block[order]
        cuts = np.flatnonzero(np.diff(block)) + 1
        for a, b in zip(np.r_[0, cuts].tolist(), np.r_[cuts, len(p)].tolist()):
            agg = Agg.from_points(p.step[a:b], p.fvalue()[a:b], p.weight[a:b], p.time[a:b])
            t = p.time[a:b]
            parts.append((metric, int(block[a]), agg, float(t.min()), float(t.max())))
    parts.sort(key=lambda t: (t[0], t[1]))  # one lock order for every ingester
    for metric, block_no, agg, t_lo, t_hi in parts:
        key = (run, metric, block_no)
        for _attempt in range(2):
            row = tx.one(
                "SELECT data, t_lo, t_hi FROM aggs WHERE run = ? AND metric = ? AND block = ?"
                + tx.for_update,
                key,
            )
            if row is not None:
                merged = Agg.from_bytes(row[0]).merge(agg)
                tx.run(
                    "UPDATE aggs SET data = ?, t_lo = ?, t_hi = ? "
                    "WHERE run = ? AND metric = ? AND block = ?",
                    (merged.to_bytes(), min(t_lo, row[1]), max(t_hi, row[2]), *key),
                )
                break
            # A concurrent first insert of this block makes ours a no-op: lock and merge.
            if tx.run(
                "INSERT INTO aggs (run, metric, block, t_lo, t_hi, data) "
                "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (*key, t_lo, t_hi, agg.to_bytes()),
            ):
                break
        else:
            raise RuntimeError(f"aggregate block {key} could be neither read nor inserted")
