"""``rankwise report export``: a report as ONE self-contained HTML file (and a PDF).

The file is the dashboard's own export page (``ui/report.html``, built by
``ui/vite.export.config.js`` into ``rankwise/server/static/export/report.html`` with its
script and stylesheet inline) with the report's data put in its data slot: the report,
every reply its panels ask for, and the blobs its media and table panels show, as
``data:`` URIs. Opened from disk it draws the same charts with the same code as the
dashboard and makes no network request (its Content-Security-Policy allows none).

The requests are the dashboard's (``ui/src/lib/reports.js`` ``blockRequests``), made
here in the same words: ``block_requests`` must agree with it, and
``tests/data/report_requests.json`` pins both. Replies are read through the HTTP API —
of a server (``--server``), or of the data directory's index served in-process, exactly
as ``rankwise ui`` would answer them — so the file holds what the dashboard shows.

A PDF is printed from that file by headless Chromium when it is installed.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import msgspec

from .errors import UsageError
from .wire.reports import Report

SLOT = "__RANKWISE_EXPORT_DATA__"
CHART_POINTS = 1000  # lib/reports.js CHART_POINTS
TABLE_ROWS = 100  # lib/reports.js TABLE_ROWS
_DIGEST = frozenset("0123456789abcdef")

Fetch = Callable[[dict[str, Any]], Any]  # one request -> its JSON reply
FetchBlob = Callable[[str, str], tuple[bytes, str]]  # (project, digest) -> (bytes, type)


def template_path() -> Path:
    return Path(__file__).parent / "server" / "static" / "export" / "report.html"


def _problem(block: dict[str, Any]) -> bool:
    kind = block.get("type")
    if kind == "text":
        return False
    if kind == "chart":
        return not block.get("runs") or not block.get("metrics")
    if kind == "lineage":
        return not block.get("artifact")
    run = block.get("run") or {}
    if not run.get("project") or not run.get("run"):
        return True
    return kind in ("media", "table", "histogram") and not block.get("key")


def _drop(params: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in params.items() if v is not None and v != ""}


def block_requests(block: dict[str, Any], project: str) -> list[dict[str, Any]]:
    """The API requests a block's panel makes (``lib/reports.js`` ``blockRequests``):
    ``{"method", "path": [segments], "params", "body"}``."""
    if _problem(block):
        return []

    def get(path: list[str], params: dict[str, Any] | None = None) -> dict[str, Any]:
        return {"method": "GET", "path": path, "params": _drop(params or {}), "body": None}

    kind = block["type"]
    if kind == "chart":
        return [
            {
                "method": "POST",
                "path": ["compare"],
                "params": {},
                "body": {
                    "runs": [f"{r['project']}/{r['run']}" for r in block["runs"]],
                    "key": key,
                    "x": block.get("x") or "step",
                    "max_points": CHART_POINTS,
                    "streams": "all" if block.get("mode") == "ranks" else "none",
                    "band": True,
                },
            }
            for key in block["metrics"]
        ]
    if kind in ("media", "table", "histogram", "health", "failure"):
        run = block["run"]
        base = ["projects", run["project"], "runs", run["run"]]
        if kind == "media":
            return [get([*base, "media"], _key_params(block, step=True))]
        if kind == "table":
            return [get([*base, "tables"], {**_key_params(block, step=True), "limit": TABLE_ROWS})]
        if kind == "histogram":
            return [get([*base, "histograms"], _key_params(block, step=False))]
        if kind == "health":
            return [get(base), get([*base, "health"])]
        return [get(base)]
    if kind == "lineage":
        return [get(["artifacts", project, block["artifact"], block.get("version") or "latest"])]
    return []


def _key_params(block: dict[str, Any], step: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"key": block.get("key"), "label": block.get("label")}
    if step:
        out["step"] = block.get("step")
    return out


def canonical(value: Any) -> str:
    """JSON with sorted keys and no spaces (``lib/reports.js`` ``canonical``)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def request_key(req: dict[str, Any]) -> str:
    return canonical(
        {
            "method": req["method"],
            "path": req["path"],
            "params": req.get("params") or {},
            "body": req.get("body"),
        }
    )


def request_url(req: dict[str, Any]) -> str:
    return "/api/v1/" + "/".join(quote(str(s), safe="") for s in req["path"])


