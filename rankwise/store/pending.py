"""Uploads stored as they arrive: one ``upload_blocks`` row per (stream, upload).

The ingest transaction no longer appends to each of an upload's ~50 series: it cuts the
upload's points into per-series columns (``ingest.extract``, the step-progress and
system series of ``health.apply``) and stores them all as one row, in the transaction
that moves the stream's mark. The compactor (``rankwise.store.compact``) later folds the
rows into the series' chunks and the run's aggregate blocks, and deletes them in the same
transaction, so every point is folded exactly once however the process dies.

A block is msgpack of one entry per series, ``[id, agg, kind, seq, step, time, value,
weight]``: the raw little-endian bytes of each numpy column (``weight`` None when no
point carried one) and ``agg`` whether the series is a logged metric (merged into the
run's cross-rank aggregates) or a health series (step progress, system samples).
Encoding is a handful of ``tobytes`` calls per series: far cheaper than the chunk
encoding (summaries, sub-blocks) that compaction does once for many uploads.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec
import numpy as np

from .chunks import _DTYPE, Points
from .tx import Tx, marks

_Entry = tuple[int, bool, str, bytes, bytes, bytes, bytes, bytes | None]
_enc = msgspec.msgpack.Encoder()
_dec = msgspec.msgpack.Decoder(list[_Entry])


def encode_block(metrics: dict[int, Points], health: dict[int, Points]) -> bytes:
    """One upload's points: ``metrics`` aggregate across ranks, ``health`` does not."""
    out: list[_Entry] = []
    for agg, group in ((True, metrics), (False, health)):
        for sid, p in group.items():
            w = p.weight
            out.append(
                (
                    sid,
                    agg,
                    p.kind,
                    p.seq.astype(np.int64, copy=False).tobytes(),
                    p.step.astype(np.int64, copy=False).tobytes(),
                    p.time.astype(np.float64, copy=False).tobytes(),
                    p.value.astype(_DTYPE[p.kind], copy=False).tobytes(),
                    None if np.isnan(w).all() else w.astype(np.float64, copy=False).tobytes(),
                )
            )
    return _enc.encode(out)


def decode_block(blob: bytes) -> list[tuple[int, bool, Points]]:
    """The series of one block: (series id, aggregated, points)."""
    out = []
    for sid, agg, kind, seq, step, time, value, weight in _dec.decode(blob):
        s = np.frombuffer(seq, np.int64)
        w = np.full(len(s), np.nan) if weight is None else np.frombuffer(weight, np.float64)
        pts = Points(
            s,
            np.frombuffer(step, np.int64),
            np.frombuffer(time, np.float64),
            np.frombuffer(value, _DTYPE[kind]),
            w,
            kind,
        )
        out.append((int(sid), bool(agg), pts))
    return out


def store_block(
    tx: Tx,
    run: int,
    stream: int,
    seqs: tuple[int, int],
    metrics: dict[int, Points],
    health: dict[int, Points],
) -> None:
    """Insert one upload's row (within the transaction that moves the stream's mark)."""
    tx.run(
        "INSERT INTO upload_blocks (run, stream, seq_lo, seq_hi, data) VALUES (?, ?, ?, ?, ?)",
        (run, stream, seqs[0], seqs[1], encode_block(metrics, health)),
    )


def pending_runs(tx: Tx, runs: Iterable[int] | None = None) -> bool:
    """Whether any upload (of ``runs``, default any run) waits to be compacted."""
    if runs is None:
        return tx.one("SELECT 1 FROM upload_blocks LIMIT 1") is not None
    wanted = sorted(set(runs))
    if not wanted:
        return False
    sql = f"SELECT 1 FROM upload_blocks WHERE run IN ({marks(len(wanted))}) LIMIT 1"
    return tx.one(sql, wanted) is not None
