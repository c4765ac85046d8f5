"""The dashboard at ``/``: the built front end when present, else a page saying how.

The front end is built (from ``ui/`` in a source checkout) into
``rankwise/server/static/``; this module only serves what is there. Unknown ``/api/...``
paths are answered with a JSON 404 before the static mount can see them.
"""

from __future__ import annotations

import html
from pathlib import Path

from fastapi import Depends, FastAPI
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.staticfiles import StaticFiles

from .auth import public

_PLACEHOLDER = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>rankwise</title>
<style>body{{font:16px/1.5 system-ui,sans-serif;max-width:40em;margin:4em auto;padding:0 1em}}
code{{background:#f2f2f2;padding:.1em .3em}}</style></head>
<body><h1>rankwise</h1>
<p>The server is running, but the dashboard has not been built into
<code>{static}</code>.</p>
<p>Build it from the <code>ui/</code> folder of a rankwise source checkout
(<code>npm ci &amp;&amp; npm run build</code> there), or install a rankwise release, which ships it
built.</p>
<p>The HTTP API works without it: <a href="/api/v1/projects">/api/v1/projects</a>,
spec at <a href="/api/openapi.json">/api/openapi.json</a>, browsable at
<a href="/api/docs">/api/docs</a>.</p>
</body></html>
"""


# /api/docs: Swagger UI from the package (swagger-ui-dist, pinned in ui/package.json and
# copied into static/api-docs/ by the dashboard's build), never from a CDN. No inline
# script: the page runs under hardening.DOCS_CSP (script-src 'self').
API_DOCS = "api-docs"
_DOCS_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>rankwise API</title>
<link rel="stylesheet" href="/api-docs/swagger-ui.css"></head>
<body><div id="swagger-ui"></div>
<script src="/api-docs/swagger-ui-bundle.js"></script>
<script src="/api-docs/init.js"></script>
</body></html>
"""
_NO_DOCS_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>rankwise API</title></head>
<body><h1>rankwise API</h1>
<p>The API browser ships with the built dashboard, which this server does not have. The
API document is at <a href="/api/openapi.json">/api/openapi.json</a>.</p>
</body></html>
"""


def mount_api_docs(app: FastAPI, static_dir: Path) -> None:
    """``GET /api/docs``: the API browser, served from ``static_dir`` (no CDN)."""
    built = (static_dir / API_DOCS / "swagger-ui-bundle.js").is_file()
    page = _DOCS_PAGE if built else _NO_DOCS_PAGE

    @app.get("/api/docs", include_in_schema=False, dependencies=[Depends(public)])
    def api_docs(request: Request) -> HTMLResponse:
        return HTMLResponse(page)


def mount_dashboard(app: FastAPI, static_dir: Path) -> None:
    """Serve ``static_dir`` at ``/`` if it holds ``index.html``, else the placeholder."""
    if (static_dir / "index.html").is_file():
        app.mount("/", StaticFiles(directory=static_dir, html=True), name="dashboard")
        return
    page = _PLACEHOLDER.format(static=html.escape(str(static_dir)))

    @app.get("/", include_in_schema=False, dependencies=[Depends(public)])
    def placeholder(request: Request) -> HTMLResponse:
        return HTMLResponse(page)
