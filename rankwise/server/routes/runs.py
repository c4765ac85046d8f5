"""The read endpoints: projects, runs, one run, metric keys, series, heatmap, history,
compare.

Routes are thin: they check parameters, call one ``Store`` method, and encode what it
returns: runs are ``rankwise.wire.runs.RunInfo`` as the store folded them, chart columns
``rankwise.wire.charts.Series`` and ``Band``. They are plain ``def`` functions, so the
(blocking) store calls run in the server's thread pool and never stall the event loop.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any

import msgspec
from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from ... import names
from ...errors import UsageError
from ...read.fold import unsynced
from ...read.summary import complete_step as _complete
from ...store.base import RunQuery, Store
from ...store.heatmap_reads import MAX_BUCKETS, MAX_ROWS
from ...stream.records import STATES
from ...wire.charts import Band, CompareReply, CompareRun, Series, SeriesReply, XAxis
from ...wire.heatmap import HeatmapReply
from ...wire.runs import (
    HistoryReply,
    MetricsReply,
    Project,
    ProjectsReply,
    RunInfo,
    RunsReply,
    spell,
)
from .. import auth
from ..config import ServerSettings
from ..encoding import ApiError, reply, streamed_reply, wants_msgpack
from ..schemas import STREAMS_PATTERN, CompareRequest, RunState
from .deps import XFrom, XTo, answers, check_range, found
from .deps import store as _store

router = APIRouter(tags=["read"])
SORT_PATTERN = r"^-?(created|updated|name|state|steps)$"


def _run_or_404(store: Store, project: str, run: str) -> RunInfo:
    row = store.get_run(project, run)
    if row is None and store.run_gone(project, run) == "deleted":
        raise ApiError(
            404,
            f"run {run!r} of project {project!r} was deleted: it is in the trash "
            "(restore it from the runs page's Trash, or with rankwise restore)",
            deleted=True,
        )
    return found(row, project, run)


@router.get("/projects", response_model=None, responses=answers(ProjectsReply))
def projects(request: Request) -> Response:
    """Every project, with its number of runs and when one was last updated."""
    store = _store(request)
    out = []
    for name in auth.visible(request, store.projects()):
        rows, total = store.list_runs(RunQuery(project=name, sort="-updated", limit=1))
        out.append(Project(name=name, runs=total, updated=rows[0].updated if rows else None))
    return reply(request, ProjectsReply(projects=out))


def _as_sent(request: Request, run: RunInfo, **changes: Any) -> RunInfo:
    """``run`` as this request's reply carries it: the ``rankwise sync`` hint for this
    server, and in JSON the summaries' NaN and ±Inf spelled out (MessagePack keeps them)."""
    changes["unsynced_detail"] = unsynced(run, _sync_server(request))
    if not wants_msgpack(request):
        changes["summary"] = _spelled(run.summary)
        ranks = changes.get("rank_summaries", run.rank_summaries)
        if ranks is not None:
            changes["rank_summaries"] = _spelled(ranks)
        cross = changes.get("cross_rank_summary", run.cross_rank_summary)
        if cross is not None:
            changes["cross_rank_summary"] = {k: v.spelled() for k, v in cross.items()}
    return msgspec.structs.replace(run, **changes)


def _spelled(value: Any) -> Any:
    """A summary (any value a run set, nested) with its non-finite floats spelled out."""
    if isinstance(value, float):
        return spell(value)
    if isinstance(value, dict):
        return {k: _spelled(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_spelled(v) for v in value]
    return value


def complete_step(run: RunInfo) -> int | None:
    """The last step every rank has reached (``rankwise.read.summary.complete_step``: every
    live rank while the run runs). A cross-rank value past it is *partial*: it averages
    only the ranks that got there, so it is not the job's mean."""
    return _complete(run.streams)


@router.get("/projects/{project}/runs", response_model=None, responses=answers(RunsReply, 404))
def runs(
    request: Request,
    project: str,
    group: str | None = None,
    job_type: str | None = None,
    state: Annotated[list[RunState] | None, Query(description="repeatable")] = None,
    tag: Annotated[list[str] | None, Query(description="repeatable; all must match")] = None,
    q: Annotated[str | None, Query(description="substring of the run's name or id")] = None,
    sort: Annotated[str, Query(pattern=SORT_PATTERN)] = "-created",
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0)] = 0,
    with_streams: Annotated[bool, Query(description="include each run's streams")] = False,
) -> Response:
    """One page of a project's runs, filtered and sorted (streams only on request)."""
    for s in state or ():
        if s not in STATES:
            raise ApiError(422, f"query parameter 'state' is not one of {', '.join(STATES)}")
    store = _store(request)
    query = RunQuery(
        project=project,
        group=group,
        job_type=job_type,
        states=tuple(state or ()),
        tags=tuple(tag or ()),
        search=q or None,
        sort=sort,
        limit=limit,
        offset=offset,
    )
    rows, total = store.list_runs(query)
    if total == 0 and project not in store.projects():
        raise ApiError(404, f"no project {project!r}")
    # A run in a list: no per-rank summaries, streams only when asked for.
    lean: dict[str, Any] = {"rank_summaries": None, "cross_rank_summary": None}
    if not with_streams:
        lean["streams"] = []
    out = [_as_sent(request, r, **lean) for r in rows]
    ids = {r.id for r in rows}
    open_alerts = {r: n for (_, r), n in store.open_alert_runs(project).items() if r in ids}
    return reply(request, RunsReply(runs=out, total=total, open_alerts=open_alerts))


