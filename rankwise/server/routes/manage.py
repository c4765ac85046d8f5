"""Run management routes: edit a run, bulk tags, its edit history, and the runs search.

* ``POST /projects/{project}/runs/{run}/edits`` (writer): change name, tags, notes,
  group or job type; the reply is the run as edited.
* ``POST /projects/{project}/runs/tags`` (writer): add and remove tags on several runs.
* ``GET /projects/{project}/runs/{run}/edits`` (read): the run's edit history.
* ``POST /projects/{project}/runs/search`` (read): W&B's MongoDB-style filters
  (``rankwise.filters``, bounded in depth, conditions and regex length) and ``order``.

Under ``rankwise ui`` an edit is also appended to ``edits.jsonl`` beside the run's
streams (never into them), so ``Api(dir=)`` and a later ``rankwise ui`` see it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import Response

from ... import edits as E
from ... import names
from ...errors import UsageError
from ...store.base import Store
from ...wire.manage import (
    BulkTagsReply,
    BulkTagsRequest,
    EditRequest,
    EditsReply,
    SearchRequest,
)
from ...wire.runs import RunInfo, RunsReply
from ..encoding import ApiError, reply
from .deps import answers, found
from .deps import store as _store

read_router = APIRouter(tags=["manage"])
write_router = APIRouter(tags=["manage"])

MAX_FILTER_BYTES = 16 * 1024  # a filter is a handful of conditions


def _who(request: Request) -> str | None:
    token = getattr(getattr(request.state, "principal", None), "token", None)
    if token is None:
        return None
    return token.name or token.id  # type: ignore[no-any-return]


def _source(request: Request) -> str:
    """``ui`` for the dashboard (a session cookie or the local ``rankwise ui``), else
    ``api`` (a bearer token: ``Api``, scripts, ``rankwise edit --server``)."""
    via = getattr(getattr(request.state, "principal", None), "via", "bearer")
    sent = request.headers.get("x-rankwise-source")
    if sent in ("cli", "api", "ui"):
        return sent
    return "api" if via == "bearer" else "ui"


def _keep(request: Request, store: Store, project: str, run: str, made: list[E.Edit]) -> bool:
    """Keep ``made`` in the store and, under ``rankwise ui``, beside the run's streams."""
    root: Path | None = request.app.state.settings.tails_dir
    if not store.edit_run(project, run, made):
        return False
    if root is not None:
        run_dir = root / project / run
        if run_dir.is_dir():
            E.append_file(run_dir, made)
    return True


def _check_ids(project: str, run: str) -> None:
    if not names.is_id(project) or not names.is_id(run):
        raise ApiError(404, f"no run {run!r} in project {project!r}")


@write_router.post(
    "/projects/{project}/runs/{run}/edits",
    response_model=None,
    responses=answers(RunInfo, 404, 422),
)
def edit(request: Request, project: str, run: str, body: EditRequest) -> Response:
    """Change the run's name, tags (whole list, or tags to add and remove), notes,
    group or job type; kept with the time and who, merged by time with the live run's."""
    _check_ids(project, run)
    store = _store(request)
    current = found(store.get_run(project, run), project, run)
    try:
        fields = E.changes(
            current.tags,
            name=body.name,
            tags=body.tags,
            add_tags=body.add_tags,
            remove_tags=body.remove_tags,
            notes=body.notes,
            group=body.group,
            job_type=body.job_type,
            clear=body.clear,
        )
    except UsageError as exc:
        raise ApiError(422, str(exc)) from None
    made = E.make(fields, _source(request), _who(request))
    if not _keep(request, store, project, run, made):
        raise ApiError(404, f"no run {run!r} in project {project!r}")
    from .runs import _as_sent

    row = found(store.get_run(project, run), project, run)
    return reply(request, _as_sent(request, row, rank_summaries=None))


@write_router.post(
    "/projects/{project}/runs/tags",
    response_model=None,
    responses=answers(BulkTagsReply, 404, 422),
)
def bulk_tags(request: Request, project: str, body: BulkTagsRequest) -> Response:
    """Add and remove tags on a selection of runs (each run edited once, all or none
    checked first: an unknown run is a 404 before any is changed)."""
    if not body.add and not body.remove:
        raise ApiError(422, "pass tags to add or to remove")
    store = _store(request)
    runs: list[RunInfo] = []
    for rid in dict.fromkeys(body.runs):
        _check_ids(project, rid)
        runs.append(found(store.get_run(project, rid), project, rid))
    planned = []
    for r in runs:
        try:
            fields = E.changes(r.tags, add_tags=body.add, remove_tags=body.remove)
        except UsageError as exc:
            raise ApiError(422, str(exc)) from None
        if fields["tags"] != list(r.tags):
            planned.append((r.id, fields))
    edited = []
    for rid, fields in planned:
        if _keep(request, store, project, rid, E.make(fields, _source(request), _who(request))):
            edited.append(rid)
    return reply(request, BulkTagsReply(edited=edited))


@read_router.get(
    "/projects/{project}/runs/{run}/edits",
    response_model=None,
    responses=answers(EditsReply, 404),
)
def edit_history(request: Request, project: str, run: str) -> Response:
    """The run's edits (field, new value, when, from where, by whom), oldest first."""
    got = _store(request).run_edits(project, run)
    return reply(request, EditsReply(edits=found(got, project, run)))


@read_router.post(
    "/projects/{project}/runs/search",
    response_model=None,
    responses=answers(RunsReply, 404, 422),
)
def search(request: Request, project: str, body: SearchRequest) -> Response:
    """One page of the project's runs that W&B's MongoDB-style ``filters`` pick
    (``$and``, ``$or``, ``$eq``, ``$ne``, ``$gt``, ``$gte``, ``$lt``, ``$lte``, ``$in``,
    ``$nin``, ``$regex``, ``$exists``; see docs/filters.md), in ``order``."""
    if len(json.dumps(body.filters)) > MAX_FILTER_BYTES:
        raise ApiError(422, f"a filter takes at most {MAX_FILTER_BYTES} bytes as JSON")
    store = _store(request)
    try:
        rows, total = store.find_runs(project, body.filters, body.order, body.limit, body.offset)
    except UsageError as exc:
        raise ApiError(422, str(exc)) from None
    if total == 0 and project not in store.projects():
        raise ApiError(404, f"no project {project!r}")
    from .runs import _as_sent

    lean: dict[str, Any] = {"rank_summaries": None, "cross_rank_summary": None}
    if not body.with_streams:
        lean["streams"] = []
    out = [_as_sent(request, r, **lean) for r in rows]
    ids = {r.id for r in rows}
    open_alerts = {r: n for (_, r), n in store.open_alert_runs(project).items() if r in ids}
    return reply(request, RunsReply(runs=out, total=total, open_alerts=open_alerts))
