"""Editing a run after the fact: name, tags, notes, group and job type.

An edit is one field's new whole value, with when it was made and by whom (``Edit``).
Edits come from two places and merge by time:

* the live run (``run.name = ...``, ``run.tags = ...``, ``run.notes = ...``): a
  ``RunEdit`` record in the stream (``rankwise.stream.records``);
* the dashboard, ``Api`` and ``rankwise edit``: the server keeps them in its
  ``run_edits`` table (``rankwise.store.run_edits``); ``rankwise ui`` and
  ``Api(dir=)`` keep them in ``edits.jsonl`` beside the run's streams (never in them).

A run's value of a field is the one its primary stream's ``StreamStart`` set, replaced by
each edit of that field in time order (ties in the order they were kept): the latest
wins. Every edit is kept; ``history`` lists them.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import msgspec

from .errors import UsageError
from .wire.edits import Edit as Edit  # the struct is the wire's; rankwise.edits works on it

FIELDS = ("name", "tags", "notes", "group", "job_type")
SOURCES = ("run", "api", "cli", "ui")
MAX_NOTES = 64 * 1024  # characters of Markdown
MAX_NAME = 256
MAX_TAG = 128
MAX_TAGS = 100
EDITS_FILE = "edits.jsonl"


def check_value(field: str, value: Any) -> Any:
    """``value`` fit for ``field`` (tags: deduplicated in order); ``UsageError`` if not."""
    if field not in FIELDS:
        raise UsageError(f"cannot edit {field!r}: editable fields are {', '.join(FIELDS)}")
    if field == "tags":
        if isinstance(value, str) or not isinstance(value, list | tuple):
            raise UsageError("tags are a list of strings, e.g. ['baseline', 'ddp']")
        out: list[str] = []
        for tag in value:
            if not isinstance(tag, str) or not tag.strip():
                raise UsageError(f"a tag is a non-empty string, not {tag!r}")
            if len(tag) > MAX_TAG:
                raise UsageError(f"a tag has at most {MAX_TAG} characters")
            if tag not in out:
                out.append(tag)
        if len(out) > MAX_TAGS:
            raise UsageError(f"a run has at most {MAX_TAGS} tags")
        return out
    if value is None:
        if field == "name":
            raise UsageError("a run's name cannot be cleared: pass a new name")
        return None
    if not isinstance(value, str):
        raise UsageError(f"{field} is a string, not {type(value).__name__}")
    if field == "notes":
        if len(value) > MAX_NOTES:
            raise UsageError(f"notes have at most {MAX_NOTES} characters")
        return value
    if field == "name" and not value.strip():
        raise UsageError("a run's name cannot be empty")
    if len(value) > MAX_NAME:
        raise UsageError(f"{field} has at most {MAX_NAME} characters")
    if "\n" in value or "\r" in value:
        raise UsageError(f"{field} is one line: no line breaks")
    return value


def changes(
    current_tags: Sequence[str],
    *,
    name: str | None = None,
    tags: Sequence[str] | None = None,
    add_tags: Sequence[str] = (),
    remove_tags: Sequence[str] = (),
    notes: str | None = None,
    group: str | None = None,
    job_type: str | None = None,
    clear: Sequence[str] = (),
) -> dict[str, Any]:
    """The fields an edit request changes, checked: ``tags`` replaces the list,
    ``add_tags``/``remove_tags`` change the current one; ``clear`` names fields set to
    none (notes, group, job_type)."""
    out: dict[str, Any] = {}
    for field in clear:
        if field not in ("notes", "group", "job_type"):
            raise UsageError(f"only notes, group and job_type can be cleared, not {field!r}")
        out[field] = None
    for field, value in (
        ("name", name),
        ("notes", notes),
        ("group", group),
        ("job_type", job_type),
    ):
        if value is not None:
            out[field] = check_value(field, value)
    if tags is not None or add_tags or remove_tags:
        new = list(tags) if tags is not None else list(current_tags)
        new += [t for t in add_tags if t not in new]
        new = [t for t in new if t not in set(remove_tags)]
        out["tags"] = check_value("tags", new)
    if not out:
        raise UsageError(
            "nothing to change: pass a name, tags (or tags to add or remove), notes, "
            "group or job_type"
        )
    return out


def make(fields: dict[str, Any], source: str, who: str | None = None) -> list[Edit]:
    """One ``Edit`` per changed field, all at one time."""
    now = time.time()
    return [Edit(field=f, value=v, at=now, source=source, who=who) for f, v in fields.items()]


def ordered(edits: Iterable[Edit]) -> list[Edit]:
    """Edits in the order they apply: by time; ties keep their order."""
    return sorted(edits, key=lambda e: e.at)


def apply(run: Any, edits: Iterable[Edit]) -> Any:
    """``run`` (a ``RunInfo``) with ``edits`` applied, the latest of each field winning."""
    latest: dict[str, Any] = {}
    for e in ordered(edits):
        if e.field in FIELDS:
            latest[e.field] = e.value
    if not latest:
        return run
    changes: dict[str, Any] = {}
    for field, value in latest.items():
        if field == "tags":
            changes["tags"] = list(value or [])
        elif field == "name":
            changes["name"] = value or run.id
        else:
            changes[field] = value
    out = msgspec.structs.replace(run, **changes)
    source = getattr(run, "_from", None)  # the reader that made it (RunInfo.attach)
    if source is not None:
        out._from = source
    return out


def live_edits(records: Iterable[Any]) -> list[Edit]:
    """The ``RunEdit`` records among ``records`` as edits (source ``run``)."""
    from .stream import records as R

    return [
        Edit(field=r.field, value=r.value, at=r.time, source="run")
        for r in records
        if isinstance(r, R.RunEdit) and r.field in FIELDS
    ]


# -- the data directory's edits file (rankwise ui, Api(dir=), rankwise edit --dir) -------

_dec = msgspec.json.Decoder(Edit)


def read_file(run_dir: Path) -> list[Edit]:
    """The edits kept beside a run's streams; a damaged line is skipped."""
    path = run_dir / EDITS_FILE
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    out = []
    for line in data.splitlines():
        if not line.strip():
            continue
        try:
            edit = _dec.decode(line)
        except msgspec.DecodeError:
            continue  # a torn last line of a write that did not finish
        if edit.field in FIELDS:
            out.append(edit)
    return out


def append_file(run_dir: Path, edits: Sequence[Edit]) -> None:
    """Append ``edits`` to the run's edits file (one line each, one write)."""
    if not run_dir.is_dir():
        raise UsageError(f"no run directory {run_dir}")
    data = b"".join(msgspec.json.encode(e) + b"\n" for e in edits)
    fd = os.open(run_dir / EDITS_FILE, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def as_json(edits: Sequence[Edit]) -> str:
    return json.dumps([msgspec.to_builtins(e) for e in edits])
