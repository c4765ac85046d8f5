"""The ingest endpoints: ``POST /api/v1/ingest`` and ``GET /api/v1/ack``.

One upload is one stream's bytes in the stream format (``MAGIC`` + whole frames, the
same bytes as the file), optionally compressed. Invariants:

* A body is checked whole before anything is applied: a torn or damaged body is refused
  (422) and nothing of it is stored, so the sender resends it whole.
* The records of one upload are consecutive (``seq`` n, n+1, ...). An upload starting
  above ``mark + 1`` would leave a gap: it is refused with 409 and the mark, and the
  uploader rewinds to it. Marks only ever grow, so a check that passes before
  ``Store.ingest`` still holds when the store applies the batch.
* Records at or below the mark are dropped here and again by the store, in the same
  transaction as the data: retries, replays and two servers on one database double
  nothing. A resend that reaches back to the mark keeps the record at the mark, which
  the store compares with a digest of the one it applied (``StreamFold.tip``): another
  writer with the project's token got there first when they differ (409).
* A stream bound to a secret (its first ``StreamStart``'s ``key_digest``,
  ``rankwise.stream.streamkey``) takes an upload only with that secret in the
  ``X-Rankwise-Stream-Key`` header: checked by the store under the stream's row lock,
  refused whole with 403 otherwise. Another holder of the project's ingest token can
  read the mark but not push it on or finish the stream.
* Blobs first: an upload whose new records name a blob (``record.blob_digests()``) the
  blob store lacks is refused whole with 409 and ``missing_blobs``; the uploader PUTs
  them and resends. So a record is never applied before its blob is stored. A digest its
  uploader declared lost (``POST /blobs/{project}/lost``) does not hold a record back.
* Overload is answered, not queued: past ``max_inflight`` requests at once a process
  answers 429, and a store that cannot write (disk full, database down) 503, both with
  ``Retry-After``. Nothing of such a request was applied; the uploader keeps the frames
  in its file and resends them after the advised wait.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
import zlib
from typing import Annotated

import msgspec
from fastapi import APIRouter, Depends, Query, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from ... import budget, names
from ..._http import UPLOAD_INTERVAL_HEADER
from ...budget import BudgetError
from ...store import media as rich
from ...store.base import Store, StreamKey
from ...store.blobs import BlobStore, is_digest
from ...store.ingest import StreamConflict, StreamKeyRefused
from ...stream import records as R
from ...stream import streamkey
from ...stream.frames import scan
from ..config import ServerSettings
from ..encoding import ApiError, error_reply, reply
from ..group_commit import GroupCommit, store_unavailable
from ..keycap import MAX_KEYS_PER_RUN, run_keys
from ..pacing import Pacer
from ..replies import AckReply
from .deps import Responses, answers, refusal
from .deps import blobs as _blobs
from .deps import store as _store

ID_PATTERN = names.ID_CHARS_PATTERN  # the full rule is checked before routing
# A log() call with more keys than this is no training loop's; these bound a request's
# memory and the rows one upload can add.
MAX_KEYS_PER_RECORD = 10_000
MAX_KEYS_PER_UPLOAD = 100_000
STREAM_CONTENT_TYPE = "application/x-rankwise-stream"

router = APIRouter(tags=["ingest"])


def stream_key(
    project: Annotated[str, Query(pattern=ID_PATTERN)],
    run: Annotated[str, Query(pattern=ID_PATTERN)],
    label: Annotated[str, Query(pattern=ID_PATTERN)],
    incarnation: Annotated[int, Query(ge=0)],
) -> StreamKey:
    return StreamKey(project, run, label, incarnation)


Key = Annotated[StreamKey, Depends(stream_key)]


@router.get("/ack", response_model=None, responses=answers(AckReply))
def ack(request: Request, key: Key) -> Response:
    """The stream's high-water mark: the highest seq the server holds (-1: none)."""
    return reply(request, AckReply(acked_seq=_store(request).acked(key)))


_ERRORS: Responses = {
    403: refusal(
        "the stream is bound to a secret (its stream start's key digest) and this upload "
        "does not present it in X-Rankwise-Stream-Key (error.stream_key is true)"
    ),
    408: refusal("the body did not arrive within the server's deadline: resend"),
    409: refusal(
        "gap: resend from the mark (error.acked_seq); or blobs the records name are not "
        "stored: PUT error.missing_blobs, then resend"
    ),
    413: refusal("body over the server's limit"),
    415: refusal("unknown Content-Encoding"),
    422: refusal("bad parameters or not whole frames"),
    429: refusal("over --max-inflight: retry after Retry-After"),
    503: refusal("the store cannot write: retry after Retry-After"),
}
_BODY = {
    "requestBody": {
        "required": True,
        "description": "MAGIC + whole frames (the stream format); gzip or zstd allowed",
        "content": {STREAM_CONTENT_TYPE: {"schema": {"type": "string", "format": "binary"}}},
    }
}


