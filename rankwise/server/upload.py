"""Whether one upload of a stream is acceptable: the one set of checks, no HTTP.

The ingest route (``POST /api/v1/ingest``) and the local indexer behind ``rankwise ui``
(``server.indexer``) both ask ``check_upload``, so a server and a local directory accept
exactly the same records. A refusal is one exception, ``UploadRefused(status, message,
**extra)``: the route answers it with that status and ``extra`` in the error object; the
indexer warns once and indexes that file no further. Invariants:

* An upload is checked whole before anything is applied: one bad record refuses it all,
  so the sender resends it whole (or, locally, nothing half of it is indexed).
* The records of one upload are consecutive (``seq`` n, n+1, ...). An upload starting
  above ``mark + 1`` would leave a gap: refused with 409 and the mark (``acked_seq``).
  Marks only ever grow, so a check that passes before ``Store.ingest`` still holds when
  the store applies the batch.
* The checks, in order: the run is not deleted (410, ``check_not_deleted``); the frames
  decode to records of the schema (``decode_records``, the route only: the indexer reads
  files itself); consecutive seqs, and a stream start
  naming the stream the upload was posted as (the route only: a local file's place names
  it); each field inside its fixed set (``check_fields``); keys, console lines and JSON-
  like values inside their budgets (``check_sizes``, ``rankwise.budget``); media, tables
  and histograms inside their caps (``check_rich``); the run's distinct metric keys under
  ``Limits.max_keys_per_run`` (``server.run_keys``); then, for the records above the mark,
  every blob they name is stored (``check_blobs``) and every table's Parquet footer holds
  the rows its record declares (``check_tables``).
* Blobs first: a record naming a blob the blob store lacks is refused with 409 and
  ``missing_blobs``; the uploader PUTs them and resends. A digest declared lost
  (``Blobs.lost``: its uploader's file is gone) does not hold a record back. The indexer
  waits for none: a blob the run folders lack is lost (the SDK writes a blob before its
  record, so nobody will write it later).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO, Protocol

import msgspec

from .. import budget, names
from ..budget import MAX_KEYS_PER_RECORD, BudgetError
from ..store.base import Store
from ..store.ingest import StreamConflict, StreamGone, StreamKeyRefused
from ..stream import records as R
from ..stream.blobs import is_digest
from ..stream.frames import scan
from ..stream.identity import StreamId
from ..stream.wire import STREAM_KEY_HEADER
from .run_keys import MAX_KEYS_PER_RUN, run_keys


class Blobs(Protocol):
    """What the checks ask of a blob store (``store.blobs.BlobStore`` has it all)."""

    def missing(self, project: str, digests: Iterable[str]) -> list[str]: ...

    def lost(self, project: str, digests: Iterable[str]) -> set[str]: ...

    def open(self, project: str, digest: str) -> BinaryIO | None: ...


# These bound a request's memory and the rows one upload can add (the SDK cuts a wider
# log() call into records of at most ``MAX_KEYS_PER_RECORD`` keys).
MAX_KEYS_PER_UPLOAD = 100_000
# Console lines: the SDK writes at most 1,000 per record (``sdk.console``) and, counting
# each line in a frame's size, about 66,000 per frame; a line costs it at least 10 bytes
# (text and time), so a 4 MiB upload batch or the local reader's 8 MiB read holds under
# 900,000. Every line is a stored row: these bound the rows one request adds (bytes per
# stream: ``store.health``).
MAX_CONSOLE_LINES_PER_RECORD = 10_000
MAX_CONSOLE_LINES_PER_UPLOAD = 1_000_000
# Item kinds and formats a media row may hold, and a table's column types.
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
_logger = logging.getLogger("rankwise.server")


class UploadRefused(Exception):
    """An upload refused whole: ``status`` is its HTTP status (409, 410, 413, 415 or 422),
    ``extra`` what joins the error object (``acked_seq``, ``missing_blobs``)."""

    def __init__(self, status: int, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.extra = extra


@dataclass(frozen=True)
class Limits:
    """The caps a server's settings may lower (``ServerSettings``, the same names)."""

    max_keys_per_run: int = MAX_KEYS_PER_RUN
    max_table_cells: int = MAX_TABLE_CELLS


