"""Running the app: ``rankwise ui`` (local data directory) and ``rankwise server`` (a DB).

Both bind 127.0.0.1 unless told otherwise: a tracking server exposes configs and logs,
so listening on every interface must be asked for. ``rankwise server --workers N`` runs N
uvicorn worker processes; each opens its own store from ``RANKWISE_SERVER_DB`` (set here
for them), and the schema is migrated once, before any worker starts.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import uvicorn

from ..errors import UsageError
from ..store.base import Store
from .app import create_app
from .config import ServerSettings
from .tail import DirectoryTailer

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8585
INDEX = Path(".rankwise") / "index.db"
_DB_ENV = "RANKWISE_SERVER_DB"
_MAX_BODY_ENV = "RANKWISE_SERVER_MAX_BODY"
_CRASH_ENV = "RANKWISE_SERVER_CRASH_TIMEOUT"
_INFLIGHT_ENV = "RANKWISE_SERVER_MAX_INFLIGHT"


def open_db(url: str, crash_timeout: float = 60.0) -> Store:
    """Open and migrate the store at ``url`` (``sqlite:///PATH`` or ``postgresql://...``).

    ``crash_timeout``: how long a silent stream whose process cannot be seen alive is
    still called running (s); the store settles states with it at read time.
    """
    from ..store import open_store

    try:
        store = open_store(url, crash_timeout=crash_timeout)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    store.migrate()
    return store


def index_url(root: Path) -> str:
    """The embedded SQLite index of a data directory (never read by training processes)."""
    path = Path(root).absolute() / INDEX
    path.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{path}"


class _Server(uvicorn.Server):
    """A uvicorn server that says where it listens once the socket is bound."""

    def __init__(self, config: uvicorn.Config, on_ready: Callable[[str], None]) -> None:
        super().__init__(config)
        self._on_ready = on_ready

    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets=sockets)
        if self.started:
            port = self.config.port
            for server in getattr(self, "servers", []):
                for sock in server.sockets:
                    port = sock.getsockname()[1]
            self._on_ready(f"http://{_url_host(self.config.host)}:{port}")


def _url_host(host: str) -> str:
    if host in ("0.0.0.0", "::"):
        return "127.0.0.1"
    return f"[{host}]" if ":" in host else host


def uvicorn_config(app: Any, host: str, port: int, log_level: str, **kw: Any) -> uvicorn.Config:
    # h11 and no websockets: nothing here needs them, and their optional C or
    # websocket libraries would only add import-time surprises.
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        access_log=log_level == "debug",
        http="h11",
        ws="none",
        lifespan="off",
        **kw,
    )


def serve_ui(
    root: Path,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    *,
    settings: ServerSettings | None = None,
    crash_timeout: float = 60.0,
    log_level: str = "warning",
    announce: Callable[[str], None] | None = None,
) -> None:
    """Index ``root`` into ``<root>/.rankwise/index.db``, follow it, and serve it."""
    root = Path(root).expanduser().absolute()
    if not root.is_dir():
        raise UsageError(
            f"no data directory {root}: pass --dir (or set RANKWISE_DIR) to where runs are"
        )
    store = open_db(index_url(root), crash_timeout)
    tailer = DirectoryTailer(root, store)
    tailer.poll()  # the first pass before serving: the dashboard opens on full data
    tailer.start()
    say = announce or (lambda url: print(f"rankwise: serving {root} at {url}", flush=True))
    try:
        _Server(uvicorn_config(create_app(store, settings), host, port, log_level), say).run()
    finally:
        tailer.stop()
        store.close()


def serve_db(
    url: str,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    *,
    workers: int = 1,
    settings: ServerSettings | None = None,
    crash_timeout: float = 60.0,
    log_level: str = "warning",
    announce: Callable[[str], None] | None = None,
) -> None:
    """Serve the store at ``url``; several worker processes when ``workers > 1``."""
    settings = settings or ServerSettings()
    say = announce or (lambda where: print(f"rankwise: server at {where}", flush=True))
    store = open_db(url, crash_timeout)
    if workers <= 1:
        try:
            _Server(uvicorn_config(create_app(store, settings), host, port, log_level), say).run()
        finally:
            store.close()
        return
    store.close()
    os.environ[_DB_ENV] = url
    os.environ[_MAX_BODY_ENV] = str(settings.max_body_bytes)
    os.environ[_CRASH_ENV] = str(crash_timeout)
    os.environ[_INFLIGHT_ENV] = str(settings.max_inflight)
    say(f"http://{_url_host(host)}:{port} ({workers} workers)")
    uvicorn.run(
        "rankwise.server.serve:worker_app",
        factory=True,
        workers=workers,
        host=host,
        port=port,
        log_level=log_level,
        access_log=log_level == "debug",
        http="h11",
        ws="none",
        lifespan="off",
    )


def worker_app() -> Any:
    """The app of one worker process of ``rankwise server --workers N``."""
    url = os.environ.get(_DB_ENV)
    if not url:
        raise RuntimeError(f"{_DB_ENV} is not set: start workers with `rankwise server`")
    settings = ServerSettings(
        max_body_bytes=int(os.environ.get(_MAX_BODY_ENV) or ServerSettings.max_body_bytes),
        max_inflight=int(os.environ.get(_INFLIGHT_ENV) or ServerSettings.max_inflight),
    )
    from ..store import open_store

    crash_timeout = float(os.environ.get(_CRASH_ENV) or 60.0)
    return create_app(open_store(url, crash_timeout=crash_timeout), settings)
