"""Run folders of a data directory as runs are deleted, restored and purged: what
``rankwise ui`` does beside its index, and ``Api(dir=)`` / ``rankwise rm --dir`` alone.

A deleted run's folder moves to ``<dir>/.trash/<project>/<run>`` (a name no project can
have, so no reader walks it): ``Api(dir=)`` and every tool reading the data directory
stop seeing it, and a restore moves it back. A purge removes the folder wherever it is.
A folder that cannot move (another process holds it on a system that forbids that) is
named in a warning; the index still hides the run.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
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


MARK = "deleted.json"  # beside a trashed run's streams: when, by whom
AUDIT = "audit.jsonl"  # <dir>/.trash/audit.jsonl: the data directory's audit log


def mark(root: Path, project: str, run: str, who: str) -> None:
    """Note when and by whom a trashed run was deleted (its folder already moved)."""
    path = trash_dir(root, project, run) / MARK
    if path.parent.is_dir():
        path.write_text(json.dumps({"deleted_at": time.time(), "deleted_by": who}))


def trashed(root: Path, project: str) -> list[tuple[str, float, str | None]]:
    """(run, deleted_at, deleted_by) of the project's trashed run folders, newest first."""
    out = []
    base = root / TRASH / project
    for run in sorted(base.iterdir()) if base.is_dir() else []:
        if not run.is_dir():
            continue
        try:
            info = json.loads((run / MARK).read_text())
        except (OSError, ValueError):
            info = {"deleted_at": run.stat().st_mtime, "deleted_by": None}
        out.append((run.name, float(info["deleted_at"]), info.get("deleted_by")))
    return sorted(out, key=lambda t: -t[1])


def audit(root: Path, who: str, action: str, project: str, target: str, count: int) -> None:
    path = root / TRASH / AUDIT
    path.parent.mkdir(parents=True, exist_ok=True)
    entry = {"at": time.time(), "who": who, "action": action, "project": project,
             "target": target, "count": count}  # fmt: skip
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(entry) + "\n")


def audit_entries(root: Path) -> list[dict[str, object]]:
    """The data directory's audit log, newest first."""
    try:
        lines = (root / TRASH / AUDIT).read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        try:
            out.append(json.loads(line))
        except ValueError:
            continue  # a line cut short by a crash
    return out[::-1]