@router.get("/projects/{project}/runs/{run}", response_model=None, responses=answers(RunInfo, 404))
def run(
    request: Request,
    project: str,
    run: str,
    summary_ranks: Annotated[
        bool,
        Query(
            description="include each rank's own summary (summary_ranks); false leaves it "
            "out: a 1,024-rank run's reply is then a fifth of the size"
        ),
    ] = True,
) -> Response:
    """One run: metadata, state, config, summary and every stream with its rank identity."""
    store = _store(request)
    row = _run_or_404(store, project, run)
    cross = store.cross_rank_last(project, run, complete_step(row))
    if row.defined_metrics:  # each metric's line, as run.define_metric() chose it
        cross = {k: msgspec.structs.replace(v, reduce=row.reduce_of(k)) for k, v in cross.items()}
    changes: dict[str, Any] = {"cross_rank_summary": cross}
    if not summary_ranks:  # the run page's first read: the Config tab asks for them
        changes["rank_summaries"] = None
    return reply(request, _as_sent(request, row, **changes))


def _sync_server(request: Request) -> str | None:
    """This server's URL for a ``rankwise sync`` hint; None under ``rankwise ui``."""
    if request.app.state.settings.tails_dir is not None:
        return None
    return str(request.base_url).rstrip("/")


@router.get(
    "/projects/{project}/runs/{run}/metrics",
    response_model=None,
    responses=answers(MetricsReply, 404),
)
def metrics(request: Request, project: str, run: str) -> Response:
    """The metric keys the run has logged, sorted."""
    store = _store(request)
    keys = store.metric_keys(project, run)
    if not keys:
        _run_or_404(store, project, run)
    return reply(request, MetricsReply(keys=keys))


def _labels(streams: str) -> list[str] | None:
    if streams == "all":
        return None
    if streams == "none":
        return []
    labels = streams.split(",")
    if not all(names.is_id(label) for label in labels):
        raise ApiError(422, "streams must be 'all', 'none' or comma-separated stream labels")
    return labels


def _chart(
    store: Store,
    project: str,
    run: str,
    key: str,
    x: XAxis,
    lo: float | None,
    hi: float | None,
    max_points: int,
    streams: str,
    band: bool,
) -> tuple[list[Series], Band | None]:
    check_range(lo, hi)
    labels = _labels(streams)
    series = []
    if labels != []:
        series = store.series(
            project, run, key, labels=labels, x=x, lo=lo, hi=hi, max_points=max_points
        )
    agg = None
    complete: int | None = None
    if band:
        # The streams are read before the band: a step ingested in between is then marked
        # partial (the cautious side), never quoted as complete while a rank is missing.
        row = _run_or_404(store, project, run)
        complete = complete_step(row)
        agg = store.band(project, run, key, x=x, lo=lo, hi=hi, max_points=max_points)
        agg = msgspec.structs.replace(agg.at_complete(complete), reduce=row.reduce_of(key))
    if not series and (agg is None or not agg.x):
        _run_or_404(store, project, run)  # an unknown run is 404; an unknown key is empty
    return series, agg


@router.get(
    "/projects/{project}/runs/{run}/series",
    response_model=None,
    responses=answers(SeriesReply, 404),
)
def series(
    request: Request,
    project: str,
    run: str,
    key: Annotated[str, Query(min_length=1, description="metric name")],
    x: XAxis = "step",
    lo: XFrom = None,
    hi: XTo = None,
    max_points: Annotated[int, Query(ge=2, le=100_000)] = 2000,
    streams: Annotated[
        str, Query(description="all, none, or comma-separated labels", pattern=STREAMS_PATTERN)
    ] = "all",
    band: bool = True,
) -> Response:
    """Chart columns of one metric: per-stream series and the cross-rank band (M4)."""
    got, agg = _chart(_store(request), project, run, key, x, lo, hi, max_points, streams, band)
    return reply(request, SeriesReply(key=key, x=x, series=got, band=agg))


