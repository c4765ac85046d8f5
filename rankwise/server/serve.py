"""Running the app: ``rankwise ui`` (local data directory) and ``rankwise server`` (a DB).

Both bind 127.0.0.1 unless told otherwise: a tracking server exposes configs and logs,
so listening on every interface must be asked for. ``rankwise server --workers N`` runs N
uvicorn worker processes; each opens its own store from ``RANKWISE_SERVER_DB`` (set here
for them), and the schema is migrated once, before any worker starts.
"""

from __future__ import annotations

import asyncio
import dataclasses
import ipaddress
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import uvicorn

from ..alerting import Destination
from ..errors import RankwiseError, UsageError
from ..store.base import Store
from ..store.blobs import BlobStore, FsspecBlobStore, LocalBlobStore, default_root, open_blob_store
from .alert_watch import start_alerts
from .app import create_app
from .arenas import limit_arenas
from .config import AlertSettings, ServerSettings
from .guard import GuardedH11Protocol, install_accept_log
from .indexer import DirectoryTailer
from .trash_sweep import TrashSweep
from .upload import Limits

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8585
INDEX = Path(".rankwise") / "index.db"
# How long `rankwise ui` indexes a directory before it serves (`--first-index-seconds`):
# a directory of 10 GB takes minutes; the rest is indexed while it serves.
FIRST_INDEX_SECONDS = 5.0
_DB_ENV = "RANKWISE_SERVER_DB"
_CRASH_ENV = "RANKWISE_SERVER_CRASH_TIMEOUT"
# Every ServerSettings field but the blob store, as one JSON object: a knob added to
# ServerSettings reaches the workers of --workers N without a line here.
_SETTINGS_ENV = "RANKWISE_SERVER_SETTINGS"
_BLOBS_ENV = "RANKWISE_SERVER_BLOBS"
_BLOBS_ENDPOINT_ENV = "RANKWISE_SERVER_BLOBS_ENDPOINT"


def open_db(url: str, crash_timeout: float = 60.0) -> Store:
    """Open and migrate the store at ``url`` (``sqlite:///PATH`` or ``postgresql://...``).

    ``crash_timeout``: how long a silent stream whose process cannot be seen alive is
    still called running (s); the store settles states with it at read time.
    """
    from ..store import open_store

    # The pool logs each failed connection attempt; at start-up the one error line below
    # says it all, so those are held back until the store is open.
    pool_log = logging.getLogger("psycopg.pool")
    level = pool_log.level
    pool_log.setLevel(logging.CRITICAL)
    try:
        store = open_store(url, crash_timeout=crash_timeout)
        store.migrate()
    except RankwiseError:
        raise
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    except Exception as exc:  # the driver's own errors (no such host, no such file, ...)
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UsageError(f"cannot open the database {_redact(url)}: {detail}") from None
    finally:
        pool_log.setLevel(level)
    return store


def _redact(url: str) -> str:
    """The URL without its password, for messages."""
    head, sep, rest = url.partition("://")
    creds, at, host = rest.rpartition("@")
    if not at or ":" not in creds:
        return url
    return f"{head}{sep}{creds.split(':', 1)[0]}:***@{host}"


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
        install_accept_log(asyncio.get_running_loop())
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


# Idle connections are kept this long (uvicorn's default is 5 s): an uploader posts every
# 1-10 s (rankwise.server.pacing), and a connection kept between posts spares a TCP
# handshake per upload. Longer than the SDK's own expiry (_http.KEEPALIVE_EXPIRY), so the
# client is the one to close, never a request racing the server's close.
KEEP_ALIVE = 75


def _uvicorn_options(host: str, port: int, log_level: str) -> dict[str, Any]:
    """The uvicorn options every server here runs with (one process or several).

    h11 (with a header deadline and a connection cap: ``guard``) and no websockets:
    nothing here needs them, and their optional C or websocket libraries would only add
    import-time surprises."""
    return {
        "host": host,
        "port": port,
        "log_level": log_level,
        "access_log": log_level == "debug",
        "http": GuardedH11Protocol,
        "ws": "none",
        "lifespan": "off",
        "timeout_keep_alive": KEEP_ALIVE,
    }


