"""What the routes share: the store, the blob store, the 404 of an unknown run, the
from <= to check, and how a route names its reply and error schemas in the OpenAPI document.

Replies are msgspec structs (``rankwise.wire``) encoded as they are; FastAPI documents
pydantic models only, so a route names its reply with ``answers(Struct, 404, ...)`` — a
reference into the components ``rankwise.server.openapi`` adds from the same structs.
"""

from __future__ import annotations

from typing import Annotated, Any, TypeVar

from fastapi import Query
from starlette.requests import Request

from ...store.base import Store
from ...store.blobs import BlobStore
from ..encoding import ApiError

T = TypeVar("T")

Responses = dict[int | str, dict[str, Any]]

# What each error status means on a read route; ``answers`` picks the ones a route has.
ERRORS = {
    404: "unknown project or run",
    422: "a parameter is out of range or malformed",
}


def store(request: Request) -> Store:
    return request.app.state.store  # type: ignore[no-any-return]


def blobs(request: Request) -> BlobStore | None:
    """The server's blob store (``create_app``'s ``blobs``: ``ServerSettings.blobs``, or
    ``blobs/`` beside a SQLite file); None when it keeps none."""
    return getattr(request.app.state, "blobs", None)


def blob_store(request: Request) -> BlobStore:
    """The server's blob store, for a route that cannot answer without one: 503 naming
    the fix when the server keeps none."""
    found = blobs(request)
    if found is None:
        raise ApiError(
            503, "this server keeps no blobs: start it with --blobs PATH or --blobs s3://..."
        )
    return found


def ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


def answers(reply: type | None, *errors: int, **described: str) -> Responses:
    """``responses=`` for a route: its 200 reply's schema (a struct's component) and its
    error statuses in the one error shape (``described``: ``e404="no view of that name"``
    overrides the default wording)."""
    out: Responses = {}
    if reply is not None:
        out[200] = {
            "description": "OK",
            "content": {"application/json": {"schema": ref(reply.__name__)}},
        }
    for status in errors:
        out[status] = refusal(described.get(f"e{status}") or ERRORS.get(status, "error"))
    return out


def refusal(description: str) -> dict[str, Any]:
    """One error status's entry in ``responses=``: the one error shape (``ErrorReply``)."""
    return {
        "description": description,
        "content": {"application/json": {"schema": ref("ErrorReply")}},
    }


def found(value: T | None, project: str, run: str) -> T:
    """``value``, or the 404 of an unknown run when the store answered None."""
    if value is None:
        raise ApiError(404, f"no run {run!r} in project {project!r}")
    return value


# Bounds of every number a read takes (``from``/``to``/``at``, ``offset``/``after``/
# ``before``): finite, and within what the stores' 64-bit integers hold, so a NaN, an
# infinity or 1e300 is a 422 from the parameter check, never a 500 from the database.
INT64 = 2**63 - 1
X_MAX = 9.2e18  # just under 2**63: converted to a step, still a 64-bit integer
X_BOUNDS: dict[str, Any] = {"ge": -X_MAX, "le": X_MAX, "allow_inf_nan": False}
# A chart read's x range (``from``/``to``), as the series and heatmap routes take it.
XFrom = Annotated[float | None, Query(alias="from", description="x range start", **X_BOUNDS)]
XTo = Annotated[float | None, Query(alias="to", description="x range end", **X_BOUNDS)]
ID_BOUNDS: dict[str, Any] = {"ge": -INT64, "le": INT64}


def check_range(lo: float | None, hi: float | None) -> None:
    if lo is not None and hi is not None and lo > hi:
        raise ApiError(422, f"from={lo} is above to={hi}: pass from <= to")
