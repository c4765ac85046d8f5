"""The rankwise command line: list and show runs, serve the dashboard, sync offline runs,
list, get and put artifacts."""

# One module a command group, each adding its parsers (``add_*``) and holding its
# ``cmd_*`` functions: runs (runs, show), serve (ui, server), tokens, artifacts, alerts,
# imports (import tensorboard), sync; _format prints tables, times and sizes. They import
# nothing of this module: it only builds the parser and runs the command.

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from ..errors import RankwiseError
from .alerts import add_alert_commands
from .artifacts import add_artifact_commands
from .edit import add_edit_command
from .imports import add_import_commands
from .reports import add_report_commands
from .rm import add_rm_commands
from .runs import add_run_commands
from .serve import add_serve_commands
from .sync import add_sync_command
from .tokens import add_token_commands

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rankwise", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    add_run_commands(sub)  # runs, show
    add_serve_commands(sub)  # ui, server
    add_token_commands(sub)
    add_artifact_commands(sub)
    add_alert_commands(sub)
    add_report_commands(sub)
    add_edit_command(sub)
    add_rm_commands(sub)  # rm, restore, trash, audit
    add_import_commands(sub)
    add_sync_command(sub)
    return parser


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