def uvicorn_config(app: Any, host: str, port: int, log_level: str, **kw: Any) -> uvicorn.Config:
    return uvicorn.Config(app, **_uvicorn_options(host, port, log_level), **kw)


def serve_ui(
    root: Path,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    *,
    settings: ServerSettings | None = None,
    crash_timeout: float = 60.0,
    log_level: str = "warning",
    announce: Callable[[str], None] | None = None,
    insecure_no_auth: bool = False,
    alert_destinations: Sequence[Destination] = (),
    first_index_seconds: float = FIRST_INDEX_SECONDS,
) -> None:
    """Index ``root`` into ``<root>/.rankwise/index.db``, follow it, and serve it.

    It serves once the directory is indexed, or after ``first_index_seconds`` of
    indexing, whichever comes first; what is left is indexed while it serves (runs and
    steps appear as it goes; a run whose files are not all read shows running).

    No login: it is one person's local directory. Off loopback that would expose it to
    the network, so a non-loopback ``host`` needs ``insecure_no_auth``.
    ``alert_destinations`` (``--alerts FILE``, ``--alert-*``) replace those of the
    previous start; the alert threads run alongside.
    """
    if not is_loopback(host) and not insecure_no_auth:
        raise UsageError(
            f"rankwise ui has no login, so it serves only loopback, not {host}: serve runs "
            "to a team with `rankwise server` and tokens, or pass --insecure-no-auth"
        )
    if insecure_no_auth:
        warn_no_auth(host)
    settings = dataclasses.replace(settings or ServerSettings(), auth=False)
    root = Path(root).expanduser().absolute()
    if root.exists() and not root.is_dir():
        raise UsageError(f"{root} is a file, not a data directory: pass --dir DIRECTORY")
    fresh = not root.exists()
    try:
        root.mkdir(parents=True, exist_ok=True)  # runs may start writing there later
    except OSError as exc:
        raise UsageError(f"cannot create the data directory {root}: {exc.strerror}") from None
    from ..store.blobs import RunDirBlobStore

    # Blobs are served from the run folders that wrote them: nothing is copied.
    settings = dataclasses.replace(settings, tails_dir=root, blobs=RunDirBlobStore(root))
    tune_gil()  # its tailer writes the index as a server's ingest does
    store = open_db(index_url(root), crash_timeout)
    store.local_pids = True  # the streams are this host's own files, not uploads
    store.replace_config_destinations(alert_destinations)
    limits = Limits(settings.max_keys_per_run, settings.max_table_cells)
    tailer = DirectoryTailer(root, store, limits=limits, blobs=settings.blobs)
    store.local_pids = tailer.read_to_end  # a dead writer's stream: crashed once all read
    if announce is None:
        _say_indexing(root)
    # The first pass before serving, so the dashboard opens on full data, unless the
    # directory takes longer than first_index_seconds: then the tailer's passes go on.
    began = time.monotonic()
    tailer.poll(deadline=began + max(0.0, first_index_seconds))
    left, total = tailer.behind()
    if left:
        threading.Thread(
            target=_say_indexed, args=(tailer, root, began), name="rankwise-indexed", daemon=True
        ).start()
    tailer.start()
    from .edit_files import EditFiles

    edit_files = EditFiles(root, store)  # edits.jsonl beside the runs (rankwise.edits)
    edit_files.poll()
    edit_files.start()
    alerts = start_alerts(store, settings.alerts, crash_timeout)
    sweeper = start_sweep(store, settings)
    noted: list[Path | None] = []

    def ready(url: str) -> None:
        from ..sdk.announce import note_ui

        noted.append(note_ui(root, url))  # so init() there can print this address
        if announce is not None:
            announce(url)
            return
        waiting = " (new: runs will show as they start)" if fresh else ""
        if left:
            waiting = (
                f" (still indexing {_amount(left)} of {_amount(total)}: runs and steps show "
                "as it goes)"
            )
        print(f"rankwise: serving {root}{waiting} at {url}", flush=True)

    try:
        _Server(uvicorn_config(create_app(store, settings), host, port, log_level), ready).run()
    finally:
        sweeper.stop()
        if alerts is not None:
            alerts.stop()
        tailer.stop()
        edit_files.stop()
        store.close()
        for path in noted:
            if path is not None:
                path.unlink(missing_ok=True)


