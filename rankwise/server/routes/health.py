"""Rank health endpoints: a run's health per rank, its stalls, console and system charts.

``GET /projects/{project}/runs/{run}/health``   state, step rate, lag, slow, stall per rank
``GET .../stalls``                             the watchdog's stall reports with stacks
``GET .../console``                            a page of captured lines (filters, search)
``GET .../system``                             the run's system charts (quantities)
``GET .../system/series``                      one chart: a line per node, GPU or process

Routes are thin: they check parameters, call one ``Store`` method, and shape the reply
(health is ``rankwise.health.assess`` over what the store keeps, the same function
``RunInfo.health()`` applies to local files). ``docs/http-api.md`` has the contract.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, Field
from starlette.responses import Response

from ...health import DEFAULT_FACTOR, DEFAULT_WINDOW, RankHealth, assess
from ...store.base import Store
from ...store.health import ConsoleQuery, quantity
from ...store.health_reads import MAX_LIMIT
from ..encoding import ApiError, reply
from ..schemas import ErrorReply

router = APIRouter(tags=["rank health"])
_404 = {404: {"model": ErrorReply, "description": "unknown project or run"}}
RUN = "/projects/{project}/runs/{run}"


def _store(request: Request) -> Store:
    return request.app.state.store  # type: ignore[no-any-return]


def _found(value: Any, project: str, run: str) -> Any:
    if value is None:
        raise ApiError(404, f"no run {run!r} in project {project!r}")
    return value


# -- replies (documentation for the OpenAPI spec; routes encode with msgspec) ---------------


class Stall(BaseModel):
    where: str = Field(description='e.g. "all_reduce at train.py:88"')
    since: float | None = Field(description="when logging stopped (Unix seconds)")
    seconds: float | None = Field(description="how long it has been stalled")
    stacks: dict[str, str] | None = Field(None, description="per thread; with stacks=true")


class Rank(BaseModel):
    label: str
    rank: int
    node: int
    host: str
    state: str
    last_step: int
    last_seen: float | None
    step_rate: float | None = Field(description="steps per second over the window")
    lag_steps: float = Field(description="steps behind the median rank (negative: ahead)")
    lag_seconds: float | None
    slow: bool = Field(description="slower than the median rate by the factor")
    stalled: bool
    stall: Stall | None
    message: str = Field(description='e.g. "rank 5 stalled for 7 min in all_reduce at ..."')


class HealthReply(BaseModel):
    state: str
    crashed: list[str]
    now: float = Field(description="the time assessed at")
    window: float
    factor: float
    median_rate: float | None
    ranks: list[Rank]


class StallEvent(BaseModel):
    label: str
    incarnation: int
    rank: int
    time: float
    idle_seconds: float
    where: str
    cleared: bool
    stacks: dict[str, str]
    step: int | None = Field(
        None, description="the rank's step when the stall began (report) or ended (clear)"
    )


class StallsReply(BaseModel):
    stalls: list[StallEvent]


class ConsoleLine(BaseModel):
    id: int = Field(description="a cursor for after= / before=")
    label: str
    rank: int
    node: int
    stream: str = Field(description="stdout or stderr")
    time: float
    text: str = Field(description="as printed, ANSI escapes kept")


class ConsoleReply(BaseModel):
    lines: list[ConsoleLine] = Field(description="in time order")
    total: int | None = Field(description="lines matching the filters (count=true)")
    offset: int | None = Field(description="index of lines[0] among them (count=true)")


class SystemReply(BaseModel):
    keys: list[str] = Field(description="one per chart: node/cpu_percent, gpu/util_percent, ...")


class SystemLine(BaseModel):
    key: str = Field(description="the sampled key, e.g. gpu/3/util_percent")
    name: str = Field(description='"node 0", "node 0 · gpu 3" or "rank 5"')
    label: str
    rank: int
    node: int
    host: str
    gpu: int | None
    x: list[float] = Field(description="times (Unix seconds)")
    y: list[float | None]
    downsampled: bool


class SystemSeriesReply(BaseModel):
    key: str
    series: list[SystemLine]


# -- routes --------------------------------------------------------------------------------


def _rank(h: RankHealth, host: str, last_seen: float | None, stacks: bool) -> dict[str, Any]:
    stall: dict[str, Any] | None = None
    if h.stalled:
        stall = {"where": h.stall_where, "since": h.stall_since, "seconds": h.stall_seconds}
        if stacks:
            stall["stacks"] = h.stacks
    return {
        "label": h.label,
        "rank": h.rank,
        "node": h.node,
        "host": host,
        "state": h.state,
        "last_step": h.last_step,
        "last_seen": last_seen,
        "step_rate": h.step_rate,
        "lag_steps": h.lag_steps,
        "lag_seconds": h.lag_seconds,
        "slow": h.slow,
        "stalled": h.stalled,
        "stall": stall,
        "message": h.describe(),
    }


@router.get(RUN + "/health", response_model=HealthReply, responses=_404)  # type: ignore[arg-type]
def health(
    request: Request,
    project: str,
    run: str,
    window: Annotated[float, Query(gt=0, description="seconds of the step-rate window")] = (
        DEFAULT_WINDOW
    ),
    factor: Annotated[float, Query(ge=1, description="slow: this much below the median")] = (
        DEFAULT_FACTOR
    ),
    now: Annotated[float | None, Query(description="assess at this time")] = None,
    stacks: Annotated[bool, Query(description="include the stalled ranks' stacks")] = False,
) -> Response:
    """Each rank's (latest stream's) state, step rate, lag and stall, as ``RunInfo.health()``."""
    got = _found(_store(request).health_streams(project, run, window, now), project, run)
    row, streams, at = got
    ranks = assess(streams, now=at, window=window, factor=factor)
    latest = {}
    for s in row.streams:  # sorted by label then incarnation: the latest wins
        latest[s.key.label] = s
    out = []
    for h in ranks:
        s = latest[h.label]
        out.append(_rank(h, s.start.host if s.start else "", s.last_time, stacks))
    return reply(
        request,
        {
            "state": row.state,
            "crashed": list(row.crashed),
            "now": at,
            "window": window,
            "factor": factor,
            "median_rate": ranks[0].median_rate if ranks else None,
            "ranks": out,
        },
    )


@router.get(RUN + "/stalls", response_model=StallsReply, responses=_404)  # type: ignore[arg-type]
def stalls(
    request: Request,
    project: str,
    run: str,
    label: Annotated[list[str] | None, Query(description="repeatable")] = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 100,
) -> Response:
    """The watchdog's stall reports, and the reports that cleared them, newest first."""
    got = _found(_store(request).stalls(project, run, label or (), limit), project, run)
    return reply(request, {"stalls": [asdict(e) for e in got]})