DEFAULT_LIMITS = Limits()


def check_body(
    store: Store,
    key: StreamId,
    data: bytes,
    limits: Limits,
    blobs: Blobs | None,
    state: tuple[str | None, int] | None = None,
) -> tuple[int, list[R.AnyRecord]]:
    """``check_upload`` of an upload's decoded body, posted as stream ``key``."""
    return check_upload(store, key, decode_records(data), limits, blobs, state=state)


def check_upload(
    store: Store,
    key: StreamId,
    records: list[R.AnyRecord],
    limits: Limits = DEFAULT_LIMITS,
    blobs: Blobs | None = None,
    *,
    posted: bool = True,
    state: tuple[str | None, int] | None = None,
) -> tuple[int, list[R.AnyRecord]]:
    """Check ``records`` of stream ``key`` whole (raising ``UploadRefused``); the
    stream's mark and the records above it, which the caller hands to the store (none:
    the mark is the answer). A resend that reaches back to the mark keeps the record at
    the mark: the store checks it is the one it applied (``StreamConflict``).
    ``posted``: ``key`` is what the upload was posted as, which its stream start must name
    (the indexer's key is the file's place, so a copied run folder is indexed where it is).
    ``state``: the stream's ``Store.upload_state``, when the caller read it already (a
    batch reads every part's in one transaction).
    """
    if not records:
        return store.acked(key), []
    # one read: both answers every upload needs
    gone, mark = store.upload_state(key) if state is None else state
    check_not_deleted(key, gone)
    first = records[0].seq
    for i, rec in enumerate(records):
        if rec.seq != first + i:
            raise UploadRefused(
                422,
                f"records of one upload must be consecutive: seq {rec.seq} follows {first + i - 1}",
            )
        if (
            posted
            and type(rec) is R.StreamStart
            and (
                (rec.project, rec.run_id, rec.label, rec.incarnation)
                != (key.project, key.run_id, key.label, key.incarnation)
            )
        ):
            raise UploadRefused(
                422,
                "the body's stream start names another stream than the project, run, label "
                "and incarnation it was posted as: post each stream under its own identity",
            )
    check_fields(records)
    keys = check_sizes(records)
    check_rich(records, limits.max_table_cells)
    cap = limits.max_keys_per_run
    if not run_keys(store).admit(store, key.project, key.run_id, keys, cap):
        raise UploadRefused(
            413,
            f"the run would hold more than {cap} distinct metric keys: log fewer keys, or "
            "start another run",
        )
    if first > mark + 1:
        mark = store.acked(key)  # the mark read above, unless it moved since
    if first > mark + 1:
        raise UploadRefused(
            409,
            f"upload starts at seq {first} but the server holds {key.label!r} only up to seq "
            f"{mark}: resend from seq {mark + 1}",
            acked_seq=mark,
        )
    fresh = records[mark - first :] if mark >= first else records
    if fresh:
        check_blobs(blobs, key.project, fresh)
        check_tables(blobs, key.project, fresh, limits.max_table_cells)
    return mark, fresh


def check_not_deleted(key: StreamId, gone: str | None) -> None:
    """410 Gone for an upload to a run deleted (in the trash) or purged (``gone``, the
    store's ``run_gone``): its records are not taken, neither into the trash nor as a new
    run of the same id."""
    if gone is None:
        return
    how = "deleted (it is in the trash)" if gone == "deleted" else "deleted for good (purged)"
    raise UploadRefused(
        410,
        f"run {key.run_id!r} of project {key.project!r} was {how}: this server takes no "
        "more of its records. Restore it (rankwise restore) to upload again, or log to a "
        "new run",
        deleted=True,
    )


