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
    # 403 of an ingest: the stream is bound to another secret than the upload presented
    stream_key: bool | None = None
    request_id: str | None = None  # names this request in the server's log


class ErrorReply(msgspec.Struct, kw_only=True):
    error: ErrorDetail


class AckReply(msgspec.Struct, kw_only=True):
    acked_seq: int  # the highest seq the server holds for the stream, -1: none


class BatchPart(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """One stream's upload inside ``POST /api/v1/ingest/batch``: what ``/ingest`` takes as
    its query (the stream), its ``X-Rankwise-Stream-Key`` header (``key``) and its body."""

    project: str
    run: str
    label: str
    incarnation: int
    body: bytes  # MAGIC + whole frames (the stream format), uncompressed
    key: str | None = None  # the stream's secret, as X-Rankwise-Stream-Key carries it


class IngestBatch(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The body of ``POST /api/v1/ingest/batch`` (MessagePack, then gzip or zstd)."""

    parts: list[BatchPart]


class PartAck(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One part's answer: its stream's new mark, or the refusal ``/ingest`` would have
    answered for it alone (``error.status``: 403, 409, 410, 413, 422)."""

    acked_seq: int | None = None
    error: ErrorDetail | None = None


class BatchReply(msgspec.Struct, kw_only=True):
    parts: list[PartAck]  # in the order of the request's parts
