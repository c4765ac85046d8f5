"""Rich data in the store: media items, tables and histograms (migration 7 holds them).

Written by ``ingest.apply_streams`` inside the stream's data transaction, after the mark
check, so each record is applied exactly once like metrics: replays, two ingesters of
one stream and group commit double nothing (the rows are also keyed by (stream, seq[,
idx]), inserted ``ON CONFLICT DO NOTHING``, as a second guard).

* ``Media`` records: one ``media_items`` row per item (a gallery is several, ``idx`` in
  order); the kind's own fields (width, height, frames, fps, sample rate, duration and
  whatever a later record version adds) as a JSON object in ``meta``.
* ``TableRec``: one ``media_tables`` row naming the Parquet blob and its shape; the cells
  stay in the blob (the server pages it with DuckDB, ``rankwise.server.tables``).
* ``HistogramRec``: one ``histograms`` row, counts and edges as float64 little-endian
  bytes (compact, and the same bytes on SQLite and PostgreSQL).
* Every blob a record names gets a ``blob_kinds`` row (digest, run, kind, format): what
  the server serves it as (``blob_kind``), chosen from what it stored, never from the
  client. A table's own blob is ``table``/``parquet``; the images in its cells
  ``image``/``png``.

What a server refuses before anything is applied (kinds, formats, caps, digests) is
checked by ``rankwise.server.upload.check_rich``, for uploads and local files alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec
import numpy as np

from ..stream import records as R
from .tx import Tx

# The fields of an item stored in their own columns; the rest go into ``meta``.
_CORE = ("kind", "digest", "size", "format", "caption")

_json = msgspec.json.Encoder()


def _f64(values: Sequence[float]) -> bytes:
    return np.asarray(values, dtype="<f8").tobytes()


def floats(blob: bytes | memoryview) -> list[float]:
    return np.frombuffer(bytes(blob), dtype="<f8").tolist()  # type: ignore[no-any-return]


def _meta(item: Any) -> str:
    fields = msgspec.structs.asdict(item)
    return _json.encode(
        {k: v for k, v in fields.items() if k not in _CORE and v is not None}
    ).decode()


def apply(tx: Tx, stream: int, run: int, fresh: Sequence[R.AnyRecord]) -> None:
    """Store the rich records of ``fresh`` (records past the mark, in seq order)."""
    kinds = set(map(type, fresh))
    if not kinds & {R.Media, R.TableRec, R.HistogramRec}:
        return  # C-level: most batches have none
    items: list[tuple[Any, ...]] = []
    tables: list[tuple[Any, ...]] = []
    hists: list[tuple[Any, ...]] = []
    blobs: dict[str, tuple[str, str]] = {}
    for rec in fresh:
        if isinstance(rec, R.Media):
            for i, it in enumerate(rec.items):
                items.append(
                    (
                        stream,
                        rec.seq,
                        i,
                        run,
                        rec.step,
                        rec.time,
                        rec.key,
                        it.kind,
                        it.format,
                        it.digest,
                        it.size,
                        it.caption,
                        _meta(it),
                    )
                )
                blobs.setdefault(it.digest, (it.kind, it.format))
        elif isinstance(rec, R.TableRec):
            tables.append(
                (
                    stream,
                    rec.seq,
                    run,
                    rec.step,
                    rec.key,
                    rec.digest,
                    rec.size,
                    rec.nrows,
                    rec.ncols,
                    _json.encode(rec.columns).decode(),
                    _json.encode(rec.types).decode(),
                )
            )
            blobs.setdefault(rec.digest, ("table", "parquet"))
            for d in rec.blobs:
                blobs.setdefault(d, ("image", "png"))
        elif isinstance(rec, R.HistogramRec):
            hists.append(
                (
                    stream,
                    rec.seq,
                    run,
                    rec.step,
                    rec.key,
                    len(rec.counts),
                    rec.nan,
                    rec.posinf,
                    rec.neginf,
                    _f64(rec.counts),
                    _f64(rec.edges),
                )
            )
    if items:
        tx.many(
            "INSERT INTO media_items (stream, seq, idx, run, step, time, key, kind, format, "
            "digest, size, caption, meta) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT DO NOTHING",
            items,
        )
    if tables:
        tx.many(
            "INSERT INTO media_tables (stream, seq, run, step, key, digest, size, nrows, ncols, "
            "columns, types) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            tables,
        )
    if hists:
        tx.many(
            "INSERT INTO histograms (stream, seq, run, step, key, bins, nan, posinf, neginf, "
            "counts, edges) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            hists,
        )
    if blobs:
        # Sorted: two ingesters of one run insert the same keys in one order (no deadlock).
        tx.many(
            "INSERT INTO blob_kinds (digest, run, kind, format) VALUES (?, ?, ?, ?) "
            "ON CONFLICT DO NOTHING",
            [(d, run, k, f) for d, (k, f) in sorted(blobs.items())],
        )
