"""``rankwise import tensorboard DIR``: runs written by other tools, into a data directory
(``rankwise.tensorboard_import`` does the work)."""

from __future__ import annotations

import argparse
import time
from typing import Any

from ..settings import default_dir, default_project


def add_import_commands(sub: Any) -> None:
    p = sub.add_parser("import", help="import runs written by other tools")
    isub = p.add_subparsers(dest="import_command", required=True)
    p = isub.add_parser("tensorboard", help="TensorBoard event files into a run (safe to repeat)")
    p.add_argument("source", help="folder of event files (one stream per event directory)")
    p.add_argument("--project", default=None, help="project (RANKWISE_PROJECT, or 'default')")
    p.add_argument("--run", default=None, help="run id (default: the folder's name)")
    p.add_argument("--dir", default=None, help="data directory (RANKWISE_DIR)")
    p.set_defaults(func=cmd_import_tensorboard)


def cmd_import_tensorboard(args: argparse.Namespace) -> int:
    from ..tensorboard_import import describe, import_tensorboard

    started = time.monotonic()
    project = default_project(args.project)
    report = import_tensorboard(args.source, default_dir(args.dir), project, args.run)
    for line in describe(report, time.monotonic() - started):
        print(line)
    return 0
