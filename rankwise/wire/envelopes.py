"""The replies that only wrap or acknowledge: the one error shape every refusal has,
and the ingest acknowledgement.

Everything the server sends is a struct of ``rankwise.wire`` encoded as it is
(``rankwise.server.encoding.reply``); ``rankwise.server.openapi.STRUCTS`` lists those the
OpenAPI document describes. Request bodies that FastAPI validates are pydantic models in
``rankwise.server.schemas`` and ``rankwise.server.routes.login``.
"""

from __future__ import annotations

import msgspec


class ErrorDetail(msgspec.Struct, kw_only=True, omit_defaults=True):
    status: int
    message: str
    acked_seq: int | None = None  # 409 only: the stream's mark
    # 409 of an ingest naming blobs the server lacks: upload them, then resend
    missing_blobs: list[str] | None = None
    # 409 of an artifact commit: the chunk digests the server lacks (PUT them, commit again)
    missing: list[str] | None = None
    # 410 of an ingest, 404 of a run read: the run was deleted (in the trash, or purged)
    deleted: bool | None = None
    request_id: str | None = None  # names this request in the server's log


class ErrorReply(msgspec.Struct, kw_only=True):
    error: ErrorDetail


class AckReply(msgspec.Struct, kw_only=True):
    acked_seq: int  # the highest seq the server holds for the stream, -1: none
