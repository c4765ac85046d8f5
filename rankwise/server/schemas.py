"""Shapes of the HTTP API, for the OpenAPI spec at ``/api/openapi.json``.

Routes encode their replies with msgspec (``encoding.reply``) so that MessagePack and
JSON carry the same objects; these pydantic models document those objects and validate
request bodies. ``docs/http-api.md`` is the prose version of the same contract.
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
    request_id: str | None = Field(None, description="names this request in the server's log")


class ErrorReply(BaseModel):
    error: ErrorDetail


class AckReply(BaseModel):
    acked_seq: int = Field(description="highest seq the server holds for the stream, -1: none")


class Project(BaseModel):
    name: str
    runs: int
    updated: float | None


class ProjectsReply(BaseModel):
    projects: list[Project]


class Stream(BaseModel):
    label: str
    incarnation: int
    rank: int
    local_rank: int
    node: int
    host: str
    pid: int
    is_primary: bool
    state: str
    last_step: int
    points: int
    dropped: int
    started: float | None
    last_seen: float | None
    exit_code: int | None
    signal: int | None
    error_type: str | None
    error_message: str | None
    traceback: str | None
    acked_seq: int


class Failure(BaseModel):
    """A stream's failure (``rankwise.failures``)."""

    label: str
    incarnation: int
    rank: int
    node: int
    state: str = Field(description="failed or crashed (killed: in then only)")
    error_type: str | None
    message: str | None
    time: float | None = Field(description="its Finish time; crashed: its last record's")
    exit_code: int | None
    signal: int | None


class FirstFailure(Failure):
    then: list[Failure] = Field(description="the streams that failed after it, by time")


class Unsynced(BaseModel):
    streams: list[str] = Field(description="labels of the crashed streams")
    hosts: list[str] = Field(description="where their files are")
    command: str = Field(description='"rankwise sync <data dir> --server <this server>"')
    message: str


class RunSummary(BaseModel):
    """A run in a list: everything but its streams."""

    project: str
    id: str
    name: str
    group: str | None
    job_type: str | None
    tags: list[str]
    notes: str | None
    run_mode: str | None
    base_id: str | None = Field(description="the id all ranks of the launch agreed on")
    environment: dict[str, Any] = Field(
        description="the primary rank's command (argv list), python, platform, launcher, "
        "rankwise_version and host, as recorded at init()"
    )
    state: str = Field(description="running, finished, failed, killed or crashed")
    crashed: list[str] = Field(description="labels of the crashed streams")
    world_size: int = Field(description="the job's world size")
    num_nodes: int = Field(description="the job's number of nodes")
    run_ranks: int = Field(description="the ranks (stream labels) this run holds")
    run_nodes: int = Field(description="the nodes this run's streams ran on")
    created: float | None
    updated: float | None
    duration: float | None
    steps: int
    n_streams: int
    config: dict[str, Any]
    summary: dict[str, Any] = Field(
        description="the primary rank's summary: its last value of each key, or what it set"
    )
    first_failure: FirstFailure | None = Field(
        None, description="the failed or crashed stream that went first (the cause)"
    )
    unsynced: Unsynced | None = Field(
        None, description="crashed streams that may hold records not yet uploaded"
    )


Spelled = float | Literal["NaN", "Infinity", "-Infinity"] | None


class CrossRankLast(BaseModel):
    step: int = Field(description="the metric's last step every live rank has reached")
    n: int = Field(description="finite values averaged there")
    mean: Spelled = Field(
        description='"NaN", "Infinity" or "-Infinity" when n is 0: every value was that'
    )
    wmean: Spelled = Field(description="weighted where every value had a weight")
    min: Spelled
    max: Spelled
    nan: int = Field(0, description="NaN values at the step, left out of n")
    posinf: int = Field(0, description="+Inf values at the step, left out of n")
    neginf: int = Field(0, description="-Inf values at the step, left out of n")


class Run(RunSummary):
    summary_ranks: dict[str, dict[str, Any]] = Field(
        description="each stream label's own summary: {label: {key: value}} (one run only)"
    )
    summary_cross_rank: dict[str, CrossRankLast] = Field(
        description="per metric, the cross-rank line's last complete value (one run only)"
    )
    streams: list[Stream]


class RunsReply(BaseModel):
    runs: list[Run | RunSummary] = Field(description="with streams when with_streams=true")
    total: int


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
