"""The envelopes of the HTTP replies whose contents are the read model's structs.

A reply is a struct encoded as it is (``encoding.reply``): a run is
``rankwise.read.model.RunInfo``, a console page ``rankwise.store.types.ConsolePage``.
The few objects that only wrap those (``{"stalls": [...]}``) are declared here, and
``STRUCTS`` lists every struct the OpenAPI document describes (``rankwise.server.openapi``).
The chart replies (series, band, compare) and request bodies are still pydantic models
in ``schemas``.
"""

from __future__ import annotations

import msgspec

from ..read.media_model import HistogramsReply, MediaKeysReply, MediaReply, TableReply
from ..read.model import HealthReply, ProjectsReply, RunInfo, RunsReply
from ..store.types import ConsolePage, SavedView, StallEvent, SystemSeries


class ErrorDetail(msgspec.Struct, kw_only=True, omit_defaults=True):
    status: int
    message: str
    acked_seq: int | None = None  # 409 only: the stream's mark
    # 409 of an ingest naming blobs the server lacks: upload them, then resend
    missing_blobs: list[str] | None = None
    request_id: str | None = None  # names this request in the server's log


class ErrorReply(msgspec.Struct, kw_only=True):
    error: ErrorDetail


class StallsReply(msgspec.Struct, kw_only=True):
    stalls: list[StallEvent]  # newest first


class SystemReply(msgspec.Struct, kw_only=True):
    keys: list[str]  # one per chart: node/cpu_percent, gpu/util_percent, ...


class SystemSeriesReply(msgspec.Struct, kw_only=True):
    key: str
    series: list[SystemSeries]


class BlobsMissing(msgspec.Struct, kw_only=True):
    missing: list[str]  # the digests asked about that the server does not hold
    # the largest blob a PUT may store: a client skips (declares lost) a bigger file
    # instead of sending bytes that would be cut off with 413
    max_blob_bytes: int


class BlobsLost(msgspec.Struct, kw_only=True):
    lost: list[str]  # the digests now declared lost (those the server did not hold)


class BlobPut(msgspec.Struct, kw_only=True):
    digest: str
    size: int  # bytes received
    stored: bool  # False: the server held this blob already (HTTP 200 instead of 201)


class ViewsReply(msgspec.Struct, kw_only=True):
    views: list[SavedView]


STRUCTS: tuple[type, ...] = (
    ErrorReply,
    ProjectsReply,
    RunsReply,
    RunInfo,
    HealthReply,
    StallsReply,
    ConsolePage,
    SystemReply,
    SystemSeriesReply,
    ViewsReply,
    SavedView,
    MediaKeysReply,
    MediaReply,
    HistogramsReply,
    TableReply,
    BlobsMissing,
    BlobsLost,
    BlobPut,
)
