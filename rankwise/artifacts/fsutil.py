"""Filesystem helpers of the artifact store and ``Artifact``: whole-file writes, exclusive
creation, walking a directory without leaving it, and verified downloads."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import stat
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from ..errors import ArtifactError, UsageError
from ..names import check_file_name
from ..wire.artifacts import VersionInfo
from .manifest import READ_BYTES, Entry
from .source import Source


def write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def create_exclusive(path: Path, data: bytes) -> bool:
    """Create ``path`` holding ``data`` unless it exists; True when this call made it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)
            return True
        except FileExistsError:
            return False
        except OSError as exc:  # a filesystem without hard links
            if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV):
                raise
        try:
            fd2 = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        with os.fdopen(fd2, "wb") as f:
            f.write(data)
        return True
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def write_verified(
    target: Path,
    chunks: Iterable[bytes],
    digest: str,
    size: int | None = None,
    *,
    mismatch: Callable[[str, int], Exception],
) -> int:
    """Write ``chunks`` at ``target`` only if they hash to ``digest`` (and come to
    ``size`` bytes, when given): into a temporary file beside it, hashed on the way,
    fsynced, then renamed into place. Otherwise ``mismatch(got_digest, got_size)`` is
    raised and ``target`` is left as it was. Returns the bytes written."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name[:16]}.", suffix=".part", dir=target.parent)
    h = hashlib.sha256()
    got = 0
    try:
        try:
            with os.fdopen(fd, "wb") as out:
                for piece in chunks:
                    h.update(piece)
                    got += len(piece)
                    out.write(piece)
                out.flush()
                os.fsync(out.fileno())  # never a digest's name on bytes a crash lost
        finally:
            close = getattr(chunks, "close", None)  # a generator holding a file or reply
            if callable(close):
                close()
        if h.hexdigest() != digest or (size is not None and got != size):
            raise mismatch(h.hexdigest(), got)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return got


def read_file_chunks(path: str | os.PathLike[str]) -> Iterator[bytes]:
    """The bytes of ``path``, ``READ_BYTES`` at a time."""
    with open(path, "rb") as f:
        while buf := f.read(READ_BYTES):
            yield buf


def fetch(source: Source, info: VersionInfo, entry: Entry, target: Path) -> None:
    """Write ``entry`` at ``target`` through a temporary file checked against its digest."""
    if (
        target.is_file()
        and not target.is_symlink()
        and target.stat().st_size == entry.size
        and sha_of(str(target)) == entry.digest
    ):
        return  # already there, verified

    def damaged(_digest: str, _size: int) -> Exception:
        return ArtifactError(
            f"file {entry.path!r} of artifact {info.qualified_name} does not match its "
            "digest (damaged or tampered in the store): not written"
        )

    write_verified(
        target, source.read_chunks(info, entry), entry.digest, entry.size, mismatch=damaged
    )


def size_of(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def sha_of(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while buf := f.read(READ_BYTES):
            h.update(buf)
    return h.hexdigest()


def sha_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def walk_dir(top: str, artifact: str) -> Iterator[tuple[str, str]]:
    """``(relative name, real file path)`` of every file under ``top``; refuses a symlink
    leading outside ``top`` and anything that is not a regular file or a directory."""
    real_top = os.path.realpath(top)
    seen_dirs = {real_top}
    stack = [("", top)]
    while stack:
        rel_dir, path = stack.pop()
        try:
            with os.scandir(path) as it:
                items = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            raise UsageError(f"artifact {artifact!r}: cannot list {path}: {exc}") from None
        for item in items:
            rel = f"{rel_dir}/{item.name}" if rel_dir else item.name
            check_file_name(rel, f"artifact {artifact!r}: file name")
            full = os.path.join(path, item.name)
            real = os.path.realpath(full)
            if item.is_symlink() and os.path.commonpath([real_top, real]) != real_top:
                raise UsageError(
                    f"artifact {artifact!r}: {rel!r} is a symlink to {real}, outside "
                    f"{top}: refused (add the target itself if it is meant)"
                )
            try:
                mode = os.stat(real).st_mode
            except OSError as exc:
                raise UsageError(f"artifact {artifact!r}: cannot read {rel!r}: {exc}") from None
            if stat.S_ISDIR(mode):
                if real not in seen_dirs:
                    seen_dirs.add(real)
                    stack.append((rel, full))
            elif stat.S_ISREG(mode):
                yield rel, real
            else:
                raise UsageError(
                    f"artifact {artifact!r}: {rel!r} is not a regular file (a FIFO, socket "
                    "or device): refused"
                )
