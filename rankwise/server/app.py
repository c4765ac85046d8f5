"""``create_app(store, settings)``: the ASGI application of ``rankwise ui`` and ``server``.

The app holds no global state: the store and the settings are passed in and kept on
``app.state``, so a test builds as many apps as it likes, each over its own store. The
API is versioned under ``/api/v1``; the OpenAPI spec is at ``/api/openapi.json``; ``/``
is left to the dashboard (``static``). Every error, including FastAPI's own validation
errors and unknown paths, is answered in the one shape of ``encoding.error_reply``.
"""

from __future__ import annotations

import logging
import re
import sqlite3
from typing import Any

from fastapi import Depends, FastAPI
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from .._version import __version__
from ..names import is_id
from ..store.base import Store
from ..store.blobs import store_blobs
from . import auth
from .config import ServerSettings
from .encoding import ApiError, error_reply
from .group_commit import GroupCommit
from .hardening import install_hardening
from .openapi import document_replies
from .pacing import Admission, Pacer
from .routes import (
    alerts,
    artifacts,
    blobs,
    health,
    ingest,
    ingest_batch,
    login,
    manage,
    media,
    runs,
    saved_views,
    trash,
)
from .routes import reports as report_routes
from .static import mount_api_docs, mount_dashboard

API = "/api/v1"
_logger = logging.getLogger("rankwise.server")


def create_app(store: Store, settings: ServerSettings | None = None) -> FastAPI:
    """The rankwise HTTP API (and dashboard) over ``store``; the caller owns the store."""
    settings = settings or ServerSettings()
    app = FastAPI(
        title="rankwise",
        version=__version__,
        summary="Experiment tracking built for distributed training.",
        openapi_url="/api/openapi.json",
        docs_url=None,  # served from the package by static.mount_api_docs, no CDN
        redoc_url=None,
    )
    app.state.store = store
    app.state.settings = settings
    app.state.blobs = settings.blobs or store_blobs(store)
    # Ingest: one pacer (the upload interval advised), one admission policy over it, and
    # one group commit per app (rankwise.server.pacing, .group_commit).
    app.state.pacer = Pacer(settings.max_upload_interval, settings.pace_target)
    app.state.admission = Admission(app.state.pacer, settings.max_inflight, settings.retry_after)
    app.state.group_commit = GroupCommit(store, on_busy=app.state.pacer.busy)
    # Uploads are stored whole and folded into series in the background, also those a
    # process killed before folding left behind (rankwise.store.compact).
    store.start_compactor()
    auth.redact_access_log()
    app.state.verifier = auth.Verifier(
        store, settings.token_cache_ttl, settings.token_touch_interval
    )
    app.add_exception_handler(ApiError, _api_error)  # type: ignore[arg-type]
    app.add_exception_handler(RequestValidationError, _validation_error)  # type: ignore[arg-type]
    app.add_exception_handler(HTTPException, _http_error)  # type: ignore[arg-type]
    for cls in _database_errors(store):  # the database down or restarting: 503, not 500
        app.add_exception_handler(cls, _store_down)
    # Every route has one policy (rankwise.server.auth); a test walks app.routes for it.
    app.include_router(ingest.router, prefix=API, dependencies=[Depends(auth.ingest)])
    app.include_router(ingest_batch.router, prefix=API, dependencies=[Depends(auth.ingest)])
    app.include_router(blobs.router, prefix=API, dependencies=[Depends(auth.ingest)])
    app.include_router(blobs.read_router, prefix=API, dependencies=[Depends(auth.read)])
    app.include_router(manage.read_router, prefix=API, dependencies=[Depends(auth.read)])
    app.include_router(manage.write_router, prefix=API, dependencies=[Depends(auth.write)])
    app.include_router(trash.write_router, prefix=API, dependencies=[Depends(auth.delete)])
    app.include_router(trash.read_router, prefix=API, dependencies=[Depends(auth.read)])
    app.include_router(trash.admin_router, prefix=API, dependencies=[Depends(auth.admin)])
    app.include_router(runs.router, prefix=API, dependencies=[Depends(auth.read)])
    app.include_router(saved_views.router, prefix=API, dependencies=[Depends(auth.read)])
    app.include_router(report_routes.router, prefix=API, dependencies=[Depends(auth.read)])
    app.include_router(health.router, prefix=API, dependencies=[Depends(auth.read)])
    app.include_router(media.router, prefix=API, dependencies=[Depends(auth.read)])
    app.include_router(artifacts.ingest_router, prefix=API, dependencies=[Depends(auth.ingest)])
    app.include_router(artifacts.read_router, prefix=API, dependencies=[Depends(auth.read)])
    app.include_router(
        artifacts.files_router, prefix=API, dependencies=[Depends(auth.read_or_ingest)]
    )
    app.include_router(alerts.router, prefix=API, dependencies=[Depends(auth.read)])
    app.include_router(alerts.admin_router, prefix=API, dependencies=[Depends(auth.admin)])
    app.include_router(login.router, prefix=API)
    mount_api_docs(app, settings.static_dir)

    # Every method: an /api request no route answers is authenticated before it learns
    # anything, a wrong method (405) included; the router would answer 405 first.
    @app.api_route(
        "/api/{rest:path}",
        methods=["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"],
        include_in_schema=False,
        dependencies=[Depends(auth.authenticated)],
    )
    def unknown(request: Request, rest: str) -> Response:
        allowed = _methods_at(request)
        if allowed:
            wrong = ApiError(405, f"{request.method} is not allowed here: use {', '.join(allowed)}")
            wrong.headers = {"Allow": ", ".join(allowed)}  # type: ignore[attr-defined]
            raise wrong
        raise ApiError(
            404,
            f"no endpoint {request.method} /api/{rest}: the API is under {API}, "
            "see /api/openapi.json",
        )

    mount_dashboard(app, settings.static_dir)
    document_replies(app)
    install_hardening(app, settings)
    return app


