"""Rich data endpoints: a run's media keys, media items, histograms and table pages.

``GET /projects/{project}/runs/{run}/media/keys``  every media/table/histogram key
``GET .../media?key=&label=&step=``               one media key's items (blob digests)
``GET .../histograms?key=&label=``                one histogram key over steps, per label
``GET .../tables?key=&label=&step=&offset=&limit=&sort=&desc=&filter_col=&filter=``
                                                 one page of one logged table

Read role (``auth.read``, project-scoped through the path). Replies are
``rankwise.wire.media``'s structs; the bytes of an item are the blob route's
(``GET /api/v1/blobs/{project}/{digest}``, the blobs module's). Tables are paged by
DuckDB over the Parquet blob (``rankwise.server.tables``); ``docs/http-api.md`` has the
contract, filters included.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from ...wire.media import HistogramsReply, MediaKeysReply, MediaReply, TableReply
from ..encoding import ApiError, reply
from ..tables import MAX_LIMIT, MAX_OFFSET, TablePager, TableQueryError
from .deps import answers, blob_store, found
from .deps import store as _store

router = APIRouter(tags=["media"])
RUN = "/projects/{project}/runs/{run}"
KEY = Query(min_length=1, max_length=1024, description="a key from /media/keys")
LABEL = Query(description="a stream label (rank-3)")
INT64 = 2**63 - 1  # steps and offsets the stores and DuckDB hold


def _pager(request: Request) -> TablePager:
    pager: TablePager | None = getattr(request.app.state, "table_pager", None)
    if pager is None:
        pager = request.app.state.table_pager = TablePager()
    return pager


@router.get(RUN + "/media/keys", response_model=None, responses=answers(MediaKeysReply, 404))
def media_keys(request: Request, project: str, run: str) -> Response:
    """Every media, table and histogram key of the run: its kind, steps and labels."""
    keys = found(_store(request).media_keys(project, run), project, run)
    return reply(request, MediaKeysReply(keys=keys))


@router.get(RUN + "/media", response_model=None, responses=answers(MediaReply, 404, 422))
def media(
    request: Request,
    project: str,
    run: str,
    key: Annotated[str, KEY],
    label: Annotated[str | None, LABEL] = None,
    step: Annotated[
        int | None, Query(ge=-INT64, le=INT64, description="omitted: every step")
    ] = None,
) -> Response:
    """One media key's items (at one step, of one label), by step, label and index."""
    got = found(_store(request).media(project, run, key, label, step), project, run)
    return reply(request, got)


@router.get(RUN + "/histograms", response_model=None, responses=answers(HistogramsReply, 404, 422))
def histograms(
    request: Request,
    project: str,
    run: str,
    key: Annotated[str, KEY],
    label: Annotated[str | None, LABEL] = None,
) -> Response:
    """One histogram key over steps: a series per label (steps, edges, counts)."""
    got = found(_store(request).histograms(project, run, key, label), project, run)
    return reply(request, HistogramsReply(key=key, series=got))


@router.get(RUN + "/tables", response_model=None, responses=answers(TableReply, 404, 422))
def tables(
    request: Request,
    project: str,
    run: str,
    key: Annotated[str, KEY],
    label: Annotated[str | None, Query(description="a stream label; omitted: the primary")] = None,
    step: Annotated[
        int | None, Query(ge=-INT64, le=INT64, description="omitted: the latest step")
    ] = None,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = 100,
    sort: Annotated[str | None, Query(description="a column to sort by")] = None,
    desc: Annotated[bool, Query(description="sort descending")] = False,
    filter_col: Annotated[str | None, Query(description="a column to filter")] = None,
    filter: Annotated[
        str | None,
        Query(
            description="numbers: N, !=N, >N, >=N, <N, <=N, A..B; bool: true/false; "
            "else a case-insensitive substring"
        ),
    ] = None,
) -> Response:
    """One page of a logged table (DuckDB over its Parquet blob), sorted and filtered."""
    store = _store(request)
    row = store.table_row(project, run, key, label, step)
    if row is None:
        if store.get_run(project, run) is None:
            found(None, project, run)
        where = f" at step {step}" if step is not None else ""
        who = f" of {label!r}" if label is not None else ""
        raise ApiError(404, f"no table {key!r}{who}{where} in run {run!r}")
    if filter and filter_col is None:
        raise ApiError(422, "filter needs filter_col: the column to filter")
    pager = _pager(request)
    try:
        path = pager.path(blob_store(request), project, row.digest)
        page = pager.page(
            path,
            row.columns,
            row.types,
            offset=offset,
            limit=limit,
            sort=sort,
            desc=desc,
            filter_col=filter_col,
            filter_text=filter,
            nrows=row.nrows,
        )
    except TableQueryError as exc:
        raise ApiError(422, str(exc)) from None
    except FileNotFoundError:
        raise ApiError(404, f"the blob of table {key!r} is not on this server") from None
    body = TableReply(
        key=key,
        label=row.label,
        step=row.step,
        digest=row.digest,
        columns=row.columns,
        types=row.types,
        rows=page.rows,
        offset=offset,
        total=page.total,
        nrows=row.nrows,
        steps=row.steps,
        labels=row.labels,
    )
    return reply(request, body)
