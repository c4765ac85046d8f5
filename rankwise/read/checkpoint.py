"""Fold checkpoints: a finished stream file's fold, kept beside its run, so that the next
read of the run does not read the file again.

Reading a run from its files (``Api(dir=)``, ``rankwise show``, ``rankwise runs``) folds
every stream file end to end: about 56 ms a 10,000-step file of 50 metrics, a minute and
more for a run of 1,024 such ranks, and ``rankwise runs`` did that for every run of the
project each time it listed them. A finished stream's file does not change any more (a
restarted rank writes a new incarnation), so after one read its fold is kept in

    <run dir>/.folds/<label>.<incarnation>.fold

as MessagePack of a ``Checkpoint``, which msgspec decodes into typed structs (never
code): the file's size and mtime and BLAKE2b digests of its first and last ``EDGE``
bytes, the ``StreamFold``, and the stream's last rows (``TAIL_ROWS`` of them, whole steps)
for the cross-rank summary, when they are under ``MAX_ROWS_BYTES``. A checkpoint whose
file differs in any of these is not used (the file is read, and the checkpoint
rewritten). Only a stream whose file holds its ``Finish`` and no damage gets one; a
running stream is read whole each time, as before.

The folder is hidden (no reader takes it for a stream or a run), and it moves with its
run to the trash and back and is purged with it. A data directory may be shared, so
nothing is read or written through a symbolic link: a folder that is a link is not
used, a checkpoint is opened without following one (and only when it is a regular
file), and one is written to a new file of a random name, then renamed. A checkpoint
that cannot be written (a data directory this user cannot write) is not kept, quietly:
reads stay correct, only slower.
"""

from __future__ import annotations

import hashlib
import logging
import os
import secrets
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from ..stream.fold import StreamFold

if TYPE_CHECKING:
    from ..stream.columns import MetricColumns

_log = logging.getLogger("rankwise")

FOLDER = ".folds"
SUFFIX = ".fold"
VERSION = 1
EDGE = 4096  # bytes digested at each end of the stream file
MAX_ROWS_BYTES = 4 * 1024 * 1024  # last rows bigger than this are not kept (read again)
MAX_BYTES = 64 * 1024 * 1024  # a checkpoint bigger than this is not read


class Rows(msgspec.Struct, array_like=True):
    """A ``MetricColumns``' last rows (``stream.columns.tail``): arrays as raw bytes,
    the value and presence columns each one block, a key's column after another's."""

    seq: bytes  # int64
    step: bytes  # int64
    time: bytes  # float64
    weight: bytes  # float64
    value_keys: list[str]
    values: bytes  # float64, len(value_keys) x rows
    present_keys: list[str]
    present: bytes  # bool, len(present_keys) x rows
    kinds: dict[str, list[str]]
    ascending: bool


class Checkpoint(msgspec.Struct, array_like=True):
    version: int
    size: int
    mtime_ns: int
    head: bytes
    tail: bytes
    fold: StreamFold
    rows: Rows | None


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(Checkpoint)


def path_of(stream: Path) -> Path:
    """Where the checkpoint of ``<run dir>/streams/<name>.rwlog`` is kept."""
    return stream.parent.parent / FOLDER / (stream.name.rsplit(".", 1)[0] + SUFFIX)


def _edges(f: Any, size: int) -> tuple[bytes, bytes]:
    head = f.read(min(EDGE, size))
    f.seek(max(0, size - EDGE))
    tail = f.read(EDGE)
    return hashlib.blake2b(head, digest_size=16).digest(), hashlib.blake2b(
        tail, digest_size=16
    ).digest()


def _identity(stream: Path) -> tuple[int, int, bytes, bytes]:
    """(size, mtime_ns, head digest, tail digest) of the stream file now."""
    with open(stream, "rb") as f:
        st = os.fstat(f.fileno())
        head, tail = _edges(f, st.st_size)
    return st.st_size, st.st_mtime_ns, head, tail


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)


def _folder(stream: Path) -> Path | None:
    """The run's checkpoint folder when it is a real folder (not a symbolic link: the
    data directory may be shared, and nothing outside it is read or written)."""
    folder = stream.parent.parent / FOLDER
    try:
        st = os.lstat(folder)
    except FileNotFoundError:
        return folder
    except OSError:
        return None
    return folder if stat.S_ISDIR(st.st_mode) else None


