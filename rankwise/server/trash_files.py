"""``rankwise ui``'s run folders as runs are deleted, restored and purged.

A deleted run's folder moves to ``<dir>/.trash/<project>/<run>`` (a name no project can
have, so no reader walks it): ``Api(dir=)`` and every tool reading the data directory
stop seeing it, and a restore moves it back. A purge removes the folder wherever it is.
A folder that cannot move (another process holds it on a system that forbids that) is
named in a warning; the index still hides the run.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Iterable
from pathlib import Path

TRASH = ".trash"
_logger = logging.getLogger("rankwise.server")


def trash_dir(root: Path, project: str, run: str) -> Path:
    return root / TRASH / project / run


def _move(src: Path, dst: Path) -> None:
    if not src.is_dir():
        return
    try:
        dst.parent.mkdir(parents=True, exist_ok=True)
        if dst.exists():
            shutil.rmtree(dst)
        os.replace(src, dst)
    except OSError as exc:
        _logger.warning("could not move %s to %s: %s", src, dst, exc)


def to_trash(root: Path, project: str, runs: Iterable[str]) -> None:
    for run in runs:
        _move(root / project / run, trash_dir(root, project, run))


def from_trash(root: Path, project: str, runs: Iterable[str]) -> None:
    for run in runs:
        _move(trash_dir(root, project, run), root / project / run)


def remove(root: Path, project: str, runs: Iterable[str]) -> None:
    for run in runs:
        for path in (root / project / run, trash_dir(root, project, run)):
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