@router.get(RUN + "/console", response_model=ConsoleReply, responses=_404)  # type: ignore[arg-type]
def console(
    request: Request,
    project: str,
    run: str,
    label: Annotated[list[str] | None, Query(description="stream labels; repeatable")] = None,
    node: Annotated[list[int] | None, Query(description="node indices; repeatable")] = None,
    stream: Annotated[str | None, Query(pattern="^(stdout|stderr)$")] = None,
    q: Annotated[str | None, Query(description="case-insensitive substring")] = None,
    since: Annotated[float | None, Query(alias="from", description="time range start")] = None,
    until: Annotated[float | None, Query(alias="to", description="time range end")] = None,
    offset: Annotated[int | None, Query(ge=0, description="index among the matches")] = None,
    after: Annotated[int | None, Query(description="the lines after this line id")] = None,
    before: Annotated[int | None, Query(description="the lines before this line id")] = None,
    at: Annotated[float | None, Query(description="the lines from this time on")] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = 200,
    count: Annotated[bool, Query(description="compute total and offset")] = True,
) -> Response:
    """A page of the run's console lines in time order: with no position, the newest."""
    query = ConsoleQuery(
        labels=label or (),
        nodes=node or (),
        stream=stream,
        q=q or None,
        since=since,
        until=until,
        offset=offset,
        after=after,
        before=before,
        at=at,
        limit=limit,
        count=count,
    )
    try:
        page = _store(request).console(project, run, query)
    except ValueError as exc:
        raise ApiError(422, str(exc)) from None
    page = _found(page, project, run)
    return reply(
        request,
        {"lines": [asdict(ln) for ln in page.lines], "total": page.total, "offset": page.offset},
    )


@router.get(RUN + "/system", response_model=SystemReply, responses=_404)  # type: ignore[arg-type]
def system(request: Request, project: str, run: str) -> Response:
    """The run's system charts: one per quantity (GPU indices folded into the lines)."""
    keys = _found(_store(request).system_keys(project, run), project, run)
    return reply(request, {"keys": sorted({quantity(k)[0] for k in keys})})


@router.get(RUN + "/system/series", response_model=SystemSeriesReply, responses=_404)  # type: ignore[arg-type]
def system_series(
    request: Request,
    project: str,
    run: str,
    key: Annotated[str, Query(min_length=1, description="a chart from /system")],
    lo: Annotated[float | None, Query(alias="from", description="time range start")] = None,
    hi: Annotated[float | None, Query(alias="to", description="time range end")] = None,
    max_points: Annotated[int, Query(ge=2, le=100_000)] = 2000,
) -> Response:
    """One system chart: a line per node, GPU or recording process, x = time (M4)."""
    if lo is not None and hi is not None and lo > hi:
        raise ApiError(422, f"from={lo} is above to={hi}: pass from <= to")
    got = _store(request).system_series(project, run, key, lo=lo, hi=hi, max_points=max_points)
    lines = _found(got, project, run)
    return reply(request, {"key": key, "series": [asdict(s) for s in lines]})