@router.post(
    "/ingest",
    response_model=None,
    responses={**answers(AckReply), **_ERRORS},
    openapi_extra=_BODY,
)
async def ingest(request: Request, key: Key) -> Response:
    """Apply the records of one stream above its mark; replies with the new mark."""
    settings: ServerSettings = request.app.state.settings
    state = request.app.state
    pacer = _pacer(request)
    inflight = getattr(state, "ingest_inflight", 0)  # the event loop's own counter
    behind = _group_commit(request).expected_wait()
    budget = ADMIT_WAIT * settings.pace_target
    if 0 < settings.max_inflight <= inflight or (
        pacer.enabled and (behind > budget or not pacer.admits(inflight, budget))
    ):
        # Come back no sooner than the pace this process asks of every uploader.
        pacer.refused()
        wait = max(settings.retry_after, math.ceil(pacer.interval))
        why = (
            f"the server is handling {inflight} uploads (--max-inflight {settings.max_inflight})"
            if inflight >= settings.max_inflight > 0
            else f"the server is behind ({inflight} uploads in progress)"
        )
        return _paced(
            pacer,
            _retry_later(request, 429, f"{why}: retry after the Retry-After seconds", wait),
        )
    # A body still arriving holds no admission slot (``max_inflight``): slow senders
    # would otherwise lock every project out. It holds a receiving slot instead, at most
    # ``max_inflight`` per token and four times that in all, for at most
    # ``settings.body_deadline`` seconds (408 past it).
    who = _sender(request)
    receiving: dict[str, int] | None = getattr(state, "ingest_receiving", None)
    if receiving is None:  # made on first use: the event loop's thread, no race
        receiving = state.ingest_receiving = {}
    mine, everyone = receiving.get(who, 0), sum(receiving.values())
    cap = settings.max_inflight
    if cap > 0 and (mine >= cap or everyone >= RECEIVING_PER_INFLIGHT * cap):
        return _retry_later(
            request,
            429,
            f"{mine if mine >= cap else everyone} upload bodies are still arriving: retry "
            "after the Retry-After seconds",
            settings.retry_after,
        )
    receiving[who] = mine + 1
    try:
        limit = settings.max_body_bytes
        raw = await asyncio.wait_for(read_body(request, limit), settings.body_deadline)
    except TimeoutError:
        raise ApiError(
            408,
            f"the upload body did not arrive within {settings.body_deadline:g} s: send it at once",
        ) from None
    finally:
        receiving[who] -= 1
        if not receiving[who]:
            del receiving[who]
    state.ingest_inflight = getattr(state, "ingest_inflight", 0) + 1
    try:
        started = time.monotonic()  # what the pacer weighs: this process's own time
        # Inflating up to the body cap is CPU work: in a thread, never on the event loop.
        encoding = request.headers.get("content-encoding", "")
        data = await run_in_threadpool(decode_body, raw, encoding, limit) if encoding else raw
        try:
            acked, fresh = await run_in_threadpool(
                prepare_upload,
                _store(request),
                key,
                data,
                settings.max_keys_per_run,
                settings.max_table_cells,
                _blobs(request),
            )
            if fresh:  # waits for its group-commit batch without holding a thread
                secret = request.headers.get(streamkey.HEADER)
                acked = await asyncio.wrap_future(_group_commit(request).submit(key, fresh, secret))
        except BudgetError as exc:  # the stream's config or summary as a whole
            raise ApiError(exc.status, str(exc)) from None
        except StreamKeyRefused as exc:
            _logger.warning("ingest of %s refused: not the stream's secret", key)
            raise ApiError(
                403,
                f"stream {key.label!r} is bound to the secret its stream start named, and "
                f"this upload {'presents another' if exc.presented else 'presents none'} "
                f"({streamkey.HEADER}): only the process that wrote the stream (its "
                "uploader, or rankwise sync with the stream's .key file beside it) may "
                "add to it; nothing of this upload was applied",
                stream_key=True,
                acked_seq=exc.mark,
            ) from None
        except StreamConflict as exc:
            _logger.warning("ingest of %s refused: it differs from what the store holds", key)
            raise ApiError(
                409,
                f"the server holds another record at seq {exc.mark} of {key.label!r} than "
                "this upload: another process wrote into this stream with the project's "
                f"ingest token (revoke it if it leaked); resend from seq {exc.mark + 1}",
                acked_seq=exc.mark,
            ) from None
        except Exception as exc:
            if not store_unavailable(exc):
                raise
            _logger.warning("ingest of %s refused: the store cannot write (%r)", key, exc)
            return _retry_later(  # not paced: Retry-After says when to come back
                request,
                503,
                "the store cannot write now; nothing of this upload was applied: retry "
                "after the Retry-After seconds",
                settings.retry_after,
            )
        pacer.observe(time.monotonic() - started)
        return _paced(pacer, reply(request, AckReply(acked_seq=acked)))
    finally:
        state.ingest_inflight -= 1