def _digests(block: dict[str, Any], reply: Any) -> list[str]:
    """The blobs a media or table panel shows (``lib/reports.js`` ``mediaDigests``,
    ``Reports.jsx`` ``tableDigests``)."""
    if block["type"] == "media":  # the items at the step the panel shows (lib/reports.js)
        items = reply.get("items", [])
        if not items:
            return []
        step = block.get("step")
        want = max(it["step"] for it in items) if step is None else step
        return [it["digest"] for it in items if it["step"] == want and it.get("kind") != "html"]
    if block["type"] == "table":
        out = []
        for j, kind in enumerate(reply.get("types", [])):
            if kind != "image":
                continue
            for row in reply.get("rows", []):
                cell = row[j] if j < len(row) else None
                if isinstance(cell, str) and len(cell) == 64 and set(cell) <= _DIGEST:
                    out.append(cell)
        return out
    return []


def collect(
    report: Report, fetch: Fetch, fetch_blob: FetchBlob
) -> tuple[dict[str, Any], dict[str, str]]:
    """Every reply the report's panels ask for, by request key, and the blobs they show
    as ``data:`` URIs, by digest. A request that fails is left out: its panel says so."""
    replies: dict[str, Any] = {}
    blobs: dict[str, str] = {}
    for block in report.blocks:
        project = (block.get("run") or {}).get("project") or report.project
        for req in block_requests(block, report.project):
            key = request_key(req)
            if key in replies:
                continue
            try:
                reply = fetch(req)
            except UsageError:
                continue
            replies[key] = reply
            for digest in _digests(block, reply):
                if digest in blobs:
                    continue
                try:
                    data, kind = fetch_blob(project, digest)
                except UsageError:
                    continue
                blobs[digest] = f"data:{kind};base64,{base64.b64encode(data).decode()}"
    return replies, blobs


def script_json(value: Any) -> str:
    """JSON safe inside a ``<script>`` element (``Reports.jsx`` ``scriptJson``)."""
    text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    for ch in ("<", ">", "&", "\u2028", "\u2029"):
        text = text.replace(ch, f"\\u{ord(ch):04x}")
    return text


def render(report: Report, replies: dict[str, Any], blobs: dict[str, str]) -> str:
    """The export page with the report's data in its slot."""
    path = template_path()
    if not path.is_file():
        raise UsageError(
            f"the report export page is not built ({path} is missing): build the dashboard "
            "with `cd ui && npm ci && npm run build` (make setup does)"
        )
    page = path.read_text(encoding="utf-8")
    if SLOT not in page:
        raise UsageError(f"{path} has no data slot: rebuild the dashboard (cd ui && npm run build)")
    data = {
        "report": msgspec.to_builtins(report),
        "replies": replies,
        "blobs": blobs,
        "exported": time.time(),
    }
    return page.replace(SLOT, script_json(data), 1)


# -- where the replies come from --------------------------------------------------------


def _json_reply(response: Any, what: str) -> Any:
    if response.status_code == 200:
        return response.json()
    try:
        message = response.json()["error"]["message"]
    except Exception:
        message = f"HTTP {response.status_code}"
    raise UsageError(f"{what}: {message}")


def _client_fetchers(client: Any) -> tuple[Fetch, FetchBlob]:
    def fetch(req: dict[str, Any]) -> Any:
        response = client.request(
            req["method"],
            request_url(req),
            params=req.get("params") or None,
            json=req.get("body"),
            headers={"Accept": "application/json"},
        )
        return _json_reply(response, f"{req['method']} {request_url(req)}")

    def fetch_blob(project: str, digest: str) -> tuple[bytes, str]:
        response = client.get(f"/api/v1/blobs/{quote(project, safe='')}/{digest}")
        if response.status_code != 200:
            raise UsageError(f"blob {digest}: HTTP {response.status_code}")
        kind = response.headers.get("content-type", "application/octet-stream").split(";")[0]
        return response.content, kind

    return fetch, fetch_blob


