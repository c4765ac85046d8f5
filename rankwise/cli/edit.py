"""``rankwise edit RUN``: change a run's name, tags, notes, group or job type.

Against a data directory (``--dir``, default ``RANKWISE_DIR`` or ``./rankwise-runs``)
the edit is kept beside the run's streams; against a server (``--server URL``, or
``RANKWISE_SERVER``) it needs a writer token (``--token``, ``RANKWISE_TOKEN``: a write
token of the project, its ingest token or an admin token). See ``rankwise.manage``.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from ..settings import default_server


def add_edit_command(sub: Any) -> None:
    p = sub.add_parser(
        "edit",
        help="change a run's name, tags, notes, group or job type",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("run", help="run id (or project/id)")
    p.add_argument("--dir", default=None, help="data directory (RANKWISE_DIR, ./rankwise-runs)")
    p.add_argument("--project", default=None, help="the run's project")
    p.add_argument("--server", default=None, help="a rankwise server (RANKWISE_SERVER)")
    p.add_argument("--token", default=None, help="a write, ingest or admin token (RANKWISE_TOKEN)")
    p.add_argument("--name", default=None, help="the new display name")
    p.add_argument("--tag", action="append", default=[], help="add this tag (repeatable)")
    p.add_argument("--untag", action="append", default=[], help="remove this tag (repeatable)")
    p.add_argument("--notes", default=None, help="the notes (Markdown); '' clears them")
    p.add_argument("--group", default=None, help="the group; '' clears it")
    p.add_argument("--job-type", default=None, help="the job type; '' clears it")
    p.set_defaults(func=cmd_edit)


def cmd_edit(args: argparse.Namespace) -> int:
    from ..api import Api

    server = default_server(args.server)
    api = Api(dir=args.dir, server=server, token=args.token or os.environ.get("RANKWISE_TOKEN"))
    clear = []
    fields: dict[str, Any] = {}
    for key, value in (("notes", args.notes), ("group", args.group), ("job_type", args.job_type)):
        if value == "":
            clear.append(key)
        elif value is not None:
            fields[key] = value
    run = api.edit_run(
        args.run,
        project=args.project,
        name=args.name,
        add_tags=args.tag,
        remove_tags=args.untag,
        clear=clear,
        source="cli",
        **fields,
    )
    print(f"run      {run.project}/{run.id}  ({run.name})")
    print(
        f"group    {run.group or '-'}   job type {run.job_type or '-'}   "
        f"tags {', '.join(run.tags) or '-'}"
    )
    if run.notes:
        print(f"notes    {run.notes.splitlines()[0][:100]}")
    return 0
