"""Replies as JSON or MessagePack, and every error as ``{"error": {...}}``.

JSON cannot carry NaN or ±Inf: they become ``null`` (a gap in a chart). A client that
needs them exact asks for MessagePack with ``Accept: application/msgpack``; the same
objects are encoded either way, so the two never disagree on anything else.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from typing import Any

import msgspec
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from ..stream.wire import MSGPACK as MSGPACK

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


def streamed_reply(
    request: Request, head: dict[str, Any], field: str, count: int, items: Iterable[Any]
) -> Response:
    """``{**head, field: [...]}`` with the ``count`` values ``items`` yields, each encoded as
    it is made and sent at once: a reply too large to build whole in memory (``/compare``)
    never is. The bytes equal ``reply``'s for the same object."""
    if wants_msgpack(request):
        return StreamingResponse(_msgpack_pieces(head, field, count, items), media_type=MSGPACK)
    return StreamingResponse(_json_pieces(head, field, items), media_type="application/json")


def _json_pieces(head: dict[str, Any], field: str, items: Iterable[Any]) -> Iterator[bytes]:
    opening = _json.encode(head)[:-1]  # '{...' without its closing brace
    yield opening + (b"," if head else b"") + _json.encode(field) + b":["
    for i, item in enumerate(items):
        yield (b"," if i else b"") + _json.encode(item)
    yield b"]}"


def _msgpack_pieces(
    head: dict[str, Any], field: str, count: int, items: Iterable[Any]
) -> Iterator[bytes]:
    size = len(head) + 1
    # A map and an array header (MessagePack: fixmap/map16/map32, fixarray/array16/array32).
    out = bytes([0x80 | size]) if size < 16 else b"\xde" + struct.pack(">H", size)
    for key, value in head.items():
        out += _msgpack.encode(key) + _msgpack.encode(value)
    out += _msgpack.encode(field)
    if count < 16:
        out += bytes([0x90 | count])
    elif count < 1 << 16:
        out += b"\xdc" + struct.pack(">H", count)
    else:
        out += b"\xdd" + struct.pack(">I", count)
    yield out
    for item in items:
        yield _msgpack.encode(item)


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
