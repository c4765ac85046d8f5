"""The ``rankwise`` command line."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .api import Api, RunInfo
from .errors import RankwiseError, UsageError


def _ago(t: float | None) -> str:
    if t is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


def _table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip()]
    for row in rows:
        lines.append("  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip())
    return "\n".join(lines)


def _state(run: RunInfo) -> str:
    if run.crashed:
        return f"crashed ({', '.join(run.crashed)})"
    return run.state


def cmd_runs(args: argparse.Namespace) -> int:
    runs = Api(args.dir).runs(project=args.project)
    if not runs:
        print(f"no runs under {Api(args.dir).dir}")
        return 0
    rows = [
        [
            f"{r.project}/{r.id}" if not args.project else r.id,
            r.name,
            _state(r),
            str(r.world_size),
            str(len({s.label for s in r.streams})),
            str(r.steps),
            _ago(r.created),
        ]
        for r in runs
    ]
    print(_table(rows, ["id", "name", "state", "ranks", "streams", "steps", "created"]))
    return 0


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return str(value)


def cmd_show(args: argparse.Namespace) -> int:
    run = Api(args.dir).run(args.run, project=args.project)
    print(f"run      {run.project}/{run.id}  ({run.name})")
    print(f"state    {_state(run)}")
    print(
        f"group    {run.group or '-'}   job type {run.job_type or '-'}   "
        f"tags {', '.join(run.tags) or '-'}"
    )
    print(f"ranks    {run.world_size} on {run.num_nodes} node(s), mode {run.run_mode}")
    print(f"created  {_ago(run.created)}   last seen {_ago(run.updated)}")
    print("\nconfig")
    for k, v in sorted(run.config.items()):
        print(f"  {k:<28} {_fmt(v)}")
    print("\nsummary")
    for k, v in sorted(run.summary.items()):
        print(f"  {k:<28} {_fmt(v)}")
    print("\nstreams")
    rows = [
        [
            s.label,
            str(s.incarnation),
            str(s.rank),
            str(s.node),
            s.host,
            str(s.pid),
            s.state,
            str(s.last_step),
            str(s.points),
            str(s.dropped),
            s.damage or "",
        ]
        for s in run.streams
    ]
    print(
        _table(
            rows,
            [
                "label",
                "inc",
                "rank",
                "node",
                "host",
                "pid",
                "state",
                "last step",
                "points",
                "dropped",
                "damage",
            ],
        )
    )
    for s in run.streams:
        if s.error_type:
            print(f"\n{s.label} (incarnation {s.incarnation}) {s.error_type}: {s.error_message}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rankwise", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--dir", default=None, help="data directory (RANKWISE_DIR, ./rankwise)")
        p.add_argument("--project", default=None, help="only this project")

    p = sub.add_parser("runs", help="list runs")
    common(p)
    p.set_defaults(func=cmd_runs)
    p = sub.add_parser("show", help="config, summary and streams of one run")
    p.add_argument("run", help="run id (or project/id)")
    common(p)
    p.set_defaults(func=cmd_show)
    _server_commands(sub)
    return parser


def _server_commands(sub: Any) -> None:
    p = sub.add_parser("ui", help="index a data directory, follow live runs, serve the dashboard")
    p.add_argument("--dir", default=None, help="data directory (RANKWISE_DIR, ./rankwise)")
    _listen(p)
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
    p.set_defaults(func=cmd_server)
    p = sub.add_parser("sync", help="upload offline runs to a server (safe to repeat)")
    p.add_argument(
        "path", nargs="?", default=None, help="data dir, project dir, run dir or stream file"
    )
    p.add_argument("--server", default=None, help="server URL (RANKWISE_SERVER)")
    p.add_argument("--follow", action="store_true", help="keep uploading until runs finish")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument(
        "--retry-for",
        type=float,
        default=120.0,
        help="give up after the server was unreachable this long (s, default 120)",
    )
    p.set_defaults(func=cmd_sync)


def _listen(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8585, help="port (default 8585)")
    p.add_argument("--log-level", default="warning", help="uvicorn log level (default warning)")
    p.add_argument(
        "--crash-timeout",
        type=float,
        default=60.0,
        help="seconds a silent stream whose process is not seen alive stays running (60)",
    )


def _serve_module() -> Any:
    try:
        from .server import serve
    except ImportError as exc:
        raise UsageError(
            f"the server needs its extras ({exc.name} is missing): pip install 'rankwise[server]'"
        ) from None
    return serve


def cmd_ui(args: argparse.Namespace) -> int:
    root = Path(args.dir or os.environ.get("RANKWISE_DIR") or "rankwise")
    _serve_module().serve_ui(
        root, args.host, args.port, crash_timeout=args.crash_timeout, log_level=args.log_level
    )
    return 0


def cmd_server(args: argparse.Namespace) -> int:
    serve = _serve_module()
    from .server import ServerSettings

    if args.workers < 1:
        raise UsageError("--workers must be at least 1")
    if args.max_inflight < 0:
        raise UsageError("--max-inflight must be 0 (no limit) or more")
    settings = ServerSettings(
        max_body_bytes=int(args.max_body_mb * 1024 * 1024), max_inflight=args.max_inflight
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


def cmd_sync(args: argparse.Namespace) -> int:
    from .sdk.sync import sync

    server = args.server or os.environ.get("RANKWISE_SERVER")
    if not server:
        raise UsageError("rankwise sync needs --server URL (or RANKWISE_SERVER)")
    path = Path(args.path or os.environ.get("RANKWISE_DIR") or "rankwise")
    report = sync(
        path, server, follow=args.follow, progress=not args.no_progress, retry_for=args.retry_for
    )
    print(
        f"rankwise: synced {report.streams} stream(s) from {path} to {server}: "
        f"{report.uploaded_bytes} new bytes"
    )
    for where, why in sorted(report.failed.items()):
        print(f"rankwise: error: {where}: {why}", file=sys.stderr)
    return 1 if report.failed else 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except RankwiseError as exc:
        print(f"rankwise: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
