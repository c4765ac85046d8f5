"""Reports: ``/projects/{project}/reports`` and ``/projects/{project}/reports/{name}``.

A report is a titled page of Markdown text and live panels (``rankwise.wire.reports``),
stored by the server; every save is a version, the newest is the report, older ones are
read with ``?version=N``. Anyone who may read the project (a read token, a logged-in
reader) opens a report; only the project's writers save or delete one: a write token of
the project (or a dashboard session logged in with one) or an admin token (it covers
every project); the local ``rankwise ui`` (no authentication) acts as admin. An ingest
token neither reads nor edits reports. A save names
the version it was edited from (``base``); if another save came first it is refused with
409 instead of silently undoing that one.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query, Request
from pydantic import BaseModel, ConfigDict, Field
from starlette.responses import Response

from ... import names
from ...errors import UsageError
from ...names import ID_PATTERN
from ...store.reports import (
    MAX_BLOCKS,
    MAX_CAPTION,
    MAX_METRICS,
    MAX_NAME,
    MAX_RUNS,
    MAX_TEXT,
    MAX_TITLE,
    ReportConflictError,
    check_report,
)
from ...wire.reports import Report, ReportsReply, ReportVersionsReply
from ..auth import Principal, may_write
from ..encoding import ApiError, reply
from .deps import answers
from .deps import store as _store

router = APIRouter(tags=["reports"])

# The parameter is ``report``, not ``name``: the hardening middleware documents ``name``
# with the key rule, while every path segment follows the id rule (it enforces that).
PATH = "/projects/{project}/reports/{report}"
ReportName = Annotated[
    str,
    Path(
        description="the report's name (the id rule: letters, digits, '.', '_', '-')",
        json_schema_extra={"pattern": ID_PATTERN, "maxLength": MAX_NAME},
    ),
]


class RunRef(BaseModel):
    project: str = Field(min_length=1)
    run: str = Field(min_length=1)


class _Block(BaseModel):
    # A panel may carry settings of a newer dashboard: kept as sent.
    model_config = ConfigDict(extra="allow")

    id: str | None = Field(None, max_length=64, description="unique in the report")
    caption: str | None = Field(None, max_length=MAX_CAPTION, description="shown below it")


class TextBlock(_Block):
    type: Literal["text"]
    text: str = Field("", max_length=MAX_TEXT, description="Markdown (no raw HTML)")


class ChartBlock(_Block):
    type: Literal["chart"]
    runs: list[RunRef] = Field(min_length=1, max_length=MAX_RUNS)
    metrics: list[Annotated[str, Field(min_length=1)]] = Field(min_length=1, max_length=MAX_METRICS)
    mode: Literal["band", "ranks"] = Field("band", description="the cross-rank line, or ranks")
    x: Literal["step", "time"] = "step"
    log: bool = False
    smoothing: float = Field(0.0, ge=0, lt=1)


class KeyBlock(_Block):
    type: Literal["media", "table", "histogram"]
    run: RunRef
    key: str = Field(min_length=1, max_length=1000)
    step: int | None = Field(None, description="null: the latest")
    label: str | None = Field(None, max_length=200, description="a stream; null: the first")


class RunBlock(_Block):
    type: Literal["health", "failure"]
    run: RunRef


class LineageBlock(_Block):
    type: Literal["lineage"]
    artifact: str = Field(min_length=1, max_length=300)
    version: str | None = Field(None, max_length=100, description="default latest")


Block = Annotated[
    TextBlock | ChartBlock | KeyBlock | RunBlock | LineageBlock, Field(discriminator="type")
]


class ReportBody(BaseModel):
    """A report as the dashboard saves it (the reply is ``Report``)."""

    title: str = Field("", max_length=MAX_TITLE, description="shown above the blocks")
    blocks: list[Block] = Field(
        default_factory=list,
        max_length=MAX_BLOCKS,
        description='text and panels in page order, e.g. {"type": "text", "text": "# Results"}',
    )
    base: int | None = Field(
        None,
        description="the version this edit started from: 0 for a new report (409 if one "
        "exists), null for no check",
    )


def check_writer(request: Request, project: str) -> Principal:
    """403 unless the request may edit the project's reports: a write token of the
    project or an admin token (a read token opens reports, it does not change them), or
    no authentication."""
    who: Principal = request.state.principal
    if not may_write(who, project):
        raise ApiError(
            403,
            f"this {who.role} token cannot edit reports: only a writer of project {project!r} "
            "(a write token of it, or an admin token) saves or deletes reports; a read token "
            "opens them",
        )
    return who


def _author(who: Principal) -> str:
    if who.token is None:
        return ""
    return who.token.name or who.token.id


@router.get("/projects/{project}/reports", response_model=None, responses=answers(ReportsReply))
def list_reports(request: Request, project: str) -> Response:
    """The project's reports (each its latest version), by name; an empty list if none."""
    return reply(request, ReportsReply(reports=_store(request).list_reports(project)))


@router.get(PATH, response_model=None, responses=answers(Report, 404, e404="no such report"))
def get_report(
    request: Request,
    project: str,
    report: ReportName,
    version: Annotated[
        int | None, Query(ge=1, description="an older version (default: latest)")
    ] = None,
) -> Response:
    """One report: the latest version, or ``version``."""
    found = _store(request).get_report(project, report, version)
    if found is None:
        what = f"no report {report!r}" if version is None else f"no version {version} of {report!r}"
        raise ApiError(404, f"{what} in project {project!r}")
    return reply(request, found)


@router.get(
    PATH + "/versions",
    response_model=None,
    responses=answers(ReportVersionsReply, 404, e404="no such report"),
)
def report_versions(request: Request, project: str, report: ReportName) -> Response:
    """The report's versions, newest first."""
    found = _store(request).report_versions(project, report)
    if found is None:
        raise ApiError(404, f"no report {report!r} in project {project!r}")
    return reply(request, ReportVersionsReply(versions=found))


@router.post(
    PATH,
    response_model=None,
    responses=answers(
        Report,
        403,
        409,
        422,
        e403="not a writer of the project",
        e409="saved by someone else since the version named in base",
        e422="a block or the title is malformed",
    ),
)
def save_report(request: Request, project: str, report: ReportName, body: ReportBody) -> Response:
    """Save a new version of the report (the first save creates it)."""
    who = check_writer(request, project)
    if not names.is_id(report):  # the middleware refuses it first; checked, never stripped
        raise ApiError(422, "path parameter 'report' is not a valid name: " + names.ID_RULE)
    if len(report) > MAX_NAME:
        raise ApiError(422, f"a report name has at most {MAX_NAME} characters")
    blocks: list[dict[str, Any]] = [b.model_dump(exclude_unset=True) for b in body.blocks]
    try:
        check_report(report, body.title, blocks)
        saved = _store(request).save_report(
            project, report, body.title, blocks, base=body.base, author=_author(who)
        )
    except UsageError as exc:  # the store's argument errors: the fix is the caller's
        raise ApiError(422, str(exc)) from None
    except ReportConflictError as exc:
        raise ApiError(409, str(exc)) from None
    return reply(request, saved)


@router.delete(
    PATH,
    status_code=204,
    responses=answers(None, 403, 404, e403="not a writer of the project", e404="no such report"),
)
def delete_report(request: Request, project: str, report: ReportName) -> Response:
    """Delete the report and every version of it."""
    check_writer(request, project)
    if not _store(request).delete_report(project, report):
        raise ApiError(404, f"no report {report!r} in project {project!r}")
    return Response(status_code=204)
