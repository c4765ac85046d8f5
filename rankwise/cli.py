"""The rankwise command line: list and show runs, serve the dashboard, sync offline runs,
list, get and put artifacts."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from collections.abc import Sequence
from typing import Any

from ._datadir import default_dir
from .api import Api, RunInfo
from .errors import RankwiseError, RunNotFoundError, UsageError
from .read.model import CrossRankValue
from .stream.records import STATES


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


def _mode(run: RunInfo) -> str:
    """The run mode as what was recorded (the dashboard's ``fmtMode``): "shared" alone
    reads wrong for a script whose rank 0 alone called init (W&B's default)."""
    if run.run_mode == "new":
        return f"new: one run per process (this is {run.label})" if run.label else "new"
    if run.world_size > 1 and run.run_ranks == 1:
        return f"{run.label or 'one rank'} only, of {run.world_size} ranks"
    if run.run_mode == "shared":
        if run.world_size > 1 and run.run_ranks < run.world_size:
            return f"shared: {run.run_ranks} of {run.world_size} ranks"
        return "shared: every rank"
    return str(run.run_mode)


def _state(run: RunInfo) -> str:
    first = run.first_failure
    if run.crashed:  # the first failure leads the list
        names = sorted(run.crashed, key=lambda label: first is None or label != first.label)
        return f"crashed ({', '.join(names)})"
    if first is not None and run.state in ("failed", "killed"):
        return f"{run.state} (first: {first.label})"
    return run.state


def _local_api(args: argparse.Namespace) -> Api:
    api = Api(args.dir)
    api.projects()  # a missing data directory: Api's UsageError, naming --dir
    return api


def _no_project(api: Api, project: str) -> UsageError:
    known = api.projects()
    have = f"its projects: {', '.join(known)}" if known else "it holds no runs yet"
    return UsageError(
        f"no project {project!r} under {api.dir} ({have}): check --project (or "
        "RANKWISE_PROJECT in the training script) and --dir"
    )


def _failure_lines(run: RunInfo) -> list[str]:
    """The cause first, then what followed, with times relative to the cause."""
    first = run.first_failure
    if first is None:
        return []
    when = time.strftime("%H:%M:%S", time.localtime(first.time)) if first.time else "?"
    # A silent rank's line already says since when.
    lines = [f"first    {first.describe()}" + ("" if first.state == "silent" else f"  (at {when})")]
    for later in first.then:
        delta = (
            f"+{later.time - first.time:.1f} s"
            if later.time is not None and first.time is not None
            else "later"
        )
        lines.append(f"then     {later.describe()}  ({delta})")
    return lines


def _hang_lines(run: RunInfo) -> list[str]:
    """The hang report (``rankwise.hang``): its message, then the roll call."""
    hang = run.hang
    if hang is None:
        return []
    since = f"  (since {time.strftime('%H:%M:%S', time.localtime(hang.time))})" if hang.time else ""
    lines = [f"hang     {hang.message}{since}"]
    lines.extend(f"         {line}" for line in hang.lines[1:])
    return lines


def cmd_runs(args: argparse.Namespace) -> int:
    api = _local_api(args)
    runs = api.runs(
        project=args.project, group=args.group, state=args.state or None, tags=args.tag or None
    )
    if not runs:
        if args.project and args.project not in api.projects():
            raise _no_project(api, args.project)
        filtered = args.group or args.state or args.tag
        print(f"no runs{' match these filters' if filtered else ''} under {api.dir}")
        return 0
    rows = [
        [
            f"{r.project}/{r.id}" if not args.project else r.id,
            r.name,
            r.group or "-",
            _state(r),
            str(r.world_size),
            str(len({s.label for s in r.streams})),
            str(r.steps),
            _ago(r.created),
        ]
        for r in runs
    ]
    print(_table(rows, ["id", "name", "group", "state", "ranks", "streams", "steps", "created"]))
    return 0


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        if value != value:
            return "NaN"
        if value in (float("inf"), float("-inf")):
            return "∞" if value > 0 else "−∞"
        return f"{value:.6g}"
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return str(value)


def _print_summary(run: Any) -> None:
    ranks = run.summary_ranks
    if len(ranks) <= 1:
        print("\nsummary")
        for k, v in sorted(run.summary.items()):
            print(f"  {k:<28} {_fmt(v)}")
        return
    print("\nsummary (primary rank)")
    for k, v in sorted(run.summary.items()):
        print(f"  {k:<28} {_fmt(v)}")
    cross = run.summary_cross_rank
    if cross:
        print(
            "\ncross-rank line, last complete step (its define_metric reduce, else the "
            "mean, weighted where weights were logged)"
        )
        for k, c in sorted(cross.items()):
            bad = _nonfinite_note(c)
            if c.reduce in ("sum", "min", "max"):  # run.define_metric(reduce=) chose it
                line, extra = f"{_fmt(c.value)} ({c.reduce})", f"  (mean {_fmt(c.mean)})"
            else:
                line = _fmt(c.wmean)
                extra = "" if line == _fmt(c.mean) else f"  (mean {_fmt(c.mean)})"
            print(
                f"  {k:<28} {line} at step {c.step}, {c.n} values, "
                f"min {_fmt(c.min)} max {_fmt(c.max)}{extra}{bad}"
            )
    print("\nsummary by rank")
    keys = sorted({k for vals in ranks.values() for k in vals})
    labels = sorted(ranks, key=_label_order)
    shown = labels[:8]
    more = f"  (+{len(labels) - 8} more ranks)" if len(labels) > 8 else ""
    for k in keys:
        cells = "  ".join(f"{lab} {_fmt(ranks[lab].get(k, '-'))}" for lab in shown)
        print(f"  {k:<28} {cells}{more}")


def _nonfinite_note(c: CrossRankValue) -> str:
    """ ", NaN on 2, ∞ on 1": the values a cross-rank line left out, by kind."""
    parts = [
        f"{name} on {count}"
        for count, name in ((c.nan, "NaN"), (c.posinf, "∞"), (c.neginf, "−∞"))
        if count
    ]
    return ", " + ", ".join(parts) if parts else ""


def _label_order(label: str) -> tuple[str, int]:
    head, _, tail = label.rpartition("-")
    return (head, int(tail)) if tail.isdigit() else (label, -1)


def cmd_show(args: argparse.Namespace) -> int:
    api = _local_api(args)
    try:
        run = api.run(args.run, project=args.project)
    except RunNotFoundError:
        project, _, name = args.run.rpartition("/") if "/" in args.run else ("", "", args.run)
        members = api.runs(project=args.project or project or None, group=name)
        if not members:
            raise
        ids = ", ".join(r.id for r in members[:5]) + (" ..." if len(members) > 5 else "")
        raise UsageError(
            f"{name!r} is a group of {len(members)} run(s) ({ids}), not a run: "
            f"list them with `rankwise runs --group {name}`, or show one of them"
        ) from None
    print(f"run      {run.project}/{run.id}  ({run.name})")
    for line in _hang_lines(run):  # a hung job's roll call comes first
        print(line)
    for d in run.divergence:  # then the rank that went non-finite first, per metric
        print(f"diverged {d.message}")
    print(f"state    {_state(run)}")
    for line in _failure_lines(run):
        print(line)
    print(
        f"group    {run.group or '-'}   job type {run.job_type or '-'}   "
        f"tags {', '.join(run.tags) or '-'}"
    )
    job = ""
    if (run.run_ranks, run.run_nodes) != (run.world_size, run.num_nodes):
        job = f" (the job: {run.world_size} on {run.num_nodes})"
    print(f"ranks    {run.run_ranks} on {run.run_nodes} node(s){job}, mode {_mode(run)}")
    print(f"created  {_ago(run.created)}   last seen {_ago(run.updated)}")
    env = run.environment
    if env:
        print(f"command  {shlex.join(env.get('command') or []) or '-'}")
        print(
            f"python   {env.get('python') or '-'} on {env.get('platform') or '-'}   "
            f"launcher {env.get('launcher') or '-'}   rankwise {env.get('rankwise_version') or '-'}"
        )
    print("\nconfig")
    for k, v in sorted(run.config.items()):
        if k == "_wandb":  # rankwise.wandb's run metadata, hidden as wandb.config hides it
            continue
        print(f"  {k:<28} {_fmt(v)}")
    _print_summary(run)
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
    first = run.first_failure
    lead = (first.label, first.incarnation) if first else None
    # The first failure's error leads; the others follow in stream order.
    for s in sorted(run.streams, key=lambda s: (s.label, s.incarnation) != lead):
        if s.error_type:
            print(f"\n{s.label} (incarnation {s.incarnation}) {s.error_type}: {s.error_message}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rankwise", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--dir", default=None, help="data directory (RANKWISE_DIR, ./rankwise-runs)")
        p.add_argument("--project", default=None, help="only this project")

    p = sub.add_parser("runs", help="list runs")
    common(p)
    p.add_argument("--state", action="append", choices=STATES, help="only runs in this state")
    p.add_argument("--group", default=None, help="only the runs of this group")
    p.add_argument("--tag", action="append", help="only runs with this tag (repeatable: all)")
    p.set_defaults(func=cmd_runs)
    p = sub.add_parser("show", help="config, summary and streams of one run")
    p.add_argument("run", help="run id (or project/id)")
    common(p)
    p.set_defaults(func=cmd_show)
    _server_commands(sub)
    return parser


def _server_commands(sub: Any) -> None:
    p = sub.add_parser("ui", help="index a data directory, follow live runs, serve the dashboard")
    p.add_argument("--dir", default=None, help="data directory (RANKWISE_DIR, ./rankwise-runs)")
    _listen(p)
    _insecure(p)
    from .alert_cli import add_serve_flags

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
    from .token_cli import add_token_commands

    add_token_commands(sub)
    from .artifact_cli import add_artifact_commands

    add_artifact_commands(sub)
    from .alert_cli import add_alert_commands

    add_alert_commands(sub)
    from .edit_cli import add_parser as add_edit_command

    add_edit_command(sub)
    p = sub.add_parser("import", help="import runs written by other tools")
    isub = p.add_subparsers(dest="import_command", required=True)
    p = isub.add_parser("tensorboard", help="TensorBoard event files into a run (safe to repeat)")
    p.add_argument("source", help="folder of event files (one stream per event directory)")
    p.add_argument("--project", default=None, help="project (RANKWISE_PROJECT, or 'default')")
    p.add_argument("--run", default=None, help="run id (default: the folder's name)")
    p.add_argument("--dir", default=None, help="data directory (RANKWISE_DIR)")
    p.set_defaults(func=cmd_import_tensorboard)
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


def _serve_module() -> Any:
    try:
        from .server import serve
    except ImportError as exc:
        raise UsageError(
            f"the server needs its extras ({exc.name} is missing): pip install 'rankwise[server]'"
        ) from None
    return serve


def cmd_ui(args: argparse.Namespace) -> int:
    root = default_dir(args.dir, read=True)
    serve = _serve_module()
    from .alert_cli import alert_settings, ui_destinations
    from .server import ServerSettings

    settings = ServerSettings(allowed_hosts=_allowed_hosts(args), alerts=alert_settings(args))
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
    )
    return 0


def cmd_server(args: argparse.Namespace) -> int:
    serve = _serve_module()
    from .server import ServerSettings

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
    from .artifacts.manifest import CHUNK_BYTES

    if args.max_blob_mb * 1024 * 1024 < CHUNK_BYTES:
        print(
            f"rankwise server: --max-blob-mb {args.max_blob_mb:g} is below the "
            f"{CHUNK_BYTES // (1024 * 1024)} MiB chunks artifacts are uploaded in: artifact "
            f"uploads will be refused (use --max-blob-mb {CHUNK_BYTES // (1024 * 1024)} or more)",
            file=sys.stderr,
        )
    if args.max_table_cells < 1:
        raise UsageError("--max-table-cells must be at least 1")
    from .alert_cli import alert_settings

    blobs = None
    if args.blobs:
        from .server.blobs import open_blob_store

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


def _allowed_hosts(args: argparse.Namespace) -> tuple[str, ...]:
    from .server.hardening import allowed_hosts_for

    extra = [h.strip() for arg in args.allowed_hosts for h in arg.split(",") if h.strip()]
    hosts = allowed_hosts_for(args.host, extra)
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        print(
            f"rankwise: answering requests for Host {', '.join(hosts)} only; name others "
            "with --allowed-hosts",
            flush=True,
        )
    return hosts


def cmd_import_tensorboard(args: argparse.Namespace) -> int:
    from .tensorboard_import import describe, import_tensorboard

    started = time.monotonic()
    project = args.project or os.environ.get("RANKWISE_PROJECT") or "default"
    report = import_tensorboard(args.source, default_dir(args.dir), project, args.run)
    for line in describe(report, time.monotonic() - started):
        print(line)
    return 0


def cmd_sync(args: argparse.Namespace) -> int:
    from .sdk.sync import sync

    server = args.server or os.environ.get("RANKWISE_SERVER")
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
    from .artifact_cli import cmd_sync_artifacts

    artifacts_failed = cmd_sync_artifacts(path, server, args.token) if path.is_dir() else 0
    return 1 if report.failed or artifacts_failed else 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except RankwiseError as exc:
        print(f"rankwise: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # `rankwise show ... | head`: the reader left; stop quietly, as cat does. Python
        # would report the broken pipe again when it flushes stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
