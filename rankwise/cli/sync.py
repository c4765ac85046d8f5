"""``rankwise sync [PATH] --server URL``: upload offline runs, and their artifacts, to a
server (safe to repeat: what the server has is skipped)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..errors import UsageError
from ..settings import default_dir, default_server
from .artifacts import cmd_sync_artifacts


def add_sync_command(sub: Any) -> None:
    p = sub.add_parser("sync", help="upload offline runs to a server (safe to repeat)")
    p.add_argument(
        "path", nargs="?", default=None, help="data dir, project dir, run dir or stream file"
    )
    p.add_argument("--server", default=None, help="server URL (RANKWISE_SERVER)")
    p.add_argument("--token", default=None, help="an ingest token (RANKWISE_TOKEN)")
    p.add_argument("--follow", action="store_true", help="keep uploading until runs finish")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument(
        "--retry-for",
        type=float,
        default=120.0,
        help="give up after the server was unreachable this long (s, default 120)",
    )
    p.set_defaults(func=cmd_sync)


def cmd_sync(args: argparse.Namespace) -> int:
    from ..sdk.sync import sync

    server = default_server(args.server)
    if not server:
        raise UsageError("rankwise sync needs --server URL (or RANKWISE_SERVER)")
    path = default_dir(args.path, read=True)
    report = sync(
        path,
        server,
        follow=args.follow,
        progress=False if args.no_progress else None,
        retry_for=args.retry_for,
        token=args.token,
    )
    print(
        f"rankwise: synced {report.streams} stream(s) from {path} to {server}: "
        f"{report.uploaded_bytes} new bytes, {report.blob_bytes} blob bytes"
    )
    for where, why in sorted(report.failed.items()):
        print(f"rankwise: error: {where}: {why}", file=sys.stderr)
    artifacts_failed = cmd_sync_artifacts(path, server, args.token) if path.is_dir() else 0
    return 1 if report.failed or artifacts_failed else 0
