"""Saved views of the runs table: ``GET``/``POST``/``DELETE /projects/{project}/views``.

A view is a name plus the runs table's filters and columns, stored by the server so that
everyone who opens the dashboard sees the same list. The server keeps the filters as the
dashboard sent them (a JSON object) and does not interpret them; names are unique per
project and saving under a taken name replaces that view.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, Field
from starlette.responses import Response

from ... import names
from ...errors import UsageError
from ...store.saved_views import MAX_NAME, check_view
from ...wire.runs import SavedView, ViewsReply
from ..encoding import ApiError, reply
from ..schemas import JsonFloat
from .deps import answers
from .deps import store as _store

router = APIRouter(tags=["views"])


class View(BaseModel):
    """A view as the dashboard saves it (the request body; the reply is ``SavedView``)."""

    name: str = Field(max_length=MAX_NAME, description="unique per project")
    filters: dict[str, Any] = Field(
        default_factory=dict,
        description='the runs table\'s filters, e.g. {"state": ["crashed"], "tag": ["ddp"]}',
    )
    columns: list[str] = Field(default_factory=list, description="summary keys shown as columns")
    updated: JsonFloat | None = Field(None, description="when it was last saved (Unix seconds)")


@router.get("/projects/{project}/views", response_model=None, responses=answers(ViewsReply))
def list_views(request: Request, project: str) -> Response:
    """The project's saved views, by name (an empty list for a project without any)."""
    return reply(request, ViewsReply(views=_store(request).list_views(project)))


@router.post(
    "/projects/{project}/views",
    response_model=None,
    responses=answers(SavedView, 422, e422="no name, or filters not an object"),
)
def save_view(request: Request, project: str, body: View) -> Response:
    """Save a view; one of the same name is replaced."""
    try:
        check_view(body.name, body.filters, body.columns)
    except UsageError as exc:  # the store's argument errors: the fix is the caller's
        raise ApiError(422, str(exc)) from None
    if not names.is_key(body.name):  # checked, never stripped: " v" and "v" stay apart
        raise ApiError(422, "body field 'name' is not a valid view name: " + names.KEY_RULE)
    saved = _store(request).save_view(project, body.name, body.filters, body.columns)
    return reply(request, saved)


@router.delete(
    "/projects/{project}/views",
    status_code=204,
    responses=answers(None, 404, e404="no view of that name"),
)
def delete_view(
    request: Request, project: str, name: Annotated[str, Query(min_length=1)]
) -> Response:
    """Delete the view called ``name``."""
    if not _store(request).delete_view(project, name):
        raise ApiError(404, f"no saved view of that name in project {project!r}")
    return Response(status_code=204)