def _methods_at(request: Request) -> list[str]:
    """The methods the API document lists at this request's path (none: no such path)."""
    table = getattr(request.app.state, "route_table", None)
    if table is None:  # built on first use, from the document every client reads
        table = request.app.state.route_table = [
            (_template(path), sorted(m.upper() for m in ops))
            for path, ops in request.app.openapi()["paths"].items()
        ]
    path = request.url.path
    return sorted({m for pattern, methods in table if pattern.fullmatch(path) for m in methods})


def _template(path: str) -> re.Pattern[str]:
    """``/a/{b}/c/{path}`` as a regex: a parameter is one segment, ``{path}`` the rest."""
    out = ""
    for part in re.split(r"(\{[^}]*\})", path):
        if part.startswith("{"):
            # FastAPI's document drops ``:path``; the one such parameter is ``{path}``.
            out += ".+" if part in ("{path}",) or part.endswith(":path}") else "[^/]+"
        else:
            out += re.escape(part)
    return re.compile(out)


def _api_error(request: Request, exc: ApiError) -> Response:
    response = error_reply(request, exc.status, exc.message, **exc.extra)
    response.headers.update(getattr(exc, "headers", None) or {})
    return response


def _sqlite_busy(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def _database_errors(store: Store) -> list[type[Exception]]:
    errors: list[type[Exception]] = [sqlite3.OperationalError]
    if getattr(store, "dialect", "") == "postgres":  # psycopg is loaded by then
        import psycopg

        errors.append(psycopg.OperationalError)
    return errors


def _store_down(request: Request, exc: Exception) -> Response:
    """A database failure outside ingest (a token lookup, a read) while the database is
    down or restarting: 503 with ``Retry-After``, as ingest answers. SQLite raises the
    same class for a damaged database ("no such table", "disk I/O error"): only a busy
    or locked one is worth a retry; anything else is a fault, answered as every fault is
    (a generic 500 with a request id, the traceback logged)."""
    if isinstance(exc, sqlite3.OperationalError) and not _sqlite_busy(exc):
        raise exc
    _logger.warning("%s %s: the store is unavailable (%r)", request.method, request.url.path, exc)
    seconds = request.app.state.settings.retry_after
    response = error_reply(
        request,
        503,
        "the store is unavailable (database down or restarting): retry after the "
        "Retry-After seconds",
        retry_after=seconds,
    )
    response.headers["Retry-After"] = str(seconds)
    return response


def _http_error(request: Request, exc: HTTPException) -> Response:
    return error_reply(request, exc.status_code, str(exc.detail))


def _validation_error(request: Request, exc: RequestValidationError) -> Response:
    return error_reply(request, 422, "; ".join(_describe(e) for e in exc.errors()))


def _describe(error: dict[str, Any]) -> str:
    """``query parameter 'x': Input should be 'step' or 'time'`` from a pydantic error."""
    loc = [str(p) for p in error.get("loc", ())]
    msg = str(error.get("msg", "invalid"))
    if not loc:
        return msg
    # Only the names the API declares (and list positions) are shown: a dict key or any
    # other part that came from the request is replaced, so nothing sent is echoed.
    where = loc[0]
    name = ".".join(p if p.isdigit() or is_id(p) else "?" for p in loc[1:])
    if where == "body":
        return f"body field {name!r}: {msg}" if name else f"body: {msg}"
    if where in ("query", "path", "header"):
        return f"{where} parameter {name!r}: {msg}"
    return f"{where}: {msg}"