def refusal_of(key: StreamId, exc: Exception) -> UploadRefused | None:
    """``exc`` as the refusal of an upload of ``key`` (None: another failure): an
    ``UploadRefused`` itself, or the store's own refusal of the records it was handed:
    the stream's config or summary over its budget as a whole (``BudgetError``), a
    stream bound to another secret (403, ``StreamKeyRefused``), or another record at the
    mark than this upload's (409, ``StreamConflict``)."""
    if isinstance(exc, UploadRefused):
        return exc
    if isinstance(exc, BudgetError):
        return UploadRefused(exc.status, str(exc))
    if isinstance(exc, StreamGone):
        return UploadRefused(
            410,
            f"run {key.run_id!r} of project {key.project!r} was deleted for good (purged): "
            "this server takes no more of its records; log to a new run",
            deleted=True,
        )
    if isinstance(exc, StreamKeyRefused):
        _logger.warning("ingest of %s refused: not the stream's secret", key)
        return UploadRefused(
            403,
            f"stream {key.label!r} is bound to the secret its stream start named, and "
            f"this upload {'presents another' if exc.presented else 'presents none'} "
            f"({STREAM_KEY_HEADER}): only the process that wrote the stream (its "
            "uploader, or rankwise sync with the stream's .key file beside it) may "
            "add to it; nothing of this upload was applied",
            stream_key=True,
            acked_seq=exc.mark,
        )
    if isinstance(exc, StreamConflict):
        _logger.warning("ingest of %s refused: it differs from what the store holds", key)
        return UploadRefused(
            409,
            f"the server holds another record at seq {exc.mark} of {key.label!r} than "
            "this upload: another process wrote into this stream with the project's "
            f"ingest token (revoke it if it leaked); resend from seq {exc.mark + 1}",
            acked_seq=exc.mark,
        )
    return None


# -- decoding (``bodies.decode_body`` undoes the Content-Encoding first) -------------------


def too_large(size: int, limit: int) -> UploadRefused:
    return UploadRefused(
        413,
        f"upload is over this server's limit of {limit} bytes (compressed or decoded): send "
        "smaller batches, or start the server with a larger --max-body-mb",
    )


def decode_records(data: bytes) -> list[R.AnyRecord]:
    """The records of a body in the stream format: MAGIC + whole frames, every record
    of the schema (422 otherwise, naming what is wrong)."""
    try:
        found = scan(data)
    except (msgspec.DecodeError, ValueError, RecursionError):
        raise UploadRefused(
            422, "body is not in the rankwise stream format: send MAGIC followed by whole frames"
        ) from None
    if found.damage is not None and "failed to decode" in found.damage.reason:
        # Whole frames whose records break the schema (``stream.records``: a wrong type,
        # an integer past 64 bits, a NaN or infinite time): msgspec's text names the field.
        raise UploadRefused(
            422,
            f"a record does not fit the stream schema ({found.damage.reason}); nothing of "
            "the body was applied: integers must fit in 64 bits, times must be finite",
        )
    if found.damage is not None:
        raise UploadRefused(
            422,
            f"body is not whole frames ({found.damage}); nothing of it was applied: resend "
            "MAGIC followed by whole frames",
        )
    return found.records


# -- records ---------------------------------------------------------------------------------


def check_fields(records: Sequence[R.AnyRecord]) -> None:
    """Refuse (422) a value outside the fixed set its field names: a Finish's state (a
    run in state "bogus" would have no place in the dashboard's filters), a console
    line's stream, and a group that breaks the id rule (it names a group's page)."""
    for rec in records:
        cls = type(rec)
        if cls is R.Finish and rec.state not in R.END_STATES:  # type: ignore[union-attr]
            raise UploadRefused(
                422, "a Finish record's state must be one of " + ", ".join(R.END_STATES)
            )
        if cls is R.Console and rec.stream not in R.CONSOLE_STREAMS:  # type: ignore[union-attr]
            raise UploadRefused(422, "a Console record's stream must be stdout or stderr")
        if cls is R.StreamStart:
            group = rec.group  # type: ignore[union-attr]
            if group is not None and not names.is_id(group):
                raise UploadRefused(
                    422, "a StreamStart's group breaks the id rule: " + names.ID_RULE
                )