# Receiving slots in all per admission slot (``max_inflight``).
RECEIVING_PER_INFLIGHT = 4


def _sender(request: Request) -> str:
    """Whose receiving slots a request counts against: its token, else its address."""
    who = getattr(request.state, "principal", None)
    token = getattr(who, "token", None)
    if token is not None:
        return "t:" + str(token.id)
    client = request.client
    return "a:" + (client.host if client is not None else "")


_logger = logging.getLogger("rankwise.server")
# An upload is admitted only while this process expects to answer it within this many
# pace targets (1 s by default): by the group commit's backlog (uploads waiting x store
# time per upload) and by Little's law over the whole process (uploads in progress /
# uploads finished per second, ``Pacer.admits``). Past it, 429 at once rather than a
# wait that grows.
ADMIT_WAIT = 2.0


def _group_commit(request: Request) -> GroupCommit:
    state = request.app.state
    group = getattr(state, "group_commit", None)
    if group is None:  # made on first use: the event loop's thread, no race
        group = state.group_commit = GroupCommit(state.store)
    return group


def _pacer(request: Request) -> Pacer:
    state = request.app.state
    pacer = getattr(state, "pacer", None)
    if pacer is None:  # made on first use: the event loop's thread, no race
        settings: ServerSettings = state.settings
        pacer = state.pacer = Pacer(settings.max_upload_interval, settings.pace_target)
        pacer.start_probe()
    return pacer


def _paced(pacer: Pacer, response: Response) -> Response:
    """``response`` with the upload interval this process advises, if any."""
    value = pacer.header()
    if value is not None:
        response.headers[UPLOAD_INTERVAL_HEADER] = value
    return response


def _retry_later(request: Request, status: int, message: str, seconds: int) -> Response:
    response = error_reply(request, status, message, retry_after=seconds)
    response.headers["Retry-After"] = str(seconds)
    return response


