"""The envelopes of the HTTP replies whose contents are the read model's structs.

A reply is a struct encoded as it is (``encoding.reply``): a run is
``rankwise.read.model.RunInfo``, a chart's columns ``rankwise.store.types.Series`` and
``Band``, a console page ``rankwise.store.types.ConsolePage``. The few objects that only
wrap those (``{"stalls": [...]}``) are declared here, and ``STRUCTS`` lists every struct
the OpenAPI document describes (``rankwise.server.openapi``). Request bodies, which
FastAPI validates, are pydantic models in ``schemas``.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ..alerting import AlertEvent, DestinationInfo
from ..artifacts.model import (
    ArtifactsReply,
    ArtifactSummary,
    CommitRequest,
    RunArtifacts,
    UseRequest,
    VersionInfo,
    VersionsReply,
)
from ..hang import HangReport
from ..health import HealthReply
from ..read.media_model import HistogramsReply, MediaKeysReply, MediaReply, TableReply
from ..read.model import ProjectsReply, RunInfo, RunsReply
from ..store.types import Band, ConsolePage, SavedView, Series, StallEvent, SystemSeries
from ..wire.manage import STRUCTS as MANAGE_STRUCTS
from .schemas import XAxis


class ErrorDetail(msgspec.Struct, kw_only=True, omit_defaults=True):
    status: int
    message: str
    acked_seq: int | None = None  # 409 only: the stream's mark
    # 409 of an ingest naming blobs the server lacks: upload them, then resend
    missing_blobs: list[str] | None = None
    # 409 of an artifact commit: the chunk digests the server lacks (PUT them, commit again)
    missing: list[str] | None = None
    request_id: str | None = None  # names this request in the server's log


class ErrorReply(msgspec.Struct, kw_only=True):
    error: ErrorDetail


class AckReply(msgspec.Struct, kw_only=True):
    acked_seq: int  # the highest seq the server holds for the stream, -1: none


class MetricsReply(msgspec.Struct, kw_only=True):
    keys: list[str]


class HistoryReply(msgspec.Struct, kw_only=True):
    rows: list[dict[str, Any]]  # step, time, label, weight and the values (NaN: null)


class SeriesReply(msgspec.Struct, kw_only=True):
    """One metric's chart: each stream's series and the cross-rank band."""

    key: str
    x: XAxis
    series: list[Series]
    band: Band | None  # null when band=false


class CompareRun(msgspec.Struct, kw_only=True):
    project: str
    run: str
    series: list[Series]
    band: Band | None


class CompareReply(msgspec.Struct, kw_only=True):
    key: str
    x: XAxis
    runs: list[CompareRun]


class StallsReply(msgspec.Struct, kw_only=True):
    stalls: list[StallEvent]  # newest first


class HangReply(msgspec.Struct, kw_only=True):
    hang: HangReport | None  # null while no rank is stalled (rankwise.hang)


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


class AlertsReply(msgspec.Struct, kw_only=True):
    alerts: list[AlertEvent]  # the run's events, newest first, with their deliveries


class DestinationsReply(msgspec.Struct, kw_only=True):
    destinations: list[DestinationInfo]  # never a secret (Destination.public)


class DeliveryTest(msgspec.Struct, kw_only=True):
    ok: bool
    error: str  # why it failed (the host and the status or error; never a secret)


STRUCTS: tuple[type, ...] = (
    *MANAGE_STRUCTS,
    ErrorReply,
    AlertsReply,
    DestinationsReply,
    DestinationInfo,
    DeliveryTest,
    AckReply,
    MetricsReply,
    HistoryReply,
    SeriesReply,
    CompareReply,
    ProjectsReply,
    RunsReply,
    RunInfo,
    HealthReply,
    StallsReply,
    HangReply,
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
    ArtifactsReply,
    ArtifactSummary,
    VersionsReply,
    VersionInfo,
    RunArtifacts,
    CommitRequest,
    UseRequest,
)
