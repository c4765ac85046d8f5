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
  nothing.
* Overload is answered, not queued: past ``max_inflight`` requests at once a process
  answers 429, and a store that cannot write (disk full, database down) 503, both with
  ``Retry-After``. Nothing of such a request was applied; the uploader keeps the frames
  in its file and resends them after the advised wait.
"""

from __future__ import annotations

import logging
import sqlite3
import zlib
from typing import Annotated

import msgspec
from fastapi import APIRouter, Depends, Query, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from ..store.base import Store, StreamKey
from ..stream import records as R
from ..stream.frames import scan
from .config import ServerSettings
from .encoding import ApiError, error_reply, reply
from .group_commit import GroupCommit
from .schemas import AckReply, ErrorReply

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"
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


def _store(request: Request) -> Store:
    return request.app.state.store  # type: ignore[no-any-return]


@router.get("/ack", response_model=AckReply)
def ack(request: Request, key: Key) -> Response:
    """The stream's high-water mark: the highest seq the server holds (-1: none)."""
    return reply(request, {"acked_seq": _store(request).acked(key)})


_ERRORS = {
    409: {"model": ErrorReply, "description": "gap: resend from the mark (error.acked_seq)"},
    413: {"model": ErrorReply, "description": "body over the server's limit"},
    415: {"model": ErrorReply, "description": "unknown Content-Encoding"},
    422: {"model": ErrorReply, "description": "bad parameters or not whole frames"},
    429: {"model": ErrorReply, "description": "over --max-inflight: retry after Retry-After"},
    503: {"model": ErrorReply, "description": "the store cannot write: retry after Retry-After"},
}
_BODY = {
    "requestBody": {
        "required": True,
        "description": "MAGIC + whole frames (the stream format); gzip or zstd allowed",
        "content": {STREAM_CONTENT_TYPE: {"schema": {"type": "string", "format": "binary"}}},
    }
}


@router.post("/ingest", response_model=AckReply, responses=_ERRORS, openapi_extra=_BODY)  # type: ignore[arg-type]
async def ingest(request: Request, key: Key) -> Response:
    """Apply the records of one stream above its mark; replies with the new mark."""
    settings: ServerSettings = request.app.state.settings
    state = request.app.state
    inflight = getattr(state, "ingest_inflight", 0)  # the event loop's own counter
    if 0 < settings.max_inflight <= inflight:
        return _retry_later(
            request,
            429,
            f"the server is handling {inflight} uploads (--max-inflight "
            f"{settings.max_inflight}): retry after the Retry-After seconds",
            settings.retry_after,
        )
    state.ingest_inflight = inflight + 1
    try:
        limit = settings.max_body_bytes
        raw = await read_body(request, limit)
        data = decode_body(raw, request.headers.get("content-encoding", ""), limit)
        try:
            commit = _group_commit(request)
            acked = await run_in_threadpool(apply_upload, _store(request), key, data, commit)
        except Exception as exc:
            if not _store_unavailable(exc):
                raise
            _logger.warning("ingest of %s refused: the store cannot write (%r)", key, exc)
            return _retry_later(
                request,
                503,
                f"the store cannot write now ({type(exc).__name__}: {exc}); nothing of this "
                "upload was applied: retry after the Retry-After seconds",
                settings.retry_after,
            )
        return reply(request, {"acked_seq": acked})
    finally:
        state.ingest_inflight -= 1


_logger = logging.getLogger("rankwise.server")


def _group_commit(request: Request) -> GroupCommit:
    state = request.app.state
    group = getattr(state, "group_commit", None)
    if group is None:  # made on first use: the event loop's thread, no race
        group = state.group_commit = GroupCommit(state.store)
    return group  # type: ignore[no-any-return]


def _retry_later(request: Request, status: int, message: str, seconds: int) -> Response:
    response = error_reply(request, status, message, retry_after=seconds)
    response.headers["Retry-After"] = str(seconds)
    return response


def _store_unavailable(exc: Exception) -> bool:
    """A failure of the database itself (disk full, database down), not of the upload."""
    if isinstance(exc, (OSError, sqlite3.OperationalError)):
        return True
    return type(exc).__module__.startswith("psycopg") and "Operational" in "".join(
        c.__name__ for c in type(exc).__mro__
    )


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
        f"upload of {size}+ bytes is over this server's limit of {limit} bytes: send smaller "
        "batches, or start the server with a larger --max-body-mb",
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
    except (zlib.error, ValueError) as exc:
        raise ApiError(422, f"body is not valid {encoding}: {exc}") from None
    except Exception as exc:
        if type(exc).__name__ == "ZstdError":
            raise ApiError(422, f"body is not valid zstd: {exc}") from None
        raise
    raise ApiError(415, f"unknown Content-Encoding {encoding!r}: send gzip, zstd or identity")


def apply_upload(
    store: Store, key: StreamKey, data: bytes, commit: GroupCommit | None = None
) -> int:
    """Check ``data`` whole, then hand the records above the mark to the store (through
    ``commit``, which applies it with the uploads that arrived with it)."""
    try:
        found = scan(data)
    except (msgspec.DecodeError, ValueError) as exc:
        raise ApiError(422, f"body is not in the rankwise stream format: {exc}") from None
    if found.damage is not None:
        raise ApiError(
            422,
            f"body is not whole frames ({found.damage}); nothing of it was applied: resend "
            "MAGIC followed by whole frames",
        )
    records = found.records
    if not records:
        return store.acked(key)
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
                f"the body is stream {rec.project}/{rec.run_id}/{rec.label}.{rec.incarnation}"
                f" but was posted as {key.project}/{key.run_id}/{key.label}.{key.incarnation}",
            )
    mark = store.acked(key)
    if first > mark + 1:
        raise ApiError(
            409,
            f"upload starts at seq {first} but the server holds {key.label!r} only up to seq "
            f"{mark}: resend from seq {mark + 1}",
            acked_seq=mark,
        )
    fresh = records[mark + 1 - first :] if mark >= first else records
    if not fresh:
        return mark
    if commit is not None:
        return commit.ingest(key, fresh)
    return store.ingest([(key, fresh)]).get(key, mark)
