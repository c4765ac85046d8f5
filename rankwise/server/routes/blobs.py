"""The blob endpoints: check, upload and serve content-addressed files of a project.

* ``POST /blobs/{project}/missing`` (ingest): which of these digests the server lacks.
* ``POST /blobs/{project}/lost`` (ingest): the uploader declares blobs it no longer has
  (their files were deleted), so the records naming them can be applied (see
  ``rankwise.store.blobs``); they are then served as 404.
* ``PUT /blobs/{project}/{digest}`` (ingest): the raw bytes, streamed to a spool file while
  hashed and counted; a digest that is not 64 lower-case hex digits is 422, bytes that
  hash to another digest 400, a body over ``max_blob_bytes`` 413. 201 when stored, 200
  when the server held it already (idempotent: retries and two uploaders are harmless).
* ``GET /blobs/{project}/{digest}`` (read): the bytes, streamed, with a content type the
  server chooses from the kind and format the store recorded for a media row naming the
  digest (``media_type``), never from the uploader; unknown: ``application/octet-stream``.
  Served with ``nosniff`` and ``Content-Security-Policy: sandbox; default-src 'none'``
  (the hardening middleware sets the blob CSP on these paths); HTML is an attachment
  unless asked ``?inline=1``, and even then runs in a sandbox with no script.

Whose project: the path's ``project`` is checked against the token by the route's policy
(``auth.ingest``/``auth.read``) before the body is read.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Callable
from typing import Annotated

import msgspec
from fastapi import APIRouter, Path, Query, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response, StreamingResponse

from ...store.blobs import (
    CHUNK,
    BlobWriter,
    DigestMismatch,
    ReadOnly,
    is_digest,
    iter_chunks,
)
from ...wire.media import BlobPut, BlobsLost, BlobsMissing
from ..config import ServerSettings
from ..encoding import ApiError, reply
from .deps import answers, blob_store

router = APIRouter(tags=["blobs"])
read_router = APIRouter(tags=["blobs"])

# Digests in one missing/lost request (a 1 MiB JSON body holds about 15,000).
MAX_DIGESTS = 10_000
OCTET = "application/octet-stream"
# What a (kind, format) recorded by the store is served as. Raster images, audio and video
# the browser plays; text as plain text; HTML only as an attachment or sandboxed; anything
# else (SVG never gets here: the SDK refuses it) as bytes.
CONTENT_TYPES = {
    ("image", "png"): "image/png",
    ("image", "jpeg"): "image/jpeg",
    ("image", "gif"): "image/gif",
    ("video", "gif"): "image/gif",
    ("video", "mp4"): "video/mp4",
    ("audio", "wav"): "audio/wav",
    ("text", "txt"): "text/plain; charset=utf-8",
    ("html", "html"): "text/html; charset=utf-8",
    ("table", "parquet"): "application/vnd.apache.parquet",
}


Digest = Annotated[
    str, Path(pattern="^[0-9a-f]{64}$", description="the sha256 of the blob's bytes (hex)")
]


class Digests(msgspec.Struct):
    digests: list[str]


def _digest(digest: str) -> str:
    if not is_digest(digest):
        raise ApiError(422, "path parameter 'digest' must be 64 lower-case hex digits (sha256)")
    return digest


def _digests(raw: bytes) -> list[str]:
    try:
        body = msgspec.json.decode(raw, type=Digests)
    except msgspec.DecodeError:
        raise ApiError(422, 'body must be {"digests": ["<sha256 hex>", ...]}') from None
    if len(body.digests) > MAX_DIGESTS:
        # 422, not 413: a body field over its documented maxItems, like any other field
        raise ApiError(422, f"at most {MAX_DIGESTS} digests per request: send several")
    for d in body.digests:
        _digest(d)
    return body.digests


_DIGESTS_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "required": ["digests"],
                    "properties": {
                        "digests": {
                            "type": "array",
                            "maxItems": MAX_DIGESTS,
                            "items": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
                        }
                    },
                }
            }
        },
    }
}


@router.post(
    "/blobs/{project}/missing",
    response_model=None,
    responses=answers(BlobsMissing, 422, 503, e503="this server keeps no blobs"),
    openapi_extra=_DIGESTS_BODY,
)
async def missing(request: Request, project: str) -> Response:
    """Those of the digests the server does not hold (upload them before the records)."""
    digests = _digests(await request.body())
    found = await run_in_threadpool(blob_store(request).missing, project, digests)
    limit = request.app.state.settings.max_blob_bytes
    return reply(request, BlobsMissing(missing=found, max_blob_bytes=limit))


@router.post(
    "/blobs/{project}/lost",
    response_model=None,
    responses=answers(BlobsLost, 422, 503, e503="this server keeps no blobs"),
    openapi_extra=_DIGESTS_BODY,
)
async def lost(request: Request, project: str) -> Response:
    """Declare blobs the uploader no longer has: records naming them are then applied."""
    digests = _digests(await request.body())
    try:
        marked = await run_in_threadpool(blob_store(request).mark_lost, project, digests)
    except ReadOnly:
        raise ApiError(405, "this server only serves blobs") from None
    return reply(request, BlobsLost(lost=marked))


_PUT_BODY = {
    "requestBody": {
        "required": True,
        "description": "the blob's bytes; their sha256 must be the path's digest",
        "content": {OCTET: {"schema": {"type": "string", "format": "binary"}}},
    }
}


_PUT_REPLIES = answers(
    BlobPut,
    400,
    413,
    422,
    503,
    e400="the bytes do not hash (sha256) to the digest",
    e413="over the server's --max-blob-mb",
)
_PUT_REPLIES[201] = {**_PUT_REPLIES[200], "description": "stored (200: held already)"}


@router.put(
    "/blobs/{project}/{digest}",
    response_model=None,
    status_code=201,
    responses=_PUT_REPLIES,
    openapi_extra=_PUT_BODY,
)
async def put(request: Request, project: str, digest: Digest) -> Response:
    """Store one blob (streamed, verified); 201 when new, 200 when already held."""
    digest = _digest(digest)
    store = blob_store(request)
    settings: ServerSettings = request.app.state.settings
    limit = settings.max_blob_bytes
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise too_large(limit)
    writer = getattr(store, "writer", None)
    if writer is not None:
        new, size = await _receive_direct(request, writer, project, digest, limit)
        return reply(request, BlobPut(digest=digest, size=size, stored=new), 201 if new else 200)
    # At most one chunk in memory per upload; a bigger blob spools to disk.
    with tempfile.SpooledTemporaryFile(max_size=CHUNK) as spool:
        h = hashlib.sha256()
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise too_large(limit)
            h.update(chunk)
            spool.write(chunk)
        if h.hexdigest() != digest:
            raise _mismatch()
        spool.seek(0)
        try:
            new = await run_in_threadpool(store.put, project, digest, spool)
        except DigestMismatch:  # the spool was changed under us: never store it
            raise ApiError(400, "the bytes do not hash to the digest: nothing stored") from None
        except ReadOnly:
            raise ApiError(405, "this server only serves blobs") from None
    return reply(request, BlobPut(digest=digest, size=size, stored=new), 201 if new else 200)


def _mismatch() -> ApiError:
    return ApiError(
        400,
        "the bytes sent do not hash (sha256) to the digest in the path: nothing was "
        "stored; send the file again",
    )


async def _receive_direct(
    request: Request,
    writer: Callable[[str, str], BlobWriter | None],
    project: str,
    digest: str,
    limit: int,
) -> tuple[bool, int]:
    """Receive a blob straight into a local store's temporary file: hashed and written
    once, in ``CHUNK`` batches on a worker thread (the event loop keeps parsing other
    uploads meanwhile). Returns (stored anew, size)."""
    out = await run_in_threadpool(writer, project, digest)
    held = hashlib.sha256()  # out is None: the blob is held already, only verify the bytes

    def sink(pieces: list[bytes]) -> None:
        if out is not None:
            out.write_all(pieces)
        else:
            for data in pieces:
                held.update(data)

    size = 0
    batch: list[bytes] = []
    batched = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise too_large(limit)
            batch.append(chunk)
            batched += len(chunk)
            if batched >= CHUNK:
                await run_in_threadpool(sink, batch)
                batch, batched = [], 0
        if batch:
            await run_in_threadpool(sink, batch)
        if out is None:
            if held.hexdigest() != digest:
                raise _mismatch()
            return False, size
        new: bool = await run_in_threadpool(out.commit)
    except DigestMismatch:
        raise _mismatch() from None
    except BaseException:
        if out is not None:
            await run_in_threadpool(out.abort)
        raise
    return new, size


def too_large(limit: int) -> ApiError:
    return ApiError(
        413,
        f"blob is over this server's limit of {limit} bytes: log a smaller file, or start "
        "the server with a larger --max-blob-mb",
    )


def media_type(request: Request, project: str, digest: str) -> str:
    """The content type of a blob, from what the store recorded about it.

    The hook: a store with ``blob_media(project, digest) -> (kind, format) | None`` (the
    media rows) decides; without it, or for a digest no media row names, the blob is
    ``application/octet-stream``. What the uploader claimed is never consulted.
    """
    lookup = getattr(request.app.state.store, "blob_media", None)
    if lookup is None:
        return OCTET
    found = lookup(project, digest)
    if not found:
        return OCTET
    return CONTENT_TYPES.get((str(found[0]), str(found[1])), OCTET)


@read_router.get(
    "/blobs/{project}/{digest}",
    response_model=None,
    responses={
        200: {
            "description": "the blob's bytes, typed by the server from the media rows",
            "content": {
                t.split(";")[0]: {"schema": {"type": "string", "format": "binary"}}
                for t in sorted({OCTET, *CONTENT_TYPES.values()})
            },
        },
        206: {"description": "the bytes of the one range asked for with Range: bytes=a-b"},
        416: {"description": "the range asked for lies outside the blob"},
        **answers(None, 404, 422, 503, e404="no such blob in this project"),
    },
)
def get(
    request: Request,
    project: str,
    digest: Digest,
    inline: Annotated[bool, Query(description="HTML only: show it (sandboxed)")] = False,
) -> Response:
    """The blob's bytes, with a server-chosen content type and no active content."""
    digest = _digest(digest)
    store = blob_store(request)
    size = store.size(project, digest)
    fileobj = store.open(project, digest) if size is not None else None
    if fileobj is None or size is None:
        raise ApiError(404, f"no blob of that digest in project {project!r}")
    ctype = media_type(request, project, digest)
    headers = {
        "Accept-Ranges": "bytes",
        "Cache-Control": "private, max-age=31536000, immutable",  # content-addressed
        "ETag": f'"{digest}"',
    }
    if ctype.startswith("text/html") and not inline:
        headers["Content-Disposition"] = f'attachment; filename="{digest[:16]}.html"'
    elif ctype == OCTET or ctype.startswith("application/"):
        headers["Content-Disposition"] = f'attachment; filename="{digest[:16]}"'
    span = byte_range(request.headers.get("range"), size)
    if span is None:
        headers["Content-Length"] = str(size)
        return StreamingResponse(iter_chunks(fileobj), media_type=ctype, headers=headers)
    if span == (-1, -1):
        fileobj.close()
        headers["Content-Range"] = f"bytes */{size}"
        return Response(status_code=416, headers=headers)
    start, stop = span
    fileobj.seek(start)
    headers["Content-Range"] = f"bytes {start}-{stop - 1}/{size}"
    headers["Content-Length"] = str(stop - start)
    body = iter_chunks(fileobj, limit=stop - start)
    return StreamingResponse(body, status_code=206, media_type=ctype, headers=headers)


def byte_range(header: str | None, size: int) -> tuple[int, int] | None:
    """``Range: bytes=a-b`` (one range; what a video or audio element asks to seek) as
    ``(start, stop)``; None to send the whole blob (no header, or one not understood);
    ``(-1, -1)`` when it lies outside the blob (416)."""
    if not header or not header.startswith("bytes=") or "," in header:
        return None
    first, dash, last = header[6:].strip().partition("-")
    if not dash:
        return None
    if first == "":  # "-n": the last n bytes
        if not last.isdigit():
            return None
        n = int(last)
        return (max(0, size - n), size) if n > 0 and size > 0 else (-1, -1)
    if not first.isdigit() or (last and not last.isdigit()):
        return None
    start = int(first)
    stop = min(size, int(last) + 1) if last else size
    if start >= size or stop <= start:
        return (-1, -1)
    return start, stop
