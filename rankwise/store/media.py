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

``check_records`` is what a server refuses before anything is applied (the ingest
route turns its ``RichRecordError`` into 413/422).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import msgspec
import numpy as np

from ..stream import records as R
from .tx import Tx

# Item kinds and formats a media row may hold; anything else is refused at upload.
MEDIA_KINDS = frozenset({"image", "audio", "video", "html", "text"})
FORMATS = frozenset({"png", "jpeg", "gif", "mp4", "wav", "html", "txt"})
COLUMN_TYPES = frozenset({"str", "int", "float", "bool", "image", "list", "null"})
MAX_GALLERY = 10_000  # items of one logged value
MAX_BINS = 4096  # the SDK makes at most 512; inline rows stay small
MAX_TABLE_COLUMNS = 10_000
MAX_TABLE_CELLS = 100_000_000  # rows x columns of one table (ServerSettings may lower it)
# Bytes (UTF-8) of a rich key: it is in the (run, key, step) btree indexes, whose entries
# PostgreSQL caps at 2,704 bytes; 1,024 characters of 4-byte characters would not fit.
MAX_KEY = 1024
_DIGEST = re.compile(r"[0-9a-f]{64}")
# The fields of an item stored in their own columns; the rest go into ``meta``.
_CORE = ("kind", "digest", "size", "format", "caption")

_json = msgspec.json.Encoder()


class RichRecordError(ValueError):
    """A rich record a server refuses: ``status`` is 413 (over a limit) or 422."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _digest(d: object) -> None:
    if not isinstance(d, str) or not _DIGEST.fullmatch(d):
        raise RichRecordError(422, "a blob digest is not 64 lowercase hex characters (sha256)")


def _key(key: str) -> None:
    if not key or len(key) > MAX_KEY or "\x00" in key or _utf8_len(key) > MAX_KEY:
        raise RichRecordError(
            422, f"a media key is empty, holds NUL or is over {MAX_KEY} bytes (UTF-8)"
        )


def _utf8_len(key: str) -> int:
    return len(key) if key.isascii() else len(key.encode("utf-8", "surrogatepass"))


def check_records(records: Sequence[R.AnyRecord], max_table_cells: int = MAX_TABLE_CELLS) -> None:
    """Raise ``RichRecordError`` for a rich record the server does not store: a table
    over ``max_table_cells`` (rows x columns) or ``MAX_TABLE_COLUMNS`` (413), a gallery
    or histogram past its cap (413), an unknown kind, format or column type, a malformed
    digest, or edges that do not fit the counts (422)."""
    for rec in records:
        cls = type(rec)
        if cls is R.Media:
            assert isinstance(rec, R.Media)
            _key(rec.key)
            if len(rec.items) > MAX_GALLERY:
                raise RichRecordError(
                    413, f"media {rec.key!r} has {len(rec.items)} items, over {MAX_GALLERY}"
                )
            for it in rec.items:
                _digest(it.digest)
                if it.kind not in MEDIA_KINDS or it.format not in FORMATS:
                    raise RichRecordError(
                        422, f"media {rec.key!r}: unknown kind/format {it.kind!r}/{it.format!r}"
                    )
        elif cls is R.TableRec:
            assert isinstance(rec, R.TableRec)
            _key(rec.key)
            _digest(rec.digest)
            for d in rec.blobs:
                _digest(d)
            if rec.ncols > MAX_TABLE_COLUMNS or rec.nrows * rec.ncols > max_table_cells:
                raise RichRecordError(
                    413,
                    f"table {rec.key!r} is {rec.nrows} rows x {rec.ncols} columns, over this "
                    f"server's limit ({max_table_cells} cells, {MAX_TABLE_COLUMNS} columns): "
                    "log fewer rows or columns, or split it into several keys",
                )
            if len(rec.columns) != rec.ncols or len(rec.types) != rec.ncols:
                raise RichRecordError(422, f"table {rec.key!r}: columns/types do not match ncols")
            if not set(rec.types) <= COLUMN_TYPES:
                raise RichRecordError(422, f"table {rec.key!r}: unknown column type")
        elif cls is R.HistogramRec:
            assert isinstance(rec, R.HistogramRec)
            _key(rec.key)
            if len(rec.counts) > MAX_BINS:
                raise RichRecordError(
                    413, f"histogram {rec.key!r} has {len(rec.counts)} bins, over {MAX_BINS}"
                )
            if len(rec.edges) != len(rec.counts) + 1:
                raise RichRecordError(
                    422, f"histogram {rec.key!r}: edges must be one more than counts"
                )


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