def _say_indexed(tailer: DirectoryTailer, root: Path, began: float) -> None:
    """Once ``rankwise ui``, serving, has indexed what its first pass left: say so."""
    while not tailer.stopped():
        left, total = tailer.behind()
        if not left:
            took = time.monotonic() - began
            print(f"rankwise: indexed {root} ({_amount(total)}) in {took:.0f} s", flush=True)
            return
        time.sleep(2.0)


def _amount(n: int) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e9 else f"{n / 1e6:.1f} MB"


def _say_indexing(root: Path) -> None:
    """A large directory takes seconds to index before the address is printed: say so."""
    from ..stream.files import iter_stream_files

    found = list(iter_stream_files(root))
    if not found:
        return
    size = 0
    for f in found:
        try:
            size += f.path.stat().st_size
        except OSError:
            pass
    runs = len({(f.id.project, f.id.run_id) for f in found})
    print(
        f"rankwise: indexing {root}: {runs} run(s), {len(found)} stream file(s), "
        f"{size / 1e6:.1f} MB (what was indexed before is skipped) ...",
        flush=True,
    )


# The store's writer (the group committer, SQLite's writer thread) releases the GIL around
# every database step, thousands per batch, and with CPython's default 5 ms switch interval
# each step may wait that long for the event loop to let go: under load, batches took
# two to three times their CPU time (bench_load at 1,000 ranks, 2 cores). 0.5 ms keeps
# the writer moving; the price is more switches between busy threads.
GIL_SWITCH_INTERVAL = 0.0005


def tune_gil() -> None:
    """Set this server process's GIL switch interval (see ``GIL_SWITCH_INTERVAL``) and
    cap its malloc arenas (``arenas.limit_arenas``), before it starts its threads."""
    sys.setswitchinterval(GIL_SWITCH_INTERVAL)
    limit_arenas()


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
    if settings.blobs is None:
        settings = dataclasses.replace(settings, blobs=default_blobs(url))
    tune_gil()
    store = open_db(url, crash_timeout)
    try:
        bootstrap_auth(store, host, settings.auth)
    except BaseException:
        store.close()
        raise
    if workers <= 1:
        alerts = start_alerts(store, settings.alerts, crash_timeout)
        sweeper = start_sweep(store, settings)
        try:
            _Server(uvicorn_config(create_app(store, settings), host, port, log_level), say).run()
        finally:
            sweeper.stop()
            if alerts is not None:
                alerts.stop()
            store.close()
        return
    store.close()
    os.environ[_DB_ENV] = url
    os.environ[_CRASH_ENV] = str(crash_timeout)
    os.environ[_SETTINGS_ENV] = settings_to_env(settings)
    os.environ[_BLOBS_ENV] = blobs_spec(settings.blobs)
    os.environ[_BLOBS_ENDPOINT_ENV] = getattr(settings.blobs, "endpoint", None) or ""
    say(f"http://{_url_host(host)}:{port} ({workers} workers)")
    uvicorn.run(
        "rankwise.server.serve:worker_app",
        factory=True,
        workers=workers,
        **_uvicorn_options(host, port, log_level),
    )


def worker_app() -> Any:
    """The app of one worker process of ``rankwise server --workers N``."""
    url = os.environ.get(_DB_ENV)
    if not url:
        raise RuntimeError(f"{_DB_ENV} is not set: start workers with `rankwise server`")
    tune_gil()
    settings = dataclasses.replace(
        settings_from_env(os.environ.get(_SETTINGS_ENV) or "{}"),
        blobs=open_blob_store(
            os.environ.get(_BLOBS_ENV) or str(default_root(url)),
            os.environ.get(_BLOBS_ENDPOINT_ENV) or None,
        ),
    )
    from ..store import open_store

    try:  # uvicorn calls this factory inside the worker's event loop
        install_accept_log(asyncio.get_running_loop())
    except RuntimeError:
        pass
    crash_timeout = float(os.environ.get(_CRASH_ENV) or 60.0)
    store = open_store(url, crash_timeout=crash_timeout)
    # Each worker judges and delivers too; the store decides each event once and hands
    # each delivery to one worker (rankwise.server.alert_watch).
    start_alerts(store, settings.alerts, crash_timeout)
    start_sweep(store, settings)  # purges are idempotent: every worker may sweep
    return create_app(store, settings)