def _read_blob(path: Path) -> bytes | None:
    """A checkpoint's bytes: a regular file of at most ``MAX_BYTES``, never through a
    link, never a FIFO or device (opened without blocking)."""
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_BYTES:
            return None
        return f.read(MAX_BYTES + 1)


def read(stream: Path) -> tuple[StreamFold, MetricColumns | None] | None:
    """The kept fold and last rows of ``stream``, or None when there is no checkpoint
    or it is not this file's (any error reading either: None, the file is read)."""
    folder = _folder(stream)
    blob = _read_blob(path_of(stream)) if folder is not None else None
    if blob is None:
        return None
    try:
        ck = _decoder.decode(blob)
        if ck.version != VERSION or (ck.size, ck.mtime_ns, ck.head, ck.tail) != _identity(stream):
            return None
        return ck.fold, (_columns(ck.rows) if ck.rows is not None else None)
    except Exception:  # not ours, damaged, another version's: read the file instead
        return None


def write(stream: Path, identity: tuple[int, int, bytes, bytes], fold: StreamFold,
          rows: MetricColumns | None) -> None:  # fmt: skip
    """Keep ``fold`` (and ``rows``, the stream's last rows) for the file ``stream`` that
    was read when it had ``identity`` (taken before reading it). Never raises."""
    try:
        if _identity(stream) != identity:
            return  # it changed while it was read: nothing to keep
        packed = _rows(rows) if rows is not None else None
        ck = Checkpoint(VERSION, *identity, fold=fold, rows=packed)
        folder = _folder(stream)
        if folder is None:
            return  # a link or a file where the folder goes: not followed
        folder.mkdir(exist_ok=True)
        target = path_of(stream)
        tmp = target.with_name(f".{target.name}.{secrets.token_hex(8)}.tmp")
        # a new file, never one already there (a link planted under that name)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o644)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(_encoder.encode(ck))
            os.replace(tmp, target)  # replaces a link there, never writes through it
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    except Exception as exc:  # a read-only directory, a full disk: not kept
        _log.debug("rankwise: fold checkpoint of %s not kept: %s", stream, exc)


def identity(stream: Path) -> tuple[int, int, bytes, bytes] | None:
    try:
        return _identity(stream)
    except OSError:
        return None


def _rows(cols: MetricColumns) -> Rows | None:
    import numpy as np

    n = len(cols)
    if n * (8 * 4 + 8 * len(cols.values) + len(cols.present)) > MAX_ROWS_BYTES:
        return None
    vkeys, pkeys = list(cols.values), list(cols.present)

    def block(arrays: list[Any], dtype: str) -> bytes:
        return np.stack(arrays).astype(dtype).tobytes() if arrays else b""

    return Rows(
        seq=cols.seq.astype("<i8").tobytes(),
        step=cols.step.astype("<i8").tobytes(),
        time=cols.time.astype("<f8").tobytes(),
        weight=cols.weight.astype("<f8").tobytes(),
        value_keys=vkeys,
        values=block([cols.values[k] for k in vkeys], "<f8"),
        present_keys=pkeys,
        present=block([cols.present[k] for k in pkeys], "?"),
        kinds={k: sorted(v) for k, v in cols.kinds.items()},
        ascending=cols.ascending,
    )


def _columns(rows: Rows) -> MetricColumns:
    import numpy as np

    from ..stream.columns import MetricColumns

    def arr(b: bytes, dtype: str) -> Any:
        return np.frombuffer(b, dtype=dtype).copy()

    step = arr(rows.step, "<i8")
    n = len(step)
    values = arr(rows.values, "<f8").reshape(len(rows.value_keys), n)
    present = arr(rows.present, "?").reshape(len(rows.present_keys), n)
    return MetricColumns(
        seq=arr(rows.seq, "<i8"),
        step=step,
        time=arr(rows.time, "<f8"),
        weight=arr(rows.weight, "<f8"),
        values=dict(zip(rows.value_keys, values, strict=True)),
        present=dict(zip(rows.present_keys, present, strict=True)),
        kinds={k: set(v) for k, v in rows.kinds.items()},
        ascending=rows.ascending,
    )
