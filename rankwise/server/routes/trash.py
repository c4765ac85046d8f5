"""Deleting runs: to the trash and back, purging for good, and the audit log.

* ``POST /projects/{project}/runs/delete`` (delete: a write token of the project or an
  admin): the runs named, or those a filter picks (``runs/search``'s), to the trash, or
  with ``purge`` removed for good; ``dry_run`` only answers which runs and how many.
* ``POST /projects/{project}/runs/restore`` (delete): runs out of the trash.
* ``GET /projects/{project}/trash`` (read): the project's deleted runs, and when each is
  purged by the server's sweep (``ServerSettings.trash_retention_days``).
* ``GET /audit`` (admin): who deleted, restored or purged what, and when.

Under ``rankwise ui`` the run folders follow: a deleted run's folder moves to
``<dir>/.trash/<project>/<run>``, a restored one back, a purged one is removed
(``rankwise.local_trash``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from ... import local_trash as trash_files
from ... import names
from ...errors import UsageError
from ...store.base import Store
from ...wire.trash import (
    AuditReply,
    DeleteReply,
    DeleteRequest,
    RestoreReply,
    RestoreRequest,
    TrashReply,
)
from ..encoding import ApiError, reply
from .deps import answers
from .deps import blobs as _blobs
from .deps import store as _store

write_router = APIRouter(tags=["trash"])
read_router = APIRouter(tags=["trash"])
admin_router = APIRouter(tags=["trash"])

MAX_FILTER_BYTES = 16 * 1024
MAX_PICKED = 10_000  # runs one filter may delete at once


def who_of(request: Request) -> str:
    """The audit log's ``who``: the token's name (or id); ``local`` for ``rankwise ui``."""
    token = getattr(getattr(request.state, "principal", None), "token", None)
    if token is None:
        return "local"
    return str(token.name or token.id)


def _picked(store: Store, project: str, body: DeleteRequest) -> tuple[list[str], str | None]:
    """The run ids a delete names, and the audit target when a filter picked them."""
    if bool(body.runs) == (body.filters is not None):
        raise ApiError(422, "name the runs (runs) or pick them by a filter (filters), not both")
    if body.filters is None:
        for rid in body.runs:
            if not names.is_id(rid):
                raise ApiError(422, f"not a run id: {rid!r}")
        return list(dict.fromkeys(body.runs)), None
    text = json.dumps(body.filters, sort_keys=True)
    if len(text) > MAX_FILTER_BYTES:
        raise ApiError(422, f"a filter takes at most {MAX_FILTER_BYTES} bytes as JSON")
    try:
        rows, total = store.find_runs(project, body.filters, "+created_at", MAX_PICKED, 0)
    except UsageError as exc:
        raise ApiError(422, str(exc)) from None
    if total > MAX_PICKED:
        raise ApiError(
            422,
            f"the filter picks {total} runs, more than {MAX_PICKED} at once: narrow it "
            "(e.g. by created_at) and delete in parts",
        )
    return [r.id for r in rows], f"filter {text}"


@write_router.post(
    "/projects/{project}/runs/delete",
    response_model=None,
    responses=answers(DeleteReply, 404, 422),
)
def delete(request: Request, project: str, body: DeleteRequest) -> Response:
    """Move the runs named (or those ``filters`` picks) to the trash, restorable until the
    server's retention ends; ``purge``: remove them for good, their blobs too where no
    other run or artifact version references them. ``dry_run``: change nothing, answer
    which runs it would be. Unknown or already deleted runs are skipped."""
    store = _store(request)
    ids, target = _picked(store, project, body)
    if body.dry_run or not ids:
        if not body.dry_run:
            return reply(request, DeleteReply(runs=[], count=0, purged=body.purge, dry_run=False))
        # What a real call would do: live runs; a purge takes those in the trash too.
        trashed = {t.id for t in store.trashed_runs(project, 0)} if body.purge else set()
        shown = [r for r in ids if r in trashed or store.get_run(project, r) is not None]
        return reply(
            request, DeleteReply(runs=shown, count=len(shown), purged=body.purge, dry_run=True)
        )
    who = who_of(request)
    root: Path | None = request.app.state.settings.tails_dir
    if body.purge:
        blobs = _blobs(request)
        done = store.purge_runs(project, ids, who, blobs, target)
        if root is not None:
            trash_files.remove(root, project, done)
    else:
        done = store.delete_runs(project, ids, who, target)
        if root is not None:
            trash_files.to_trash(root, project, done)
    return reply(request, DeleteReply(runs=done, count=len(done), purged=body.purge, dry_run=False))


@write_router.post(
    "/projects/{project}/runs/restore",
    response_model=None,
    responses=answers(RestoreReply, 404, 422),
)
def restore(request: Request, project: str, body: RestoreRequest) -> Response:
    """Take runs out of the trash (those not in it are skipped)."""
    store = _store(request)
    done = store.restore_runs(project, body.runs, who_of(request))
    root: Path | None = request.app.state.settings.tails_dir
    if root is not None:
        trash_files.from_trash(root, project, done)
    return reply(request, RestoreReply(restored=done))


@read_router.get(
    "/projects/{project}/trash",
    response_model=None,
    responses=answers(TrashReply, 404),
)
def trash(request: Request, project: str) -> Response:
    """The project's runs in the trash, newest deletion first, each with when the
    server's sweep purges it."""
    days = request.app.state.settings.trash_retention_days
    runs = _store(request).trashed_runs(project, days)
    return reply(request, TrashReply(runs=runs, retention_days=days))


@admin_router.get("/audit", response_model=None, responses=answers(AuditReply))
def audit(
    request: Request,
    project: Annotated[str | None, Query(pattern=names.ID_CHARS_PATTERN)] = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
) -> Response:
    """The audit log, newest first: who deleted, restored or purged which runs, when."""
    return reply(request, AuditReply(entries=_store(request).audit_log(limit, project)))
