"""Blob files: the large payloads of rich records, content-addressed in the run directory.

Layout (``blob_path`` is the one place that spells it)::

    <root>/<project>/<run id>/blobs/<sha256[:2]>/<sha256>

Every rank of a run shares the folder: a blob is named by the sha256 of its bytes, so two
ranks (or two logs) writing the same content write the same file, which is harmless.

A blob is written to a unique temporary name in its final folder, flushed and fsync'd,
then ``os.replace``d into place (and the folder fsync'd where the OS allows), all BEFORE
the record naming it is queued to the stream writer. So a reader, the uploader or a crash
never sees a record whose blob is missing or half written: a blob file that exists is
whole. A crash may leave a ``.tmp-*`` file behind; readers ignore those names.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from pathlib import Path

BLOBS_DIR = "blobs"
_HEX = frozenset("0123456789abcdef")


def is_digest(digest: object) -> bool:
    """True for a sha256 hex digest as rankwise spells it (64 lowercase hex digits)."""
    return isinstance(digest, str) and len(digest) == 64 and _HEX.issuperset(digest)


def blob_path(run_dir: Path | str, digest: str) -> Path:
    """Where the blob ``digest`` of the run in ``run_dir`` lives (it may not exist yet).

    Raises ``ValueError`` for anything but a 64-digit lowercase hex digest, so a digest
    read from a file can never name a path outside the blob folder.
    """
    if not is_digest(digest):
        raise ValueError(f"not a sha256 hex digest: {digest!r}")
    return Path(run_dir) / BLOBS_DIR / digest[:2] / digest


def digest_of(data: bytes | bytearray | memoryview) -> str:
    """The sha256 hex digest that names ``data``'s blob."""
    return hashlib.sha256(data).hexdigest()


def write_blob(run_dir: Path | str, data: bytes | bytearray | memoryview) -> tuple[str, int]:
    """Store ``data`` as a blob of the run in ``run_dir``; returns ``(digest, size)``.

    Atomic and durable (temp file + fsync + ``os.replace``); a blob already there is
    left as it is (same digest, same bytes). Raises ``OSError`` when the disk refuses.
    """
    digest = digest_of(data)
    path = blob_path(run_dir, digest)
    size = len(memoryview(data).cast("B"))
    if path.exists():
        return digest, size
    folder = path.parent
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".tmp-{digest[:16]}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise
    fsync_dir(folder)
    return digest, size


def read_blob(run_dir: Path | str, digest: str) -> bytes:
    """The bytes of blob ``digest`` (``FileNotFoundError`` when it is not there)."""
    return blob_path(run_dir, digest).read_bytes()


def fsync_dir(folder: Path) -> None:
    """Make the rename itself durable; not every OS/filesystem lets a folder be opened."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
