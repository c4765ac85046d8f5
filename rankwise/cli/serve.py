"""``rankwise ui`` (a data directory's dashboard, local mode) and ``rankwise server``
(a database that runs upload to, remote mode): their flags and how they start the server."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..errors import UsageError
from ..settings import default_dir
from .alerts import add_serve_flags, alert_settings, ui_destinations


def add_serve_commands(sub: Any) -> None:
    p = sub.add_parser("ui", help="index a data directory, follow live runs, serve the dashboard")
    p.add_argument("--dir", default=None, help="data directory (RANKWISE_DIR, ./rankwise-runs)")
    p.add_argument(
        "--first-index-seconds",
        type=float,
        default=5.0,
        metavar="S",
        help="index for at most this long before serving; the rest is indexed while it "
        "serves (default 5)",
    )
    _listen(p)
    _insecure(p)
    add_serve_flags(p, ui=True)
    p.set_defaults(func=cmd_ui)
    p = sub.add_parser("server", help="serve a database that runs upload to (remote mode)")
    p.add_argument("--db", required=True, help="sqlite:///PATH or postgresql://USER@HOST/DB")
    _listen(p)
    p.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
    p.add_argument(
        "--max-body-mb", type=float, default=96, help="largest upload accepted (default 96)"
    )
    p.add_argument(
        "--max-inflight",
        type=int,
        default=256,
        help="uploads handled at once per worker; past it: 429 with Retry-After (0: no limit)",
    )
    p.add_argument(
        "--max-upload-interval",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="under load, ask uploaders to post at most every N seconds, N up to this "
        "(default 10; 0: never ask)",
    )
    p.add_argument(
        "--pace-target",
        type=float,
        default=0.5,
        metavar="SECONDS",
        help="the time an upload may take in this process before uploaders are asked to "
        "post less often (default 0.5)",
    )
    p.add_argument(
        "--blobs",
        default=None,
        metavar="PATH_OR_URL",
        help="where logged files (images, tables, ...) are kept: a directory, or "
        "s3://bucket/prefix (pip install 'rankwise[s3]'); default: blobs/ beside a SQLite "
        "file, ./rankwise-blobs for PostgreSQL",
    )
    p.add_argument(
        "--blobs-endpoint",
        default=None,
        metavar="URL",
        help="the S3 endpoint of --blobs s3://... (AWS_ENDPOINT_URL; default: AWS)",
    )
    p.add_argument(
        "--max-blob-mb",
        type=float,
        default=512,
        help="largest logged file (blob) accepted (default 512)",
    )
    p.add_argument(
        "--max-table-cells",
        type=int,
        default=100_000_000,  # ServerSettings.max_table_cells
        help="largest logged table accepted, rows x columns (default 100000000)",
    )
    _insecure(p)
    add_serve_flags(p, ui=False)
    p.set_defaults(func=cmd_server)


def _insecure(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--insecure-no-auth",
        action="store_true",
        help="serve with no authentication at all, even off loopback (prints a warning)",
    )


def _listen(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8585, help="port (default 8585)")
    p.add_argument("--log-level", default="warning", help="uvicorn log level (default warning)")
    p.add_argument(
        "--allowed-hosts",
        action="append",
        default=[],
        metavar="NAMES",
        help="Host header names answered besides localhost and the bound address: "
        "comma-separated, repeatable; '*.example.com' for a domain, '*' for any",
    )
    p.add_argument(
        "--crash-timeout",
        type=float,
        default=60.0,
        help="seconds a silent stream whose process is not seen alive stays running (60)",
    )
    p.add_argument(
        "--trash-days",
        type=float,
        default=30.0,
        help="days a deleted run stays restorable in the trash before it is purged (30)",
    )


def _serve_module() -> Any:
    try:
        from ..server import serve
    except ImportError as exc:
        raise UsageError(
            f"the server needs its extras ({exc.name} is missing): pip install 'rankwise[server]'"
        ) from None
    return serve


def cmd_ui(args: argparse.Namespace) -> int:
    root = default_dir(args.dir, read=True)
    serve = _serve_module()
    from ..server import ServerSettings

    settings = ServerSettings(
        allowed_hosts=_allowed_hosts(args),
        alerts=alert_settings(args),
        trash_retention_days=_trash_days(args),
    )
    destinations = ui_destinations(args)
    serve.serve_ui(
        root,
        args.host,
        args.port,
        settings=settings,
        crash_timeout=args.crash_timeout,
        log_level=args.log_level,
        insecure_no_auth=args.insecure_no_auth,
        alert_destinations=destinations,
        first_index_seconds=args.first_index_seconds,
    )
    return 0


def cmd_server(args: argparse.Namespace) -> int:
    serve = _serve_module()
    from ..server import ServerSettings

    if args.workers < 1:
        raise UsageError("--workers must be at least 1")
    if args.max_inflight < 0:
        raise UsageError("--max-inflight must be 0 (no limit) or more")
    if args.max_upload_interval < 0:
        raise UsageError("--max-upload-interval must be 0 (never ask) or more seconds")
    if args.pace_target <= 0:
        raise UsageError("--pace-target must be above 0 seconds")
    if args.max_blob_mb <= 0:
        raise UsageError("--max-blob-mb must be above 0")
    from ..artifacts.manifest import CHUNK_BYTES

    if args.max_blob_mb * 1024 * 1024 < CHUNK_BYTES:
        print(
            f"rankwise server: --max-blob-mb {args.max_blob_mb:g} is below the "
            f"{CHUNK_BYTES // (1024 * 1024)} MiB chunks artifacts are uploaded in: artifact "
            f"uploads will be refused (use --max-blob-mb {CHUNK_BYTES // (1024 * 1024)} or more)",
            file=sys.stderr,
        )
    if args.max_table_cells < 1:
        raise UsageError("--max-table-cells must be at least 1")
    blobs = None
    if args.blobs:
        from ..store.blobs import open_blob_store

        try:
            blobs = open_blob_store(args.blobs, args.blobs_endpoint)
        except ImportError as exc:
            raise UsageError(str(exc)) from None
    settings = ServerSettings(
        max_body_bytes=int(args.max_body_mb * 1024 * 1024),
        max_inflight=args.max_inflight,
        max_upload_interval=args.max_upload_interval,
        pace_target=args.pace_target,
        allowed_hosts=_allowed_hosts(args),
        auth=not args.insecure_no_auth,
        blobs=blobs,
        max_blob_bytes=int(args.max_blob_mb * 1024 * 1024),
        max_table_cells=args.max_table_cells,
        alerts=alert_settings(args),
        trash_retention_days=_trash_days(args),
    )
    serve.serve_db(
        args.db,
        args.host,
        args.port,
        workers=args.workers,
        settings=settings,
        crash_timeout=args.crash_timeout,
        log_level=args.log_level,
    )
    return 0


def _trash_days(args: argparse.Namespace) -> float:
    if not args.trash_days >= 0:
        raise UsageError("--trash-days must be 0 (purge at the next sweep) or more days")
    return float(args.trash_days)


def _allowed_hosts(args: argparse.Namespace) -> tuple[str, ...]:
    from ..server.hardening import allowed_hosts_for

    extra = [h.strip() for arg in args.allowed_hosts for h in arg.split(",") if h.strip()]
    hosts = allowed_hosts_for(args.host, extra)
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        print(
            f"rankwise: answering requests for Host {', '.join(hosts)} only; name others "
            "with --allowed-hosts",
            flush=True,
        )
    return hosts