async def read_body(request: Request, limit: int) -> bytes:
    """The raw body, refusing (413) as soon as it is known to be over ``limit``."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _too_large(int(declared), limit)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _too_large(size, limit)
        chunks.append(chunk)
    return b"".join(chunks)


def _too_large(size: int, limit: int) -> ApiError:
    return ApiError(
        413,
        f"upload is over this server's limit of {limit} bytes (compressed or decoded): send "
        "smaller batches, or start the server with a larger --max-body-mb",
    )


def decode_body(raw: bytes, encoding: str, limit: int) -> bytes:
    """Undo ``Content-Encoding`` without ever holding more than ``limit`` bytes."""
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        return raw
    try:
        if encoding in ("gzip", "x-gzip", "deflate"):
            wbits = zlib.MAX_WBITS | (16 if "gzip" in encoding else 0)
            inflater = zlib.decompressobj(wbits)
            out = inflater.decompress(raw, limit + 1)
            if len(out) > limit or inflater.unconsumed_tail:
                raise _too_large(len(out), limit)
            if inflater.unused_data or not inflater.eof:
                # A second member or a truncated one: never apply part of a body.
                raise ApiError(422, "body is not valid data for its Content-Encoding")
            return out
        if encoding == "zstd":
            try:
                import zstandard
            except ImportError:
                raise ApiError(
                    415, "this server cannot read zstd (pip install zstandard); send gzip"
                ) from None
            reader = zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)
            out = reader.read(limit + 1)
            while len(out) <= limit:
                more = reader.read(limit + 1 - len(out))
                if not more:
                    break
                out += more
            if len(out) > limit:
                raise _too_large(len(out), limit)
            return out
    except (zlib.error, ValueError):
        raise ApiError(422, "body is not valid data for its Content-Encoding") from None
    except Exception as exc:
        if type(exc).__name__ == "ZstdError":
            raise ApiError(422, "body is not valid data for its Content-Encoding") from None
        raise
    raise ApiError(415, "unknown Content-Encoding: send gzip, deflate, zstd or identity")


# Console lines: the SDK writes at most 1,000 per record (``sdk.console``) and, counting
# each line in a frame's size, about 66,000 per frame; a line costs it at least 10 bytes
# (text and time), so a 4 MiB upload batch or the local reader's 8 MiB read holds under
# 900,000. Every line is a stored row: these bound the rows one request adds (bytes per
# stream: ``store.health``).
MAX_CONSOLE_LINES_PER_RECORD = 10_000
MAX_CONSOLE_LINES_PER_UPLOAD = 1_000_000


def check_records(records: list[R.AnyRecord]) -> set[str]:
    """Refuse (422) metric keys that break ``rankwise.names``' key rule, key floods (413),
    config, summary, tags and argv over the element budget (``rankwise.budget``: 413)
    or that JSON cannot hold (422), and console line floods (413).

    The SDK never sends such records (``log()`` skips bad keys; configs are far below
    the budget), so a body holding one came from elsewhere: it is refused whole. Each
    distinct key is checked once per upload.
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
                    raise ApiError(
                        413,
                        f"a console record holds more than {MAX_CONSOLE_LINES_PER_RECORD} "
                        "lines (or more times than lines)",
                    )
                lines += n
                if lines > MAX_CONSOLE_LINES_PER_UPLOAD:
                    raise ApiError(
                        413,
                        f"an upload holds more than {MAX_CONSOLE_LINES_PER_UPLOAD} console "
                        "lines: send smaller batches",
                    )
            values = getattr(rec, "values", None)
            if not isinstance(values, dict):
                continue
            if len(values) > MAX_KEYS_PER_RECORD:
                raise ApiError(
                    413, f"a record holds more than {MAX_KEYS_PER_RECORD} metric keys: log fewer"
                )
            for k in values:
                if k not in seen:
                    if not names.is_key(k):
                        raise ApiError(422, "a metric key breaks the key rule: " + names.KEY_RULE)
                    seen.add(k)
            if len(seen) > MAX_KEYS_PER_UPLOAD:
                raise ApiError(
                    413, f"an upload holds more than {MAX_KEYS_PER_UPLOAD} distinct metric keys"
                )
    except BudgetError as exc:
        raise ApiError(exc.status, str(exc)) from None
    return seen


def check_enums(records: list[R.AnyRecord]) -> None:
    """Refuse (422) a value outside the fixed set its field names: a Finish's state (a
    run in state "bogus" would have no place in the dashboard's filters), a console
    line's stream, and a group that breaks the id rule (it names a group's page)."""
    for rec in records:
        cls = type(rec)
        if cls is R.Finish and rec.state not in R.END_STATES:  # type: ignore[union-attr]
            raise ApiError(422, "a Finish record's state must be one of " + ", ".join(R.END_STATES))
        if cls is R.Console and rec.stream not in R.CONSOLE_STREAMS:  # type: ignore[union-attr]
            raise ApiError(422, "a Console record's stream must be stdout or stderr")
        if cls is R.StreamStart:
            group = rec.group  # type: ignore[union-attr]
            if group is not None and not names.is_id(group):
                raise ApiError(422, "a StreamStart's group breaks the id rule: " + names.ID_RULE)


def apply_upload(
    store: Store,
    key: StreamKey,
    data: bytes,
    commit: GroupCommit | None = None,
    max_keys_per_run: int = MAX_KEYS_PER_RUN,
    max_table_cells: int = rich.MAX_TABLE_CELLS,
    blobs: BlobStore | None = None,
    secret: str | None = None,
) -> int:
    """Check ``data`` whole, then hand the records above the mark to the store (through
    ``commit``, which applies it with the uploads that arrived with it). ``secret``:
    the stream secret the upload presented (``rankwise.stream.streamkey``)."""
    mark, fresh = prepare_upload(store, key, data, max_keys_per_run, max_table_cells, blobs)
    if not fresh:
        return mark
    if commit is not None:
        return commit.ingest(key, fresh, secret)
    return store.ingest([(key, fresh)], [secret]).get(key, mark)


