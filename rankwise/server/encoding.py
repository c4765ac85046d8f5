"""Replies as JSON or MessagePack, and every error as ``{"error": {...}}``.

JSON cannot carry NaN or ±Inf: they become ``null`` (a gap in a chart). A client that
needs them exact asks for MessagePack with ``Accept: application/msgpack``; the same
objects are encoded either way, so the two never disagree on anything else.
"""

from __future__ import annotations

from typing import Any

import msgspec
from starlette.requests import Request
from starlette.responses import Response

MSGPACK = "application/msgpack"
_MSGPACK_TYPES = (MSGPACK, "application/x-msgpack", "application/vnd.msgpack")

_json = msgspec.json.Encoder()
_msgpack = msgspec.msgpack.Encoder()


def wants_msgpack(request: Request) -> bool:
    accept = request.headers.get("accept", "")
    return any(t in accept for t in _MSGPACK_TYPES)


def reply(request: Request, body: Any, status: int = 200) -> Response:
    """``body`` (dicts, lists, numbers, strings) in the format the client asked for."""
    if wants_msgpack(request):
        return Response(_msgpack.encode(body), status_code=status, media_type=MSGPACK)
    return Response(_json.encode(body), status_code=status, media_type="application/json")


def error_reply(request: Request, status: int, message: str, **extra: Any) -> Response:
    """The one error shape: ``{"error": {"status": 404, "message": "...", ...extra}}``."""
    request_id = getattr(request.state, "request_id", None)
    if request_id is not None:  # set by the hardening middleware; names the server's log line
        extra.setdefault("request_id", request_id)
    return reply(request, {"error": {"status": status, "message": message, **extra}}, status)


def error_body(status: int, message: str, **extra: Any) -> bytes:
    """``error_reply``'s JSON body, for layers below the app (the hardening middleware)."""
    return _json.encode({"error": {"status": status, "message": message, **extra}})


class ApiError(Exception):
    """Raised by a route to answer with an error; ``extra`` joins the error object."""

    def __init__(self, status: int, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.extra = extra
