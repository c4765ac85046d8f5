"""``rankwise report list|show|export``: reports from a data directory or a server.

``export NAME --out report.html`` writes one self-contained HTML file (the dashboard's
report page with its data inline; opens offline), and ``--pdf report.pdf`` prints it
with headless Chromium when installed (``rankwise.report_export``).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..settings import default_project


def add_report_commands(sub: Any) -> None:
    """Register ``rankwise report ...`` on the CLI's subparsers."""
    p = sub.add_parser("report", help="list, show and export reports (pages of text and panels)")
    rsub = p.add_subparsers(dest="report_command", required=True)

    def where(q: argparse.ArgumentParser) -> None:
        q.add_argument("--dir", default=None, help="data directory (RANKWISE_DIR, ./rankwise-runs)")
        q.add_argument("--server", default=None, help="a server's URL instead of a directory")
        q.add_argument("--token", default=None, help="a read token of the server (RANKWISE_TOKEN)")
        q.add_argument("--project", default=None, help="project (RANKWISE_PROJECT, 'default')")

    q = rsub.add_parser("list", help="the reports of a project")
    where(q)
    q.set_defaults(func=handle)
    q = rsub.add_parser("show", help="one report's title, version and blocks")
    q.add_argument("name", help="report name (or project/name)")
    q.add_argument("--version", type=int, default=None, help="an older version (default latest)")
    where(q)
    q.set_defaults(func=handle)
    q = rsub.add_parser("export", help="one self-contained HTML file (and a PDF) of a report")
    q.add_argument("name", help="report name (or project/name)")
    q.add_argument("--out", required=True, help="the HTML file to write")
    q.add_argument("--pdf", default=None, help="also print a PDF with headless Chromium")
    q.add_argument("--version", type=int, default=None, help="an older version (default latest)")
    where(q)
    q.set_defaults(func=handle)


def _split(args: argparse.Namespace) -> tuple[str, str]:
    name: str = args.name
    project = args.project
    if project is None and "/" in name:
        project, name = name.split("/", 1)
    return default_project(project), name


def _token(args: argparse.Namespace) -> str | None:
    return args.token or os.environ.get("RANKWISE_TOKEN")


def handle(args: argparse.Namespace) -> int:
    from ..api import Api
    from ..settings import default_dir

    server = args.server
    if args.report_command == "list":
        project = default_project(args.project)
        api = Api(dir=args.dir, server=server, token=_token(args))
        reports = api.reports(project)
        if not reports:
            print(f"rankwise: no reports in project {project!r}")
            return 0
        width = max(len(r.name) for r in reports)
        for r in reports:
            print(f"{r.name:<{width}}  v{r.version:<3} {r.blocks:>3} blocks  {r.title}")
        return 0
    project, name = _split(args)
    if args.version is not None and args.version < 1:
        raise UsageError("--version is a version number, from 1")
    if args.report_command == "show":
        report = Api(dir=args.dir, server=server, token=_token(args)).report(
            name, project=project, version=args.version
        )
        print(f"{report.project}/{report.name}  version {report.version} of {report.latest}")
        print(f"title: {report.title}")
        for i, block in enumerate(report.blocks):
            print(f"  {i}: {block.get('type')} {_what(block)}")
        return 0
    from .. import report_export as X

    out = Path(args.out)
    if out.is_dir():
        raise UsageError(f"--out {out} is a directory: name the HTML file to write")
    if server is not None:
        html = X.export_from_server(server, _token(args), project, name, args.version)
    else:
        html = X.export_from_dir(default_dir(args.dir, read=True), project, name, args.version)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(html, encoding="utf-8")
    print(f"rankwise: wrote {out} ({len(html.encode()) // 1024} KiB, opens offline)")
    if args.pdf:
        X.print_pdf(out, Path(args.pdf))
        print(f"rankwise: wrote {args.pdf}")
    return 0


def _what(block: dict[str, Any]) -> str:
    if block.get("type") == "text":
        first = str(block.get("text", "")).strip().splitlines()
        return repr(first[0][:60]) if first else "(empty)"
    if block.get("type") == "chart":
        runs = ", ".join(f"{r.get('project')}/{r.get('run')}" for r in block.get("runs", []))
        return f"{', '.join(block.get('metrics', []))} of {runs}"
    if block.get("type") == "lineage":
        return f"{block.get('artifact')}:{block.get('version') or 'latest'}"
    run = block.get("run") or {}
    key = f" {block['key']}" if block.get("key") else ""
    return f"{run.get('project')}/{run.get('run')}{key}"
