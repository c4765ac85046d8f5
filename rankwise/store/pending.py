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

from collections.abc import Sequence
from typing import Any

import msgspec
import numpy as np
import numpy.typing as npt

from .chunks import _DTYPE, F8, Points
from .tx import Tx, insert_rows

# A block: groups of series logged by the same records (a training loop logs the same
# dict every step, so one group usually holds every metric of the upload), each
# [seq, step, time, weight | None, [[series id, agg, kind, value], ...]].
_Series = tuple[int, bool, str, bytes]
_Group = tuple[bytes, bytes, bytes, bytes | None, list[_Series]]
_enc = msgspec.msgpack.Encoder()
_dec = msgspec.msgpack.Decoder(list[_Group])


def encode_block(metrics: dict[int, Points], health: dict[int, Points]) -> bytes:
    """One upload's points: ``metrics`` aggregate across ranks, ``health`` does not."""
    groups: dict[tuple[bytes, bytes, bytes, bytes | None], list[_Series]] = {}
    # Series cut from the same records share their seq/step/time/weight arrays
    # (``ingest.extract``): encode those once.
    seen: dict[tuple[int, int, int, int], tuple[bytes, bytes, bytes, bytes | None]] = {}
    for agg, part in ((True, metrics), (False, health)):
        for sid, p in part.items():
            ids = (id(p.seq), id(p.step), id(p.time), id(p.weight))
            key = seen.get(ids)
            if key is None:
                w = p.weight
                key = seen[ids] = (
                    p.seq.astype(np.int64, copy=False).tobytes(),
                    p.step.astype(np.int64, copy=False).tobytes(),
                    p.time.astype(np.float64, copy=False).tobytes(),
                    None if np.isnan(w).all() else w.astype(np.float64, copy=False).tobytes(),
                )
            value = p.value.astype(_DTYPE[p.kind], copy=False).tobytes()
            groups.setdefault(key, []).append((sid, agg, p.kind, value))
    return _enc.encode([(*key, entries) for key, entries in groups.items()])


# One series' part of one upload: kind, seq, step, time, value, weight (raw bytes).
Part = tuple[str, bytes, bytes, bytes, bytes, bytes | None]


def block_groups(blob: bytes) -> list[_Group]:
    """A block as stored: its groups, each ``[seq, step, time, weight | None,
    [[series id, aggregated, kind, value], ...]]`` (columns as raw bytes)."""
    return _dec.decode(blob)


def block_parts(blob: bytes) -> list[tuple[int, bool, Part]]:
    """The series of one block, undecoded: (series id, aggregated, part)."""
    out = []
    for seq, step, time, weight, entries in _dec.decode(blob):
        for sid, agg, kind, value in entries:
            out.append((sid, agg, (kind, seq, step, time, value, weight)))
    return out


_Axes = tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float64], F8]


def join_parts(parts: list[Part], shared: dict[tuple[int, ...], _Axes] | None = None) -> Points:
    """One series' parts (of consecutive uploads, in order) as one ``Points``: each column
    joined as bytes and read once. ``shared``: the seq, step, time and weight columns
    already joined for other series of the same records (one compaction's cache)."""
    kinds = {p[0] for p in parts}
    kind = kinds.pop() if len(kinds) == 1 else "f"
    key = tuple(id(p[1]) for p in parts)
    axes = shared.get(key) if shared is not None else None
    if axes is None:
        axes = _axes(parts)
        if shared is not None:
            shared[key] = axes
    seq, step, time, weight = axes
    value: npt.NDArray[Any]
    if len(parts) == 1 or all(p[0] == kind for p in parts):
        value = np.frombuffer(b"".join([p[4] for p in parts]), _DTYPE[kind])
    else:  # ints then floats (or bools): the series turns float, as one upload does
        value = np.concatenate(
            [np.frombuffer(p[4], _DTYPE[p[0]]).astype(np.float64) for p in parts]
        )
    return Points(seq, step, time, value, weight, kind)


def _axes(parts: list[Part]) -> _Axes:
    seq = np.frombuffer(b"".join([p[1] for p in parts]), np.int64)
    step = np.frombuffer(b"".join([p[2] for p in parts]), np.int64)
    time = np.frombuffer(b"".join([p[3] for p in parts]), np.float64)
    if all(p[5] is None for p in parts):
        weight = np.full(len(seq), np.nan)
    elif all(p[5] is not None for p in parts):
        weight = np.frombuffer(b"".join([p[5] or b"" for p in parts]), np.float64)
    else:
        weight = np.concatenate(
            [
                np.full(len(p[1]) // 8, np.nan) if p[5] is None else np.frombuffer(p[5])
                for p in parts
            ]
        )
    return seq, step, time, weight


def decode_block(blob: bytes) -> list[tuple[int, bool, Points]]:
    """The series of one block: (series id, aggregated, points)."""
    return [(sid, agg, join_parts([part])) for sid, agg, part in block_parts(blob)]


def block_row(
    run: int,
    stream: int,
    seqs: tuple[int, int],
    metrics: dict[int, Points],
    health: dict[int, Points],
) -> tuple[int, int, int, int, bytes]:
    """One upload's ``upload_blocks`` row, for ``store_blocks``."""
    return (run, stream, seqs[0], seqs[1], encode_block(metrics, health))


def store_blocks(tx: Tx, rows: Sequence[tuple[int, int, int, int, bytes]]) -> None:
    """Insert uploads' rows (within the transaction that moves their streams' marks): a
    stream's rows in seq order, as its uploads came."""
    head = "INSERT INTO upload_blocks (run, stream, seq_lo, seq_hi, data) VALUES"
    insert_rows(tx, head, 5, rows)
