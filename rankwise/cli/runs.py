"""``rankwise runs`` and ``rankwise show``: list the runs of a data directory, and show one
(its hang report, divergence, state and first failure, config, summary and streams)."""

from __future__ import annotations

import argparse
import json
import shlex
import time
from typing import Any

from ..api import Api, RunInfo
from ..errors import RunNotFoundError, UsageError
from ..read.parallel import cpus
from ..stream.records import STATES
from ..wire.runs import CrossRankValue, StreamInfo
from ._format import ago, table


def add_run_commands(sub: Any) -> None:
    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--dir", default=None, help="data directory (RANKWISE_DIR, ./rankwise-runs)")
        p.add_argument("--project", default=None, help="only this project")
        p.add_argument(
            "--workers",
            type=int,
            default=None,
            help="processes reading a big run's stream files (default: the CPUs; 1: none)",
        )

    p = sub.add_parser("runs", help="list runs")
    common(p)
    p.add_argument("--state", action="append", choices=STATES, help="only runs in this state")
    p.add_argument("--group", default=None, help="only the runs of this group")
    p.add_argument("--tag", action="append", help="only runs with this tag (repeatable: all)")
    p.set_defaults(func=cmd_runs)
    p = sub.add_parser("show", help="config, summary and streams of one run")
    p.add_argument("run", help="run id (or project/id)")
    p.add_argument(
        "--all-streams",
        action="store_true",
        help=f"list every stream (over {MANY_STREAMS} streams, only those not finished are)",
    )
    common(p)
    p.set_defaults(func=cmd_show)


# Over this many streams ``show`` lists only those that did not finish cleanly.
MANY_STREAMS = 64


def shown_streams(run: RunInfo, every: bool) -> tuple[list[StreamInfo], str]:
    """The streams ``show`` lists, and a line about those it leaves out ("" when none)."""
    if every or len(run.streams) <= MANY_STREAMS:
        return list(run.streams), ""
    odd = [s for s in run.streams if s.state != "finished" or s.dropped or s.damage]
    rest = len(run.streams) - len(odd)
    return odd, f"  ... and {rest} more streams finished cleanly (--all-streams lists them)"


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
    # A big run's stream files are read in worker processes (rankwise.read.parallel).
    workers = getattr(args, "workers", None)
    if workers is not None and workers < 1:
        raise UsageError("--workers must be at least 1")
    api = Api(args.dir, workers=workers or cpus())
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
            ago(r.created),
        ]
        for r in runs
    ]
    print(table(rows, ["id", "name", "group", "state", "ranks", "streams", "steps", "created"]))
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
    print(f"created  {ago(run.created)}   last seen {ago(run.updated)}")
    env = run.environment
    if env:
        print(f"command  {shlex.join(env.get('command') or []) or '-'}")
        print(
            f"python   {env.get('python') or '-'} on {env.get('platform') or '-'}   "
            f"launcher {env.get('launcher') or '-'}   rankwise {env.get('rankwise_version') or '-'}"
        )
    git = run.git
    if git is not None and git.commit:
        state = "dirty" if git.dirty else "clean"
        print(f"git      {git.commit[:12]} on {git.branch or 'a detached HEAD'} ({state})"
              f"{'   ' + git.remote if git.remote else ''}")  # fmt: skip
    print("\nconfig")
    for k, v in sorted(run.config.items()):
        if k == "_wandb":  # rankwise.wandb's run metadata, hidden as wandb.config hides it
            continue
        print(f"  {k:<28} {_fmt(v)}")
    _print_summary(run)
    listed, left_out = shown_streams(run, getattr(args, "all_streams", False))
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
        for s in listed
    ]
    print(
        table(
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
    if left_out:
        print(left_out)
    first = run.first_failure
    lead = (first.label, first.incarnation) if first else None
    # The first failure's error leads; the others follow in stream order.
    for s in sorted(run.streams, key=lambda s: (s.label, s.incarnation) != lead):
        if s.error_type:
            print(f"\n{s.label} (incarnation {s.incarnation}) {s.error_type}: {s.error_message}")
    return 0