def export_from_server(
    server: str, token: str | None, project: str, name: str, version: int | None
) -> str:
    """The export page of a report on a server (``--server``), read with a read token."""
    from . import _http
    from .read.remote import RemoteReader
    from .read.reports import remote_report

    report = remote_report(RemoteReader(server, token=token), project, name, version)
    with _http.make_client(_http.normalize_url(server), token=token) as client:
        replies, blobs = collect(report, *_client_fetchers(client))
    return render(report, replies, blobs)


def export_from_dir(root: Path, project: str, name: str, version: int | None) -> str:
    """The export page of a report kept in a data directory (what ``rankwise ui``
    saved), its panels read from the directory's runs as ``rankwise ui`` serves them."""
    import asyncio

    import httpx

    from .errors import ReportNotFoundError
    from .server import ServerSettings, create_app
    from .server.indexer import DirectoryTailer
    from .server.serve import index_url, open_db
    from .store.blobs import RunDirBlobStore

    root = Path(root).expanduser().absolute()
    if not (root / ".rankwise" / "index.db").is_file():
        raise ReportNotFoundError(
            f"no report {name!r} in project {project!r}: {root} has no reports yet "
            "(make one in the dashboard of `rankwise ui --dir DIR`)"
        )
    store = open_db(index_url(root))
    try:
        store.local_pids = True
        found = store.get_report(project, name, version)
        if found is None:
            what = f"no report {name!r}" if version is None else f"no version {version} of {name!r}"
            raise ReportNotFoundError(
                f"{what} in project {project!r}: `rankwise report list --project {project}` "
                "lists them"
            )
        DirectoryTailer(root, store).poll()  # the runs as they are now
        settings = ServerSettings(
            auth=False, tails_dir=root, blobs=RunDirBlobStore(root), static_dir=root / ".none"
        )
        app = create_app(store, settings)
        # The app answered in-process, one request at a time, on a loop of this thread.
        loop = asyncio.new_event_loop()
        client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1"
        )
        try:
            replies, blobs = collect(found, *_client_fetchers(_SyncOver(client, loop)))
        finally:
            loop.run_until_complete(client.aclose())
            loop.close()
        return render(found, replies, blobs)
    finally:
        store.close()


class _SyncOver:
    """``request``/``get`` of an ``httpx.AsyncClient``, run to completion on ``loop``."""

    def __init__(self, client: Any, loop: Any) -> None:
        self.client = client
        self.loop = loop

    def request(self, *args: Any, **kw: Any) -> Any:
        return self.loop.run_until_complete(self.client.request(*args, **kw))

    def get(self, *args: Any, **kw: Any) -> Any:
        return self.loop.run_until_complete(self.client.get(*args, **kw))


# -- PDF ---------------------------------------------------------------------------------

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_chromium() -> str | None:
    """Headless Chromium: ``RANKWISE_CHROMIUM``, else the first on PATH, else None."""
    env = os.environ.get("RANKWISE_CHROMIUM")
    if env:
        return env if Path(env).is_file() else None
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


def print_pdf(html: Path, pdf: Path, timeout: float = 120.0) -> None:
    """Print the exported file to ``pdf`` with headless Chromium (no network: the file
    needs none)."""
    chromium = find_chromium()
    if chromium is None:
        raise UsageError(
            "--pdf needs Chromium and none is installed: install it (apt-get install chromium) "
            "or name it in RANKWISE_CHROMIUM, or leave out --pdf (the HTML file prints too)"
        )
    pdf = pdf.absolute()
    with tempfile.TemporaryDirectory(prefix="rankwise-pdf-") as profile:
        cmd = [
            chromium,
            "--headless",
            "--disable-gpu",
            "--no-sandbox",  # as root (containers, CI); the page is our own, offline file
            "--no-first-run",
            "--no-default-browser-check",
            f"--user-data-dir={profile}",
            "--run-all-compositor-stages-before-draw",
            "--virtual-time-budget=10000",
            "--no-pdf-header-footer",
            f"--print-to-pdf={pdf}",
            html.absolute().as_uri(),
        ]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            raise UsageError(f"Chromium did not print the PDF within {timeout:g} s") from None
    if done.returncode != 0 or not pdf.is_file() or pdf.stat().st_size == 0:
        tail = (done.stderr or "").strip().splitlines()[-3:]
        raise UsageError(f"Chromium could not print the PDF: {' | '.join(tail) or done.returncode}")