@router.get(
    "/projects/{project}/runs/{run}/heatmap",
    response_model=None,
    responses=answers(HeatmapReply, 404),
)
def heatmap(
    request: Request,
    project: str,
    run: str,
    key: Annotated[str, Query(min_length=1, description="metric name")],
    x: XAxis = "step",
    lo: XFrom = None,
    hi: XTo = None,
    buckets: Annotated[
        int,
        Query(
            ge=1,
            le=MAX_BUCKETS,
            description="equal x buckets per rank (columns), at most; whole steps on x=step",
        ),
    ] = 500,
    offset: Annotated[int, Query(ge=0, le=1_000_000, description="first rank row")] = 0,
    limit: Annotated[
        int, Query(ge=1, le=MAX_ROWS, description="rank rows per page (offset pages on)")
    ] = MAX_ROWS,
) -> Response:
    """Ranks x x-buckets of one metric: each cell the mean of the rank's finite values in
    the bucket, with the buckets' cross-rank median and each rank's distance from it."""
    check_range(lo, hi)
    try:
        got = _store(request).heatmap(
            project, run, key, x=x, lo=lo, hi=hi, buckets=buckets, offset=offset, limit=limit
        )
    except UsageError as exc:  # the store's argument errors: the fix is the caller's
        raise ApiError(422, str(exc)) from None
    return reply(request, found(got, project, run))


@router.get(
    "/projects/{project}/runs/{run}/history",
    response_model=None,
    responses=answers(HistoryReply, 404),
)
def history(
    request: Request,
    project: str,
    run: str,
    key: Annotated[list[str] | None, Query(description="repeatable")] = None,
    label: str | None = None,
) -> Response:
    """Every logged row (step, time, label, weight, values), as ``Api.history()``."""
    store = _store(request)
    rows = store.history(project, run, keys=key or None, label=label)
    if not rows:
        _run_or_404(store, project, run)
    return reply(request, HistoryReply(rows=rows))


# Points (x values of every series and band) in one compare reply: 64 runs of 8 ranks
# at the dashboard's 2,000 points each, with room to spare.
MAX_COMPARE_POINTS = 2_000_000


def _over_compare_budget() -> ApiError:
    return ApiError(
        413,
        f"this comparison is over {MAX_COMPARE_POINTS} points: compare fewer runs, pick "
        "fewer streams, or ask for fewer max_points",
    )


@router.post("/compare", response_model=None, responses=answers(CompareReply, 404, 413))
def compare(request: Request, body: CompareRequest) -> Response:
    """The same metric of several runs in one request."""
    settings: ServerSettings = request.app.state.settings
    if len(body.runs) > settings.max_compare_runs:
        raise ApiError(422, f"at most {settings.max_compare_runs} runs per compare request")
    if not names.is_key(body.key):
        raise ApiError(422, "body field 'key' is not a valid metric key: " + names.KEY_RULE)
    store = _store(request)
    refs = [ref.partition("/") for ref in dict.fromkeys(body.runs)]  # each run once
    for project, sep, run_id in refs:
        if not sep or not names.is_id(project) or not names.is_id(run_id):
            raise ApiError(422, "runs entries are 'project/run' with valid ids")
    auth.check_projects(request, [p for p, _, _ in refs])  # all or nothing
    # A budget of points for the whole reply, asked for up front from each run's streams
    # (each chosen stream's series and each band count max_points), before a byte is
    # sent; the reply then streams, one run at a time, so it is never whole in memory.
    if len(refs) * body.max_points > MAX_COMPARE_POINTS:  # before any run is read
        raise _over_compare_budget()
    labels = _labels(body.streams)
    planned = 0
    for project, _, run_id in refs:
        row = _run_or_404(store, project, run_id)
        picked = len(row.streams) if labels is None else len(set(labels))
        planned += body.max_points * (picked + (1 if body.band else 0))
        if planned > MAX_COMPARE_POINTS:
            raise _over_compare_budget()

    def runs() -> Iterator[CompareRun]:
        for project, _, run_id in refs:
            got, agg = _chart(
                store,
                project,
                run_id,
                body.key,
                body.x,
                body.from_,
                body.to,
                body.max_points,
                body.streams,
                body.band,
            )
            yield CompareRun(project=project, run=run_id, series=got, band=agg)

    check_range(body.from_, body.to)  # a bad range is a 422 before the reply starts
    return streamed_reply(request, {"key": body.key, "x": body.x}, "runs", len(refs), runs())