def start_sweep(store: Any, settings: ServerSettings) -> TrashSweep:
    """The trash sweep (``rankwise.server.trash_sweep``): it first finishes the purges a
    crash interrupted, then purges what outlived the retention, every so often."""
    return TrashSweep(
        store, settings.blobs, settings.trash_retention_days, settings.trash_sweep_every
    ).start()


def settings_to_env(settings: ServerSettings) -> str:
    """``settings`` as JSON for the worker processes (all but the blob store)."""
    out: dict[str, Any] = {}
    for field in dataclasses.fields(settings):
        if field.name == "blobs":
            continue
        value = getattr(settings, field.name)
        if isinstance(value, AlertSettings):
            value = dataclasses.asdict(value)
        out[field.name] = str(value) if isinstance(value, Path) else value
    return json.dumps(out)


def settings_from_env(text: str) -> ServerSettings:
    """The ``ServerSettings`` ``settings_to_env`` wrote (blobs left to the caller)."""
    given = json.loads(text)
    known = {f.name for f in dataclasses.fields(ServerSettings)} - {"blobs"}
    values: dict[str, Any] = {}
    for name, value in given.items():
        if name not in known:
            continue
        if name == "alerts":
            values[name] = AlertSettings(**value)
        elif name in ("static_dir", "tails_dir"):
            values[name] = None if value is None else Path(value)
        elif isinstance(getattr(ServerSettings, name), tuple):
            values[name] = tuple(value)
        else:
            values[name] = value
    return ServerSettings(**values)


def default_blobs(url: str) -> BlobStore:
    """``rankwise server`` without ``--blobs``: a directory (``blobs.default_root``)."""
    root = default_root(url)
    if not url.startswith("sqlite:"):
        print(
            f"rankwise: keeping blobs in {root} (no --blobs given); with several server "
            "hosts pass --blobs s3://bucket/prefix or a shared directory",
            flush=True,
        )
    return LocalBlobStore(root)


def blobs_spec(blobs: BlobStore | None) -> str:
    """What ``open_blob_store`` reopens ``blobs`` from in a worker process."""
    if isinstance(blobs, LocalBlobStore):
        return str(blobs.root)
    if isinstance(blobs, FsspecBlobStore):
        return blobs.url
    return ""


def is_loopback(host: str) -> bool:
    if host.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def warn_no_auth(host: str) -> None:
    """The banner of every start without authentication."""
    line = "!" * 78
    print(
        f"{line}\nrankwise: WARNING: authentication is OFF (--insecure-no-auth). Anyone who "
        f"can reach {host} can read every run and write into every project.\n{line}",
        file=sys.stderr,
        flush=True,
    )


def bootstrap_auth(store: Store, host: str, auth: bool) -> None:
    """Refuse an unprotected start, or create the first admin token and print it once.

    Off loopback with no live token at all, nobody could have been handed credentials
    on purpose yet: refuse (the team creates tokens first). Otherwise a store with no
    admin token gets one, printed here once, never a default password.
    """
    if not auth:
        warn_no_auth(host)
        return
    if store.has_admin_token():
        return
    if not is_loopback(host) and not store.list_tokens():
        raise UsageError(
            f"refusing to serve on {host} with no tokens in the store: create one first with "
            "`rankwise token create --db URL --role admin` (or serve on 127.0.0.1 once to "
            "get one printed), or pass --insecure-no-auth to run without authentication"
        )
    new = store.create_token("admin", None, "bootstrap admin")
    print(
        "rankwise: this store had no admin token, so one was created. It is shown only "
        "now; keep it (log in to the dashboard with it, create tokens with it):\n"
        f"{new.value}",
        flush=True,
    )
