"""The ingest endpoints: ``POST /api/v1/ingest`` and ``GET /api/v1/ack``.

One upload is one stream's bytes in the stream format (``MAGIC`` + whole frames),
optionally compressed. ``ingest`` reads in one order: admit (``pacing.Admission``, 429 with
``Retry-After``), read the body (413, 408), decode and check it whole (``server.upload``:
its ``UploadRefused`` is the answer), commit the records above the mark (the group
commit; 403, 409, or 503 with ``Retry-After`` when the store cannot write), reply with
the new mark. Nothing of a refused upload is applied; the uploader resends its frames.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import re
import time
from collections.abc import Callable, Coroutine
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.routing import APIRoute
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from ... import names
from ...store.base import Store
from ...stream import records as R
from ...stream import wire
from ...stream.identity import StreamId
from ...wire.envelopes import AckReply
from .. import auth
from ..bodies import decode_body, read_body, sender
from ..encoding import ApiError, error_reply, reply
from ..group_commit import GroupCommit, store_unavailable
from ..pacing import Admission, Pacer, Refusal
from ..upload import Blobs, Limits, check_body, refusal_of
from .deps import Responses, answers, refusal
from .deps import blobs as _blobs
from .deps import store as _store

ID_PATTERN = names.ID_CHARS_PATTERN  # the full rule is checked before routing
_logger = logging.getLogger("rankwise.server")
_ID = re.compile(ID_PATTERN.removeprefix("^").removesuffix("$"))


class _LeanRoute(APIRoute):
    """A route whose busiest request skips FastAPI's dependency solving.

    Solving the declared dependencies (the ``ingest`` policy, ``authenticate`` and its two
    security schemes, the stream's four query parameters) cost an upload about a tenth
    of a server's CPU (``bench_ingest_request.py``). An upload whose cached bearer token
    is allowed to upload to the project, with each query parameter present once and
    plainly valid, is answered directly; every other request (a miss, a session, auth
    off, a bad or repeated parameter, a refused token) goes through the declared
    dependencies, so its answer is theirs. The schema is the declared one.
    """

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        declared = super().get_route_handler()
        endpoint = self.endpoint
        if not inspect.iscoroutinefunction(endpoint):  # GET /ack: a thread, as declared
            return declared

        async def handler(request: Request) -> Response:
            key = _plain_key(request)
            if key is None or not await _may_upload(request, key.project):
                return await declared(request)
            response: Response = await endpoint(request, key)
            return response

        return handler


def _plain_key(request: Request) -> StreamId | None:
    q = request.query_params
    got: list[str] = []
    for name in ("project", "run", "label", "incarnation"):
        values = q.getlist(name)
        if len(values) != 1:
            return None
        got.append(values[0])
    project, run, label, incarnation = got
    if not all(_ID.fullmatch(v) for v in (project, run, label)):
        return None
    if not (incarnation.isascii() and incarnation.isdigit() and len(incarnation) < 19):
        return None
    return StreamId(project, run, label, int(incarnation))


async def _may_upload(request: Request, project: str) -> bool:
    who = await auth.cached_bearer(request)
    return who is not None and who.role in auth.UPLOAD_ROLES and who.allows(project)


router = APIRouter(tags=["ingest"], route_class=_LeanRoute)


async def stream_key(
    project: Annotated[str, Query(pattern=ID_PATTERN)],
    run: Annotated[str, Query(pattern=ID_PATTERN)],
    label: Annotated[str, Query(pattern=ID_PATTERN)],
    incarnation: Annotated[int, Query(ge=0)],
) -> StreamId:
    """(``async``: a plain ``def`` dependency costs every upload a worker-thread hop.)"""
    return StreamId(project, run, label, incarnation)


Key = Annotated[StreamId, Depends(stream_key)]


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
    410: refusal(
        "the run was deleted (in the trash, or purged): no more of its records are taken "
        "(error.deleted is true); the SDK warns once and stops uploading it"
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
        "content": {wire.STREAM_CONTENT_TYPE: {"schema": {"type": "string", "format": "binary"}}},
    }
}


@router.post(
    "/ingest", response_model=None, responses={**answers(AckReply), **_ERRORS}, openapi_extra=_BODY
)
async def ingest(request: Request, key: Key) -> Response:
    """Apply the records of one stream above its mark; replies with the new mark."""
    state, settings = request.app.state, request.app.state.settings
    admission: Admission = state.admission
    commit: GroupCommit = state.group_commit
    pacer: Pacer = state.pacer
    raw = await admitted_body(request)
    if isinstance(raw, Response):
        return raw
    limit = settings.max_body_bytes
    admission.inflight += 1
    try:
        started = time.monotonic()  # what the pacer weighs: this process's own time
        limits = Limits(settings.max_keys_per_run, settings.max_table_cells)
        try:  # decode -> check -> commit; CPU work in threads, never on the event loop
            encoding = request.headers.get("content-encoding", "")
            acked, fresh = await run_in_threadpool(
                _decode_and_check, raw, encoding, limit, _store(request), key, limits,
                _blobs(request),
            )  # fmt: skip
            if fresh:  # waits for its group-commit batch without holding a thread
                secret = request.headers.get(wire.STREAM_KEY_HEADER)
                acked = await asyncio.wrap_future(commit.submit(key, fresh, secret))
        except Exception as exc:
            refused_upload = refusal_of(key, exc)
            if refused_upload is not None:
                status, message = refused_upload.status, refused_upload.message
                raise ApiError(status, message, **refused_upload.extra) from None
            if not store_unavailable(exc):
                raise
            _logger.warning("ingest of %s refused: the store cannot write (%r)", key, exc)
            # Not paced: Retry-After says when to come back.
            return _retry_later(request, admission.unavailable())
        pacer.observe(time.monotonic() - started)
        return _paced(pacer, reply(request, AckReply(acked_seq=acked)))
    finally:
        admission.inflight -= 1


async def admitted_body(request: Request) -> bytes | Response:
    """An upload's raw body, once admitted (``pacing.Admission``) and read within the
    server's limits (413, 408); or the 429 to answer now."""
    state, settings = request.app.state, request.app.state.settings
    admission: Admission = state.admission
    pacer: Pacer = state.pacer
    pacer.start_probe()  # once per process, on the event loop
    refused = admission.admit(admission.inflight, state.group_commit.expected_wait())
    if refused is not None:
        return _paced(pacer, _retry_later(request, refused))
    who = sender(request)
    refused = admission.receive(who)
    if refused is not None:
        return _retry_later(request, refused)
    try:
        return await read_body(request, settings.max_body_bytes, settings.body_deadline)
    finally:
        admission.received(who)


def _decode_and_check(
    raw: bytes, encoding: str, limit: int, store: Store, key: StreamId, limits: Limits,
    blobs: Blobs | None,
) -> tuple[int, list[R.AnyRecord]]:  # fmt: skip
    """Undo the body's encoding and check it, in one worker-thread hop (each hop costs
    an upload about as much as decompressing it)."""
    data = decode_body(raw, encoding, limit) if encoding else raw
    return check_body(store, key, data, limits, blobs)


def _paced(pacer: Pacer, response: Response) -> Response:
    """``response`` with the upload interval this process advises, if any."""
    value = pacer.header()
    if value is not None:
        response.headers[wire.UPLOAD_INTERVAL_HEADER] = value
    return response


def _retry_later(request: Request, refused: Refusal) -> Response:
    seconds = refused.retry_after
    response = error_reply(request, refused.status, refused.message, retry_after=seconds)
    response.headers[wire.RETRY_AFTER_HEADER] = str(seconds)
    return response
