"""``POST /api/v1/ingest/batch``: several streams' uploads in one request.

At a thousand ranks one upload a second each, the per-request price (HTTP parsing, the
route, admission, a worker-thread hop, the group commit's wake-up) is most of what a
server process spends (``benchmarks/bench_ingest_request.py``). A node's uploader
(``rankwise.sdk.node_upload``) posts the streams of every rank of its node together:
one request carries what eight would have, and each part is answered as ``/ingest``
answers it alone.

* The body is an ``IngestBatch`` (MessagePack; gzip or zstd as ``/ingest``): each part is
  one stream's identity, its secret and ``MAGIC`` + whole frames. At most
  ``MAX_PARTS`` parts, each stream at most once (422 otherwise, nothing applied). What
  the parts add in all is bounded as one upload's is: a part that would take the
  request past ``MAX_LINES`` console lines or ``MAX_SERIES`` series is refused (413).
* The request is admitted, read and bounded as an upload (429, 408, 413, 415); the token
  must be an ingest or admin token. Each part is then checked alone (``check_body``, the
  same checks as ``/ingest``) and its fresh records go to the group commit, so parts of
  one request may land in one transaction with other requests' uploads. A part refused
  (403 a project this token may not upload to or another stream secret, 409 a gap or
  missing blobs, 410, 413, 422) is answered in its own slot of the reply, with the error
  object ``/ingest`` would have sent; the other parts are applied.
* A store that cannot write fails the whole request with 503 + ``Retry-After``: no part's
  mark is reported, and every part is resent (a part already applied is a replay the
  store ignores).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import msgspec
from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from ... import names
from ...store.base import Store
from ...stream import records as R
from ...stream import wire
from ...stream.identity import StreamId
from ...wire.envelopes import BatchReply, ErrorDetail, IngestBatch, PartAck
from ..bodies import decode_body
from ..encoding import ApiError, reply
from ..group_commit import GroupCommit, store_unavailable
from ..pacing import Admission, Pacer
from ..upload import (
    MAX_CONSOLE_LINES_PER_UPLOAD,
    MAX_KEYS_PER_UPLOAD,
    Blobs,
    Limits,
    UploadRefused,
    check_body,
    refusal_of,
)
from .deps import Responses, answers, refusal
from .deps import blobs as _blobs
from .deps import store as _store
from .ingest import _paced, _retry_later, admitted_body

MAX_PARTS = 512  # streams in one request (a node has a few dozen ranks at most)
# What one request may add in all, as one ``/ingest`` upload may (``server.upload``): the
# console lines (each a stored row) and the (stream, metric key) series of its parts.
MAX_LINES = MAX_CONSOLE_LINES_PER_UPLOAD
MAX_SERIES = MAX_KEYS_PER_UPLOAD
_logger = logging.getLogger("rankwise.server")
_DECODER = msgspec.msgpack.Decoder(IngestBatch)

router = APIRouter(tags=["ingest"])

_BODY = {
    "requestBody": {
        "required": True,
        "description": (
            "IngestBatch in MessagePack: {parts: [{project, run, label, incarnation, key, "
            "body}]}, each body MAGIC + whole frames; gzip or zstd allowed"
        ),
        "content": {wire.BATCH_CONTENT_TYPE: {"schema": {"type": "string", "format": "binary"}}},
    }
}
_ERRORS: Responses = {
    403: refusal("this token cannot upload: use an ingest token"),
    408: refusal("the body did not arrive within the server's deadline: resend"),
    413: refusal("body over the server's limit"),
    415: refusal("unknown Content-Encoding"),
    422: refusal(f"not an IngestBatch, over {MAX_PARTS} parts, or a stream twice"),
    429: refusal("the server is behind: retry after Retry-After"),
    503: refusal("the store cannot write: retry after Retry-After (no part was applied)"),
}


@router.post(
    "/ingest/batch",
    response_model=None,
    responses={**answers(BatchReply), **_ERRORS},
    openapi_extra=_BODY,
)
async def ingest_batch(request: Request) -> Response:
    """Apply each part's records above its stream's mark; one answer per part, in order."""
    state, settings = request.app.state, request.app.state.settings
    admission: Admission = state.admission
    commit: GroupCommit = state.group_commit
    pacer: Pacer = state.pacer
    raw = await admitted_body(request)
    if isinstance(raw, Response):
        return raw
    limit = settings.max_body_bytes
    principal = getattr(request.state, "principal", None)
    started = time.monotonic()
    limits = Limits(settings.max_keys_per_run, settings.max_table_cells)
    encoding = request.headers.get("content-encoding", "")
    batch = await run_in_threadpool(_decode, raw, encoding, limit)
    count = len(batch.parts)
    # One request in flight, as the pacer counts requests: its capacity is what this
    # process has shown in requests a second, batches or not.
    admission.inflight += 1
    try:
        checked = await run_in_threadpool(
            _check_parts, batch, principal, _store(request), limits, _blobs(request)
        )
        answers_: list[PartAck | None] = [None] * count
        waits: list[tuple[int, StreamId, asyncio.Future[int]]] = []
        for i, (key, outcome) in enumerate(checked):
            if isinstance(outcome, PartAck):
                answers_[i] = outcome
                continue
            acked, fresh = outcome
            if not fresh:
                answers_[i] = PartAck(acked_seq=acked)
                continue
            fut = commit.submit(key, fresh, batch.parts[i].key)
            waits.append((i, key, asyncio.wrap_future(fut)))
        results = await asyncio.gather(*(w for _, _, w in waits), return_exceptions=True)
        for (i, key, _), result in zip(waits, results, strict=True):
            if isinstance(result, BaseException):
                if not isinstance(result, Exception):
                    raise result
                answers_[i] = _refused_part(key, result)
            else:
                answers_[i] = PartAck(acked_seq=result)
    except _Unavailable as exc:
        _logger.warning("a batch upload was refused: the store cannot write (%r)", exc.cause)
        return _retry_later(request, admission.unavailable())
    finally:
        admission.inflight -= 1
    pacer.observe(time.monotonic() - started)
    parts = [a if a is not None else PartAck() for a in answers_]
    return _paced(pacer, reply(request, BatchReply(parts=parts)))


class _Unavailable(Exception):
    def __init__(self, cause: Exception) -> None:
        super().__init__(cause)
        self.cause = cause


def _decode(raw: bytes, encoding: str, limit: int) -> IngestBatch:
    data = decode_body(raw, encoding, limit) if encoding else raw
    try:
        batch = _DECODER.decode(data)
    except msgspec.DecodeError as exc:
        raise ApiError(422, f"the body is not an IngestBatch in MessagePack: {exc}") from None
    if len(batch.parts) > MAX_PARTS:
        raise ApiError(
            422, f"{len(batch.parts)} parts in one batch: post at most {MAX_PARTS} per request"
        )
    seen: set[tuple[str, str, str, int]] = set()
    for part in batch.parts:
        for what, value in (("project", part.project), ("run", part.run), ("label", part.label)):
            if not names.is_id(value):
                raise ApiError(422, f"a part's {what} is not an id: {names.ID_RULE}")
        if part.incarnation < 0:
            raise ApiError(422, "a part's incarnation must be 0 or more")
        ident = (part.project, part.run, part.label, part.incarnation)
        if ident in seen:
            raise ApiError(
                422,
                f"stream {part.label!r} of run {part.run!r} is in this batch twice: send "
                "each stream once per request",
            )
        seen.add(ident)
    return batch


_Outcome = PartAck | tuple[int, list[R.AnyRecord]]


def _check_parts(
    batch: IngestBatch, principal: Any, store: Store, limits: Limits, blobs: Blobs | None
) -> list[tuple[StreamId, _Outcome]]:
    """Each part checked alone, in one worker-thread hop for the whole request; a part
    that would take the request's console lines or series past what one upload may add
    is refused (413: its uploader sends it in a smaller batch)."""
    out: list[tuple[StreamId, _Outcome]] = []
    lines = series = 0
    keys = [StreamId(p.project, p.run, p.label, p.incarnation) for p in batch.parts]
    allowed = [principal is None or principal.allows(p.project) for p in batch.parts]
    try:  # every part's mark and run state in one read, not one read each
        known = store.upload_states([k for k, ok in zip(keys, allowed, strict=True) if ok])
    except Exception as exc:
        if store_unavailable(exc):
            raise _Unavailable(exc) from None
        raise
    states = iter(known)
    for part, key, ok in zip(batch.parts, keys, allowed, strict=True):
        if not ok:
            refused = UploadRefused(403, f"this token may not access project {part.project!r}")
            out.append((key, _answer(refused)))
            continue
        try:
            acked, fresh = check_body(store, key, part.body, limits, blobs, next(states))
        except Exception as exc:
            out.append((key, _refused_part(key, exc)))
            continue
        n, k = _rows(fresh)
        if lines + n > MAX_LINES or series + k > MAX_SERIES:
            refused = UploadRefused(
                413,
                f"this batch would add more than {MAX_LINES} console lines or {MAX_SERIES} "
                "series in all: send fewer or smaller parts a request",
            )
            out.append((key, _answer(refused)))
            continue
        lines, series = lines + n, series + k
        out.append((key, (acked, fresh)))
    return out


def _rows(records: list[R.AnyRecord]) -> tuple[int, int]:
    """The console lines and distinct metric keys of one part's fresh records."""
    lines, keys = 0, set[str]()
    for rec in records:
        if isinstance(rec, R.Console):
            lines += len(rec.lines)
        elif isinstance(rec, R.Metrics):
            keys.update(rec.values)
    return lines, len(keys)


def _refused_part(key: StreamId, exc: Exception) -> PartAck:
    refused = refusal_of(key, exc)
    if refused is not None:
        return _answer(refused)
    if store_unavailable(exc):
        raise _Unavailable(exc)
    raise exc


def _answer(refused: UploadRefused) -> PartAck:
    extra = {k: v for k, v in refused.extra.items() if k in _DETAIL_FIELDS}
    return PartAck(error=ErrorDetail(status=refused.status, message=refused.message, **extra))


_DETAIL_FIELDS = frozenset(ErrorDetail.__struct_fields__) - {"status", "message", "request_id"}
