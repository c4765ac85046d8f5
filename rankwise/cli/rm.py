"""``rankwise rm``, ``rankwise restore``, ``rankwise trash`` and ``rankwise audit``:
delete runs, take them back, list the trash and the audit log.

``rankwise rm RUN...`` moves runs to the trash (restorable: ``rankwise restore RUN``;
a server purges its trash after ``--trash-days``, 30 by default); ``--purge`` removes
them for good. ``rankwise rm --filter '<json>'`` picks the runs by a W&B-style filter
and only prints them and their count (a dry run) unless ``--yes`` is given. Against a
server (``--server URL``, ``RANKWISE_SERVER``) it needs a write token of the project or
an admin token (``--token``, ``RANKWISE_TOKEN``); against a data directory (``--dir``)
the run folders move to ``<dir>/.trash``. See ``rankwise.deletion``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from ..errors import UsageError
from ..settings import default_server


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dir", default=None, help="data directory (RANKWISE_DIR, ./rankwise-runs)")
    p.add_argument("--project", default=None, help="the runs' project (RANKWISE_PROJECT)")
    p.add_argument("--server", default=None, help="a rankwise server (RANKWISE_SERVER)")
    p.add_argument("--token", default=None, help="a write or admin token (RANKWISE_TOKEN)")


def add_rm_commands(sub: Any) -> None:
    p = sub.add_parser(
        "rm",
        help="delete runs (to the trash; --purge: for good)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("runs", nargs="*", help="run ids (or project/id)")
    p.add_argument("--filter", default=None, help='pick runs by a filter, e.g. \'{"tags": "x"}\'')
    p.add_argument("--yes", action="store_true", help="with --filter: delete (not a dry run)")
    p.add_argument("--dry-run", action="store_true", help="only print the runs it would delete")
    p.add_argument("--purge", action="store_true", help="remove for good: not restorable")
    _common(p)
    p.set_defaults(func=cmd_rm)
    p = sub.add_parser("restore", help="take deleted runs out of the trash")
    p.add_argument("runs", nargs="+", help="run ids (or project/id)")
    _common(p)
    p.set_defaults(func=cmd_restore)
    p = sub.add_parser("trash", help="list the deleted runs of a project")
    _common(p)
    p.set_defaults(func=cmd_trash)
    p = sub.add_parser("audit", help="who deleted, restored or purged runs, when (admins)")
    _common(p)
    p.add_argument("--limit", type=int, default=100, help="newest entries shown (100)")
    p.set_defaults(func=cmd_audit)


def _api(args: argparse.Namespace) -> Any:
    from ..api import Api

    server = default_server(args.server)
    return Api(dir=args.dir, server=server, token=args.token or os.environ.get("RANKWISE_TOKEN"))


def cmd_rm(args: argparse.Namespace) -> int:
    if bool(args.runs) == (args.filter is not None):
        raise UsageError("name the runs to delete, or pick them with --filter '<json>'")
    filters = None
    if args.filter is not None:
        try:
            filters = json.loads(args.filter)
        except ValueError as exc:
            raise UsageError(f"--filter is not JSON: {exc}") from None
        if not isinstance(filters, dict):
            raise UsageError('--filter takes a JSON object, e.g. \'{"tags": "smoke"}\'')
    dry = args.dry_run or (filters is not None and not args.yes)
    api = _api(args)
    ids = sorted(
        api.delete_runs(args.runs, project=args.project, filters=filters, purge=args.purge,
                        dry_run=dry)
    )  # fmt: skip
    verb = "purge" if args.purge else "delete"
    if dry:
        print(f"would {verb} {len(ids)} run{'s' if len(ids) != 1 else ''}: {' '.join(ids)}")
        if filters is not None:
            print("nothing changed: run again with --yes to do it")
        return 0
    where = "for good" if args.purge else "to the trash (rankwise restore RUN brings one back)"
    print(f"{verb}d {len(ids)} run{'s' if len(ids) != 1 else ''} {where}: {' '.join(ids)}")
    asked = {r.split("/", 1)[-1] for r in args.runs}
    missing = sorted(asked - set(ids))
    if missing:
        print(f"not found or already deleted: {' '.join(missing)}", file=sys.stderr)
        return 1
    return 0


def cmd_restore(args: argparse.Namespace) -> int:
    done = _api(args).restore_runs(args.runs, project=args.project)
    print(f"restored {len(done)} run{'s' if len(done) != 1 else ''}: {' '.join(done)}")
    missing = sorted({r.split("/", 1)[-1] for r in args.runs} - set(done))
    if missing:
        print(f"not in the trash: {' '.join(missing)}", file=sys.stderr)
        return 1
    return 0


def cmd_trash(args: argparse.Namespace) -> int:
    from ._format import when

    runs = _api(args).trash(args.project)
    if not runs:
        print("the trash is empty")
        return 0
    for t in runs:
        by = f" by {t.deleted_by}" if t.deleted_by else ""
        until = "" if t.purge_after == float("inf") else f", purged after {when(t.purge_after)}"
        print(f"{t.id}  {t.name}  deleted {when(t.deleted_at)}{by}{until}")
    return 0


def cmd_audit(args: argparse.Namespace) -> int:
    from ._format import when

    for e in _api(args).audit_log(args.project, args.limit):
        print(f"{when(e.at)}  {e.who}  {e.action}  {e.project}  {e.count}  {e.target}")
    return 0