def check_sizes(records: Sequence[R.AnyRecord]) -> set[str]:
    """Refuse metric keys that break ``rankwise.names``' key rule (422), key floods (413),
    config, summary, tags and argv over the element budget (``rankwise.budget``: 413) or
    that JSON cannot hold (422), and console line floods (413); the distinct metric keys.

    The SDK never writes such records (``log()`` skips bad keys; configs are far below
    the budget): one came from elsewhere. Each distinct key is checked once per upload.
    """
    seen: set[str] = set()
    spent = budget.UploadBudget()
    lines = 0
    try:
        for rec in records:
            cls = type(rec)
            if cls is R.StreamStart:
                assert isinstance(rec, R.StreamStart)
                spent.charge(rec.config, "the run's config")
                spent.charge(rec.tags, "the run's tags")
                spent.charge(rec.argv, "the run's argv")
            elif cls is R.ConfigUpdate or cls is R.SummaryUpdate:
                what = "a config update" if cls is R.ConfigUpdate else "a summary update"
                spent.charge(rec.items, what)  # type: ignore[union-attr]
            elif cls is R.Stall:
                spent.charge(rec.stacks, "a stall report")  # type: ignore[union-attr]
            elif cls is R.Console:
                assert isinstance(rec, R.Console)
                n = len(rec.lines)
                if n > MAX_CONSOLE_LINES_PER_RECORD or len(rec.times) > n:
                    raise UploadRefused(
                        413,
                        f"a console record holds more than {MAX_CONSOLE_LINES_PER_RECORD} "
                        "lines (or more times than lines)",
                    )
                lines += n
                if lines > MAX_CONSOLE_LINES_PER_UPLOAD:
                    raise UploadRefused(
                        413,
                        f"an upload holds more than {MAX_CONSOLE_LINES_PER_UPLOAD} console "
                        "lines: send smaller batches",
                    )
            values = getattr(rec, "values", None)
            if not isinstance(values, dict):
                continue
            if len(values) > MAX_KEYS_PER_RECORD:
                raise UploadRefused(
                    413, f"a record holds more than {MAX_KEYS_PER_RECORD} metric keys: log fewer"
                )
            for k in values:
                if k not in seen:
                    if not names.is_key(k):
                        raise UploadRefused(
                            422, "a metric key breaks the key rule: " + names.KEY_RULE
                        )
                    seen.add(k)
            if len(seen) > MAX_KEYS_PER_UPLOAD:
                raise UploadRefused(
                    413, f"an upload holds more than {MAX_KEYS_PER_UPLOAD} distinct metric keys"
                )
    except BudgetError as exc:
        raise UploadRefused(exc.status, str(exc)) from None
    return seen


def _digest(d: object) -> None:
    if not isinstance(d, str) or not _DIGEST.fullmatch(d):
        raise UploadRefused(422, "a blob digest is not 64 lowercase hex characters (sha256)")


def _rich_key(key: str) -> None:
    utf8 = len(key) if key.isascii() else len(key.encode("utf-8", "surrogatepass"))
    if not key or len(key) > MAX_KEY or "\x00" in key or utf8 > MAX_KEY:
        raise UploadRefused(
            422, f"a media key is empty, holds NUL or is over {MAX_KEY} bytes (UTF-8)"
        )


