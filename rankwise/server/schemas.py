"""Pydantic shapes of the HTTP API: request bodies, errors and the chart replies.

Runs, streams, rank health, console pages, system series, stalls and saved views are
replied as the read model's msgspec structs and documented from them
(``rankwise.server.openapi``); what remains here is what FastAPI validates (request
bodies) and the chart columns (series, band, compare), which routes still shape as
dicts (``charts``). ``docs/http-api.md`` is the prose version of the same contract.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, StringConstraints

from .. import names

XAxis = Literal["step", "time"]
RunState = Literal["running", "finished", "failed", "killed", "crashed"]


class ErrorDetail(BaseModel):
    status: int
    message: str
    acked_seq: int | None = Field(None, description="409 only: the stream's mark")
    missing_blobs: list[str] | None = Field(
        None, description="409 of an ingest only: blobs to upload before resending"
    )
    request_id: str | None = Field(None, description="names this request in the server's log")


class ErrorReply(BaseModel):
    error: ErrorDetail


class AckReply(BaseModel):
    acked_seq: int = Field(description="highest seq the server holds for the stream, -1: none")


class MetricsReply(BaseModel):
    keys: list[str]


class NonFinite(BaseModel):
    x: list[float]
    value: list[Literal["NaN", "Infinity", "-Infinity"]]


class Series(BaseModel):
    label: str
    x: list[float]
    y: list[float | None]
    downsampled: bool
    nonfinite: NonFinite = Field(
        description="the points whose value is NaN or ±Inf (null in JSON's y), spelled out"
    )


class Band(BaseModel):
    x: list[float]
    n: list[int]
    mean: list[float | None]
    wmean: list[float | None]
    min: list[float | None]
    max: list[float | None]
    std: list[float | None]
    downsampled: bool
    step: list[int] = Field(description="each point's step (its x when x=step)")
    nw: list[int] = Field(description="how many of the n values carried a weight")
    partial: list[bool] = Field(
        description="true where not every live rank has reached the step yet: the mean "
        "there averages only the ranks that got there first"
    )
    complete_step: int | None = Field(
        description="the last step every live rank has reached; null when none is running"
    )
    nan: list[int] = Field(
        description="NaN values at each point's step, left out of n, mean, min and max; "
        "where n is 0 every value there was non-finite (mean, min and max are null). "
        "Downsampling keeps, per bucket, the steps with the most of each kind"
    )
    posinf: list[int] = Field(description="+Inf values at each point's step (as nan)")
    neginf: list[int] = Field(description="-Inf values at each point's step (as nan)")


class SeriesReply(BaseModel):
    key: str
    x: XAxis
    series: list[Series]
    band: Band | None


class HistoryReply(BaseModel):
    rows: list[dict[str, Any]]


_ID = names.ID_CHARS_PATTERN[1:-1]
RunRef = Annotated[str, StringConstraints(pattern=f"^{_ID}/{_ID}$")]
STREAMS_PATTERN = f"^(?:all|none|{_ID}(?:,{_ID})*)$"


class CompareRequest(BaseModel):
    runs: list[RunRef] = Field(min_length=1, description='"project/run" ids')
    key: str = Field(min_length=1, max_length=names.KEY_MAX, pattern=names.KEY_PATTERN)
    x: XAxis = "step"
    from_: float | None = Field(None, alias="from")
    to: float | None = None
    max_points: int = Field(2000, ge=2, le=100_000)
    streams: str = Field(
        "all", description="all, none, or comma-separated labels", pattern=STREAMS_PATTERN
    )
    band: bool = True


class CompareRun(BaseModel):
    project: str
    run: str
    series: list[Series]
    band: Band | None


class CompareReply(BaseModel):
    key: str
    x: XAxis
    runs: list[CompareRun]