def prepare_upload(
    store: Store,
    key: StreamKey,
    data: bytes,
    max_keys_per_run: int = MAX_KEYS_PER_RUN,
    max_table_cells: int = rich.MAX_TABLE_CELLS,
    blobs: BlobStore | None = None,
) -> tuple[int, list[R.AnyRecord]]:
    """Check ``data`` whole (raising ``ApiError``); the stream's mark and the records
    above it, which the caller hands to the store (none: the mark is the reply)."""
    try:
        found = scan(data)
    except (msgspec.DecodeError, ValueError, RecursionError):
        raise ApiError(
            422, "body is not in the rankwise stream format: send MAGIC followed by whole frames"
        ) from None
    if found.damage is not None and "failed to decode" in found.damage.reason:
        # Whole frames whose records break the schema (``stream.records``: a wrong type,
        # an integer past 64 bits, a NaN or infinite time): msgspec's text names the field.
        raise ApiError(
            422,
            f"a record does not fit the stream schema ({found.damage.reason}); nothing of "
            "the body was applied: integers must fit in 64 bits, times must be finite",
        )
    if found.damage is not None:
        raise ApiError(
            422,
            f"body is not whole frames ({found.damage}); nothing of it was applied: resend "
            "MAGIC followed by whole frames",
        )
    records = found.records
    if not records:
        return store.acked(key), []
    first = records[0].seq
    for i, rec in enumerate(records):
        if rec.seq != first + i:
            raise ApiError(
                422,
                f"records of one upload must be consecutive: seq {rec.seq} follows {first + i - 1}",
            )
        if type(rec) is R.StreamStart and (
            (rec.project, rec.run_id, rec.label, rec.incarnation)
            != (key.project, key.run_id, key.label, key.incarnation)
        ):
            raise ApiError(
                422,
                "the body's stream start names another stream than the project, run, label "
                "and incarnation it was posted as: post each stream under its own identity",
            )
    check_enums(records)
    keys = check_records(records)
    try:  # tables over the size cap, malformed digests, unknown kinds: refused whole
        rich.check_records(records, max_table_cells)
    except rich.RichRecordError as exc:
        raise ApiError(exc.status, str(exc)) from None
    run_keys(store).check(store, key.project, key.run_id, keys, max_keys_per_run)
    mark = store.acked(key)
    if first > mark + 1:
        raise ApiError(
            409,
            f"upload starts at seq {first} but the server holds {key.label!r} only up to seq "
            f"{mark}: resend from seq {mark + 1}",
            acked_seq=mark,
        )
    # A resend that reaches back to the mark keeps the record at the mark: the store
    # checks it is the one it applied (409 otherwise, ``StreamConflict``).
    fresh = records[mark - first :] if mark >= first else records
    if fresh:
        check_blobs(blobs, key.project, fresh)
        check_tables(blobs, key.project, fresh, max_table_cells)
    return mark, fresh


def check_tables(
    blobs: BlobStore | None, project: str, records: list[R.AnyRecord], max_cells: int
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
            raise ApiError(
                422, f"table {rec.key!r}: its blob is not a readable Parquet file"
            ) from None
        if rows * max(cols, rec.ncols, 1) > max_cells:
            raise ApiError(
                413,
                f"table {rec.key!r}'s file holds {rows} rows x {cols} columns, over this "
                f"server's limit ({max_cells} cells): log fewer rows or columns",
            )
        if rows != rec.nrows:
            raise ApiError(
                422,
                f"table {rec.key!r}'s file holds {rows} rows but its record says {rec.nrows}",
            )


def blob_digests(records: list[R.AnyRecord]) -> list[str]:
    """The blobs ``records`` name, in order, without repeats."""
    out: dict[str, None] = {}
    for rec in records:
        out.update(dict.fromkeys(rec.blob_digests()))
    return list(out)


def check_blobs(blobs: BlobStore | None, project: str, records: list[R.AnyRecord]) -> None:
    """409 with ``missing_blobs`` unless every blob ``records`` name is stored (or was
    declared lost by its uploader). Nothing is applied before its blobs are there."""
    digests = blob_digests(records)
    if not digests:
        return
    if not all(is_digest(d) for d in digests):
        raise ApiError(422, "a record names a blob digest that is not 64 lower-case hex digits")
    absent = blobs.missing(project, digests) if blobs is not None else digests
    if absent and blobs is not None:
        declared = blobs.lost(project, absent)
        absent = [d for d in absent if d not in declared]
    if absent:
        raise ApiError(
            409,
            f"{len(absent)} blob(s) named by this upload's records are not stored yet: PUT "
            "them to /api/v1/blobs/{project}/{digest}, then resend the upload",
            missing_blobs=absent,
        )
