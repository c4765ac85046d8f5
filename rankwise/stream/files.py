"""Where streams live on disk, how to find them, and how to read whole frames from them.

::

    <dir>/<project>/<run id>/streams/<label>.<incarnation>.rwlog

A stream file is created with ``O_EXCL`` and never reopened for writing, so no two
processes ever write one file, even on NFS or Lustre, and a restarted process (a new
incarnation) can never overwrite what an earlier one wrote: it takes the next free
incarnation number instead.

Every reader of a data directory (the local reader, ``rankwise ui``'s indexer,
``rankwise sync``) finds stream files through ``iter_run_dirs`` / ``iter_stream_files``,
so all of them skip the same things: a project, run or label that is not an id
(``rankwise.names``' rule: hidden ``.rankwise`` folders, dot files, stray names) and any
file that is not ``<label>.<incarnation>.rwlog``. They read frames through
``read_whole_frames``, so all of them stop at the same place and tell a torn tail (a
write in progress, or a crash's last frame) from damage the same way (``Damage.torn``).

A stream's uploaders (``rankwise.sdk.uploader``, ``rankwise sync``) find where to resume
(``offset_after``), which stream a file is (``read_stream_id``) and what the frames they
send hold (``records_naming_blobs``, ``has_finish``) here as well: the SDK holds no
stream-format code of its own.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..errors import UsageError
from ..names import casefold_clash, is_id
from . import records as R
from .frames import HEADER, MAGIC, MAX_FRAME, Damage, damage_at, iter_frames
from .identity import StreamId

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
    """Every stream file of a run as ``(label, incarnation, path)``, sorted; a file whose
    label is not an id (``rankwise.names``) is no stream."""
    out = []
    try:
        entries = list(os.scandir(directory))
    except FileNotFoundError:
        return []
    for entry in entries:
        parsed = parse_stream_filename(entry.name)
        if parsed is not None and is_id(parsed[0]) and entry.is_file():
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


@dataclass(frozen=True)
class StreamFile:
    """One stream file found under a data directory: which stream it is, and where."""

    id: StreamId
    path: Path


def _id_dirs(path: Path) -> list[Path]:
    """Sub-directories whose name could be a project or run id, sorted by name."""
    try:
        entries = list(os.scandir(path))
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return []
    return sorted(Path(e.path) for e in entries if is_id(e.name) and e.is_dir())


def iter_run_dirs(root: str | os.PathLike[str], project: str | None = None) -> Iterator[Path]:
    """Every run directory (one holding ``streams/``) under a data directory, sorted.

    ``project`` keeps one project; the caller checks it is an id (never a path).
    """
    root = Path(root)
    projects = [root / project] if project is not None else _id_dirs(root)
    for proj in projects:
        for run in _id_dirs(proj):
            if (run / "streams").is_dir():
                yield run


def iter_stream_files(
    root: str | os.PathLike[str], project: str | None = None
) -> Iterator[StreamFile]:
    """Every stream file under a data directory, by project, run, label, incarnation."""
    for run in iter_run_dirs(root, project):
        for label, inc, path in list_streams(run / "streams"):
            yield StreamFile(StreamId(run.parent.name, run.name, label, inc), path)


def stream_files_under(path: Path) -> list[Path]:
    """Stream files of a stream file's directory, a run, a project or a data directory.

    ``path`` is whichever of those the user named (``rankwise sync PATH``): the result is
    every stream file at or below it, with the walker's rules below ``path``.
    """
    found: set[Path] = set()
    if path.name == "streams":
        found.update(p for _, _, p in list_streams(path))
    found.update(p for _, _, p in list_streams(path / "streams"))  # a run
    for child in _id_dirs(path):  # a project
        found.update(p for _, _, p in list_streams(child / "streams"))
    found.update(f.path for f in iter_stream_files(path))  # a data directory
    return sorted(found)


@dataclass(frozen=True)
class WholeFrames:
    """Whole frames read from a file, as they are there, and what stopped the read."""

    data: bytes
    offset: int  # where ``data`` begins in the file
    damage: Damage | None  # None when the read stopped at the end of the file or the cap

    @property
    def end(self) -> int:
        return self.offset + len(self.data)

    @property
    def corruption(self) -> str | None:
        """Why the read stopped at corruption; None when it did not (the end of the
        file, the cap, or a torn tail that a writer may still complete)."""
        damage = self.damage
        return damage.reason if damage is not None and not damage.torn else None


def read_whole_frames(path: Path, offset: int, max_bytes: int) -> WholeFrames:
    """Whole frames (length and crc checked) from ``offset``, a frame boundary.

    About ``max_bytes`` of them, but at least one when one is complete: a single frame
    larger than the cap comes back alone. At ``offset == len(MAGIC)`` the file's head is
    checked first. ``damage`` says why the read stopped short of the file's end: a torn
    tail (``damage.torn``, a write in progress or a crash's last frame) or corruption.
    Raises ``OSError`` when the file cannot be read.
    """
    with open(path, "rb") as f:
        if offset == len(MAGIC):
            head = f.read(len(MAGIC))
            if head != MAGIC[: len(head)]:
                return WholeFrames(b"", offset, Damage(0, len(head), "not a rankwise stream"))
            if len(head) < len(MAGIC):
                return WholeFrames(b"", offset, None)
        f.seek(offset)
        want = max(max_bytes, HEADER.size)
        buf = f.read(want)
        end = _last_end(buf)
        if end == 0 and len(buf) == want:
            length = HEADER.unpack_from(buf)[0]
            if length <= MAX_FRAME and HEADER.size + length > want:
                f.seek(offset)  # one frame larger than the cap: it comes back alone
                buf = f.read(HEADER.size + length)
                end = _last_end(buf)
        capped = len(buf) == want and end > 0
        damage = None
        if end < len(buf):
            damage = damage_at(buf, end)
            if damage.torn and capped:
                damage = None  # the next frame runs past the cap, not past the file
            elif damage.torn and f.read(1):
                damage = None  # more bytes follow: the cap cut a frame, not a tear
            if damage is not None:
                damage = Damage(offset + damage.offset, damage.length, damage.reason, damage.torn)
    return WholeFrames(buf[:end], offset, damage)


def _last_end(buf: bytes) -> int:
    end = 0
    for _body, stop in iter_frames(buf):
        end = stop
    return end


def read_stream_start(path: Path) -> R.StreamStart | None:
    """The stream's first record when it is a ``StreamStart`` (it always is when the
    first frame is whole); None otherwise or when the file cannot be read."""
    try:
        found = read_whole_frames(path, len(MAGIC), 64 * 1024)
    except OSError:
        return None
    for body, stop in iter_frames(found.data):
        try:
            records = R.decode_payload(memoryview(found.data)[body:stop])
        except ValueError:  # msgspec.DecodeError is a ValueError
            return None
        first = records[0] if records else None
        return first if isinstance(first, R.StreamStart) else None
    return None


def read_stream_id(path: Path) -> StreamId | None:
    """Which stream a file holds, from its ``StreamStart``; None when it has none."""
    start = read_stream_start(path)
    if start is None:
        return None
    return StreamId(start.project, start.run_id, start.label, start.incarnation)


def offset_after(path: Path, acked: int) -> int | None:
    """File offset of the first frame holding a record above ``acked`` (the file's end
    when none does; where an upload resumes after the server's mark). None when the
    file is not a stream file."""
    with open(path, "rb") as f:
        if f.read(len(MAGIC)) != MAGIC:
            return None
    offset = len(MAGIC)
    if acked < 0:
        return offset
    while True:
        buf = read_whole_frames(path, offset, 16 * 1024 * 1024).data
        if not buf:
            return offset
        for body, stop in iter_frames(buf):
            records = R.decode_payload(memoryview(buf)[body:stop])
            if records and records[-1].seq > acked:
                return offset + body - HEADER.size
        offset += len(buf)


# The tags of the record types that override ``blob_digests`` (Media, TableRec, ...).
_NAMING_TAGS = frozenset(
    cls.__struct_config__.tag
    for cls in R.AnyRecord.__args__
    if cls.blob_digests is not R.Record.blob_digests
)


def records_naming_blobs(frames: bytes, above: int) -> list[R.AnyRecord]:
    """The records of ``frames`` (whole frames, as read) with a seq above ``above`` that
    may name blobs. Only records of a type that names blobs are decoded: a stream of
    scalars costs a shallow scan (``R.record_tag``), not a full decode."""
    out: list[R.AnyRecord] = []
    view = memoryview(frames)
    for body, stop in iter_frames(frames):
        for raw in R.raw_records(view[body:stop]):
            if R.record_tag(raw) in _NAMING_TAGS:
                rec = R.decode_record(raw)
                if rec.seq > above:
                    out.append(rec)
    return out


def has_finish(frames: bytes) -> bool:
    """Whether ``frames`` (whole frames, as read) hold a ``Finish`` record."""
    view = memoryview(frames)
    for body, stop in iter_frames(frames):
        if any(type(r) is R.Finish for r in R.decode_payload(view[body:stop])):
            return True
    return False


def read_last_frame(path: Path) -> list[R.AnyRecord]:
    """The records of the file's last whole frame (empty when there is none or it is
    damaged). Hops from frame header to frame header, so it reads 8 bytes a frame, not
    the file: cheap enough to ask on every poll whether a stream has finished.
    """
    return last_frame(path)[0]


def last_frame(path: Path) -> tuple[list[R.AnyRecord], int]:
    """``read_last_frame``'s records, and where that frame ends (the end of the file's
    whole frames by their headers; 0 when the records are empty)."""
    try:
        with open(path, "rb") as f:
            if f.read(len(MAGIC)) != MAGIC:
                return [], 0
            size = os.fstat(f.fileno()).st_size
            pos, last = len(MAGIC), -1
            while pos + HEADER.size <= size:
                f.seek(pos)
                length = HEADER.unpack(f.read(HEADER.size))[0]
                if length > MAX_FRAME or pos + HEADER.size + length > size:
                    break
                last, pos = pos, pos + HEADER.size + length
            if last < 0:
                return [], 0
            f.seek(last)
            buf = f.read(pos - last)
    except OSError:
        return [], 0
    for body, stop in iter_frames(buf):
        try:
            return R.decode_payload(memoryview(buf)[body:stop]), pos
        except ValueError:  # msgspec.DecodeError is a ValueError
            return [], 0
    return [], 0
