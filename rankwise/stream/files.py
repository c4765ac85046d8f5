"""Where streams live on disk.

::

    <dir>/<project>/<run id>/streams/<label>.<incarnation>.rwlog

A stream file is created with ``O_EXCL`` and never reopened for writing, so no two
processes ever write one file, even on NFS or Lustre, and a restarted process (a new
incarnation) can never overwrite what an earlier one wrote: it takes the next free
incarnation number instead.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import UsageError
from ..names import casefold_clash
from .frames import MAGIC

SUFFIX = ".rwlog"


def run_dir(root: str | os.PathLike[str], project: str, run_id: str) -> Path:
    return Path(root) / project / run_id


def streams_dir(root: str | os.PathLike[str], project: str, run_id: str) -> Path:
    return run_dir(root, project, run_id) / "streams"


def check_case_aliases(root: str | os.PathLike[str], project: str, run_id: str, label: str) -> None:
    """Refuse a project, run or label that differs only in case from one on disk.

    On a case-insensitive filesystem (macOS, Windows shares) ``Run1`` and ``run1`` are
    one directory: writing both would mix two runs' streams in it.
    """
    steps = [(Path(root), project, "project"), (Path(root) / project, run_id, "run id")]
    labels = [lab for lab, _, _ in list_streams(streams_dir(root, project, run_id))]
    for parent, name, what in steps:
        try:
            names = [e.name for e in os.scandir(parent) if e.is_dir()]
        except (FileNotFoundError, NotADirectoryError):
            return
        other = casefold_clash(name, names)
        if other is not None:
            raise UsageError(
                f"{what} {name!r} differs only in case from {other!r}, which exists in "
                f"{parent}: use {other!r} or a name that differs in more than case"
            )
    other = casefold_clash(label, labels)
    if other is not None:
        raise UsageError(
            f"stream label {label!r} differs only in case from {other!r} in run {run_id!r}: "
            f"use {other!r} or another label"
        )


def stream_filename(label: str, incarnation: int) -> str:
    return f"{label}.{incarnation}{SUFFIX}"


def parse_stream_filename(name: str) -> tuple[str, int] | None:
    """``(label, incarnation)`` of a stream file name, or None for other files."""
    if not name.endswith(SUFFIX):
        return None
    stem = name[: -len(SUFFIX)]
    label, _, inc = stem.rpartition(".")
    if not label or not inc.isdigit():
        return None
    return label, int(inc)


def list_streams(directory: Path) -> list[tuple[str, int, Path]]:
    """Every stream file of a run as ``(label, incarnation, path)``, sorted."""
    out = []
    try:
        entries = list(os.scandir(directory))
    except FileNotFoundError:
        return []
    for entry in entries:
        parsed = parse_stream_filename(entry.name)
        if parsed is not None:
            out.append((parsed[0], parsed[1], Path(entry.path)))
    out.sort(key=lambda t: (t[0], t[1]))
    return out


def create_stream_file(directory: Path, label: str, first: int = 0) -> tuple[int, Path, int]:
    """Create the next free incarnation ``>= first`` of ``label``; returns (fd, path, n).

    The file is opened append-only and starts with ``MAGIC``.
    """
    directory.mkdir(parents=True, exist_ok=True)
    taken = [inc for lab, inc, _ in list_streams(directory) if lab == label]
    n = max([first, *(i + 1 for i in taken)])
    while True:
        path = directory / stream_filename(label, n)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
        except FileExistsError:
            n += 1
            continue
        os.write(fd, MAGIC)
        return fd, path, n
