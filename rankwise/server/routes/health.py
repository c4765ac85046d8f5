"""Rank health endpoints: a run's health per rank, its stalls, console and system charts.

``GET /projects/{project}/runs/{run}/health``   state, step rate, lag, slow, stall per rank
``GET .../stalls``                             the watchdog's stall reports with stacks
``GET .../hang``                               the hang report: who waits where, which collective
``GET .../console``                            a page of captured lines (filters, search)
``GET .../system``                             the run's system charts (quantities)
``GET .../system/series``                      one chart: a line per node, GPU or process

Routes are thin: they check parameters, call one ``Store`` method, and encode what it
returns (``rankwise.store.types``); health is ``rankwise.health.assess`` over what the
store keeps, the same function ``RunInfo.health()`` applies to local files, replied as
``rankwise.health.HealthReply``. ``docs/http-api.md`` has the contract.
"""

from __future__ import annotations

from typing import Annotated

import msgspec
from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from ...errors import UsageError
from ...health import DEFAULT_FACTOR, DEFAULT_WINDOW, assess
from ...store.health import quantity
from ...store.health_reads import MAX_LIMIT
from ...store.types import ConsoleQuery
from ...wire.health import (
    ConsolePage,
    HangReply,
    HealthReply,
    StallsReply,
    SystemReply,
    SystemSeriesReply,
)
from ..encoding import ApiError, reply
from .deps import ID_BOUNDS as ID
from .deps import INT64, answers, check_range, found
from .deps import X_BOUNDS as X
from .deps import store as _store

router = APIRouter(tags=["rank health"])
RUN = "/projects/{project}/runs/{run}"


@router.get(RUN + "/health", response_model=None, responses=answers(HealthReply, 404))
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
    got = found(_store(request).health_streams(project, run, window, now), project, run)
    row, streams, at = got
    ranks = assess(streams, now=at, window=window, factor=factor)
    if not stacks:  # the stacks are long: sent only when asked for
        for h in ranks:
            if h.stall is not None:
                h.stall = msgspec.structs.replace(h.stall, stacks=None)
    health = HealthReply(
        state=row.state,
        crashed=list(row.crashed),
        now=at,
        window=window,
        factor=factor,
        median_rate=ranks[0].median_rate if ranks else None,
        ranks=ranks,
    )
    return reply(request, health)


@router.get(RUN + "/hang", response_model=None, responses=answers(HangReply, 404))
def hang(request: Request, project: str, run: str) -> Response:
    """The run's hang report (``RunInfo.hang``, ``rankwise.hang``): the stalled ranks
    grouped by where they wait, the odd ones out first, and the collective the job waits
    in when the ranks recorded flight-recorder entries; null while no rank is stalled."""
    got = found(_store(request).get_run(project, run), project, run)
    return reply(request, HangReply(hang=got.hang))


@router.get(RUN + "/stalls", response_model=None, responses=answers(StallsReply, 404))
def stalls(
    request: Request,
    project: str,
    run: str,
    label: Annotated[list[str] | None, Query(description="repeatable")] = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 100,
) -> Response:
    """The watchdog's stall reports, and the reports that cleared them, newest first."""
    got = found(_store(request).stalls(project, run, label or (), limit), project, run)
    return reply(request, StallsReply(stalls=got))


@router.get(RUN + "/console", response_model=None, responses=answers(ConsolePage, 404, 422))
def console(
    request: Request,
    project: str,
    run: str,
    label: Annotated[list[str] | None, Query(description="stream labels; repeatable")] = None,
    node: Annotated[list[int] | None, Query(description="node indices; repeatable")] = None,
    stream: Annotated[str | None, Query(pattern="^(stdout|stderr)$")] = None,
    q: Annotated[str | None, Query(description="case-insensitive substring")] = None,
    since: Annotated[float | None, Query(alias="from", description="time range start", **X)] = None,
    until: Annotated[float | None, Query(alias="to", description="time range end", **X)] = None,
    offset: Annotated[
        int | None, Query(ge=0, le=INT64, description="index among the matches")
    ] = None,
    after: Annotated[int | None, Query(description="the lines after this line id", **ID)] = None,
    before: Annotated[int | None, Query(description="the lines before this line id", **ID)] = None,
    at: Annotated[float | None, Query(description="the lines from this time on", **X)] = None,
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
    except UsageError as exc:  # the store's argument errors: the fix is the caller's
        raise ApiError(422, str(exc)) from None
    return reply(request, found(page, project, run))


@router.get(RUN + "/system", response_model=None, responses=answers(SystemReply, 404))
def system(request: Request, project: str, run: str) -> Response:
    """The run's system charts: one per quantity (GPU indices folded into the lines)."""
    keys = found(_store(request).system_keys(project, run), project, run)
    return reply(request, SystemReply(keys=sorted({quantity(k)[0] for k in keys})))


@router.get(RUN + "/system/series", response_model=None, responses=answers(SystemSeriesReply, 404))
def system_series(
    request: Request,
    project: str,
    run: str,
    key: Annotated[str, Query(min_length=1, description="a chart from /system")],
    lo: Annotated[float | None, Query(alias="from", description="time range start", **X)] = None,
    hi: Annotated[float | None, Query(alias="to", description="time range end", **X)] = None,
    max_points: Annotated[int, Query(ge=2, le=100_000)] = 2000,
) -> Response:
    """One system chart: a line per node, GPU or recording process, x = time (M4)."""
    check_range(lo, hi)
    got = _store(request).system_series(project, run, key, lo=lo, hi=hi, max_points=max_points)
    return reply(request, SystemSeriesReply(key=key, series=found(got, project, run)))