def check_rich(records: Sequence[R.AnyRecord], max_table_cells: int = MAX_TABLE_CELLS) -> None:
    """Refuse a rich record the store does not hold: a table over ``max_table_cells``
    (rows x columns) or ``MAX_TABLE_COLUMNS`` (413), a gallery or histogram past its cap
    (413), an unknown kind, format or column type, a malformed digest or key, or edges
    that do not fit the counts (422)."""
    for rec in records:
        cls = type(rec)
        if cls is R.Media:
            assert isinstance(rec, R.Media)
            _rich_key(rec.key)
            if len(rec.items) > MAX_GALLERY:
                raise UploadRefused(
                    413, f"media {rec.key!r} has {len(rec.items)} items, over {MAX_GALLERY}"
                )
            for it in rec.items:
                _digest(it.digest)
                if it.kind not in MEDIA_KINDS or it.format not in FORMATS:
                    raise UploadRefused(
                        422, f"media {rec.key!r}: unknown kind/format {it.kind!r}/{it.format!r}"
                    )
        elif cls is R.TableRec:
            assert isinstance(rec, R.TableRec)
            _rich_key(rec.key)
            _digest(rec.digest)
            for d in rec.blobs:
                _digest(d)
            if rec.ncols > MAX_TABLE_COLUMNS or rec.nrows * rec.ncols > max_table_cells:
                raise UploadRefused(
                    413,
                    f"table {rec.key!r} is {rec.nrows} rows x {rec.ncols} columns, over this "
                    f"server's limit ({max_table_cells} cells, {MAX_TABLE_COLUMNS} columns): "
                    "log fewer rows or columns, or split it into several keys",
                )
            if len(rec.columns) != rec.ncols or len(rec.types) != rec.ncols:
                raise UploadRefused(422, f"table {rec.key!r}: columns/types do not match ncols")
            if not set(rec.types) <= COLUMN_TYPES:
                raise UploadRefused(422, f"table {rec.key!r}: unknown column type")
        elif cls is R.HistogramRec:
            assert isinstance(rec, R.HistogramRec)
            _rich_key(rec.key)
            if len(rec.counts) > MAX_BINS:
                raise UploadRefused(
                    413, f"histogram {rec.key!r} has {len(rec.counts)} bins, over {MAX_BINS}"
                )
            if len(rec.edges) != len(rec.counts) + 1:
                raise UploadRefused(
                    422, f"histogram {rec.key!r}: edges must be one more than counts"
                )


# -- blobs -----------------------------------------------------------------------------------


def blob_digests(records: Sequence[R.AnyRecord]) -> list[str]:
    """The blobs ``records`` name, in order, without repeats."""
    out: dict[str, None] = {}
    for rec in records:
        out.update(dict.fromkeys(rec.blob_digests()))
    return list(out)


def check_blobs(blobs: Blobs | None, project: str, records: Sequence[R.AnyRecord]) -> None:
    """409 with ``missing_blobs`` unless every blob ``records`` name is stored (or was
    declared lost). Nothing is applied before its blobs are there."""
    digests = blob_digests(records)
    if not digests:
        return
    if not all(is_digest(d) for d in digests):
        raise UploadRefused(
            422, "a record names a blob digest that is not 64 lower-case hex digits"
        )
    absent = blobs.missing(project, digests) if blobs is not None else digests
    if absent and blobs is not None:
        declared = blobs.lost(project, absent)
        absent = [d for d in absent if d not in declared]
    if absent:
        raise UploadRefused(
            409,
            f"{len(absent)} blob(s) named by this upload's records are not stored yet: PUT "
            "them to /api/v1/blobs/{project}/{digest}, then resend the upload",
            missing_blobs=absent,
        )


def check_tables(
    blobs: Blobs | None, project: str, records: Sequence[R.AnyRecord], max_cells: int
) -> None:
    """A table's Parquet footer must hold the rows its record declares (413 past
    ``max_cells``, 422 otherwise): the size cap is on what DuckDB will page, not on
    what the uploader says. A blob declared lost is not read."""
    tables = [r for r in records if type(r) is R.TableRec]
    if not tables or blobs is None:
        return
    import pyarrow.parquet as pq  # type: ignore[import-untyped]  # [server] extra

    for rec in tables:
        assert isinstance(rec, R.TableRec)
        f = blobs.open(project, rec.digest)
        if f is None:
            continue  # declared lost by its uploader (check_blobs let it through)
        try:
            with f:
                meta = pq.ParquetFile(f).metadata
                rows, cols = meta.num_rows, meta.num_columns
        except Exception:
            raise UploadRefused(
                422, f"table {rec.key!r}: its blob is not a readable Parquet file"
            ) from None
        if rows * max(cols, rec.ncols, 1) > max_cells:
            raise UploadRefused(
                413,
                f"table {rec.key!r}'s file holds {rows} rows x {cols} columns, over this "
                f"server's limit ({max_cells} cells): log fewer rows or columns",
            )
        if rows != rec.nrows:
            raise UploadRefused(
                422,
                f"table {rec.key!r}'s file holds {rows} rows but its record says {rec.nrows}",
            )
