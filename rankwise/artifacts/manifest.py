"""What an artifact version holds: its manifest, the digests, and the rules on names.

A manifest lists entries sorted by path. A file entry carries the sha256 of the whole
file, its size and its *chunks*: consecutive ``CHUNK_BYTES`` pieces, each named by its own
sha256. Chunks are what the blob store keeps, so an upload is resumable (only the chunks
the server lacks are sent again) and a download streams. A file of at most
``CHUNK_BYTES`` has one chunk whose digest is the file's. A reference entry carries only
its URI, a string rankwise never fetches.

The manifest digest names the content of a version: the sha256 of a fixed header and one
line per entry (path, file digest or ``ref:<uri>``, size), in path order. Two artifacts
with the same files under the same paths have the same digest, whatever their order of
adding, their metadata or their name.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import msgspec

from ..errors import BadNameError, UsageError
from ..names import ID_RULE, check_file_name, check_id, is_id

CHUNK_BYTES = 32 * 1024 * 1024
READ_BYTES = 4 * 1024 * 1024
MANIFEST_HEADER = b"rankwise-artifact-manifest-v1\n"
_HEX = frozenset("0123456789abcdef")
_VERSION = re.compile(r"v(0|[1-9][0-9]{0,17})")
EMPTY_DIGEST = hashlib.sha256(b"").hexdigest()
# Reference schemes recorded as they are (never dereferenced by rankwise or its server).
REFERENCE_SCHEMES = ("s3", "gs", "gcs", "az", "abfs", "abfss", "http", "https", "file", "hf")
REFERENCE_MAX = 4096
# A manifest's paths: directories per path, and characters of all its paths together
# (100,000 files of 160 characters), so validating a commit is bounded work.
MAX_PATH_DEPTH = 64
MAX_PATH_BYTES = 16 * 1024 * 1024


class Chunk(msgspec.Struct, array_like=True, frozen=True):
    """One piece of a file in the blob store: its sha256 and its size."""

    digest: str
    size: int


class Entry(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One path of an artifact: a stored file (digest, size, chunks) or a reference."""

    path: str
    digest: str = ""
    size: int = 0
    chunks: list[Chunk] = msgspec.field(default_factory=list)
    ref: str | None = None

    @property
    def is_reference(self) -> bool:
        return self.ref is not None


class Manifest(msgspec.Struct, kw_only=True):
    """The entries of one artifact version, sorted by path."""

    entries: list[Entry] = msgspec.field(default_factory=list)

    @property
    def size(self) -> int:
        return sum(e.size for e in self.entries if e.ref is None)

    def chunk_digests(self) -> list[str]:
        """Every chunk digest the blob store must hold for this manifest (unique, in order)."""
        seen: dict[str, None] = {}
        for e in self.entries:
            for c in e.chunks:
                seen.setdefault(c.digest, None)
        return list(seen)


def is_digest(value: object) -> bool:
    return isinstance(value, str) and len(value) == 64 and _HEX.issuperset(value)


def is_version(value: str) -> bool:
    """``v0``, ``v1``, ... (what a version ref looks like, and an alias may not)."""
    return _VERSION.fullmatch(value) is not None


def manifest_digest(manifest: Manifest) -> str:
    """The sha256 hex that names a manifest's content (see the module docstring)."""
    h = hashlib.sha256(MANIFEST_HEADER)
    for e in sorted(manifest.entries, key=lambda e: e.path):
        what = e.digest if e.ref is None else "ref:" + e.ref
        h.update(f"{e.path}\t{what}\t{e.size}\n".encode())
    return h.hexdigest()


def encode(manifest: Manifest) -> bytes:
    return msgspec.json.encode(manifest)


def decode(data: bytes | str) -> Manifest:
    """A manifest from JSON, validated (``UsageError`` naming the bad entry)."""
    try:
        manifest = msgspec.json.decode(data, type=Manifest)
    except msgspec.DecodeError as exc:
        raise UsageError(f"not an artifact manifest: {exc}") from None
    validate_manifest(manifest)
    return manifest


class FileHasher:
    """Whole and chunk digests of a byte stream fed in order (``feed``), one pass.

    A file larger than one chunk needs two sha256 computations over every byte (the
    whole file's and its chunk's); ``parallel`` runs the whole-file one on a helper
    thread (hashlib releases the GIL), so it costs about one pass on two cores."""

    def __init__(self, chunk_bytes: int = CHUNK_BYTES, parallel: bool = False) -> None:
        self.chunk_bytes = chunk_bytes
        self.whole = hashlib.sha256()
        self.piece = hashlib.sha256()
        self.in_piece = 0
        self.size = 0
        self.chunks: list[Chunk] = []
        self._pool: Any = None
        if parallel:
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(1, thread_name_prefix="rankwise-hash")

    def want(self) -> int:
        """How many bytes to feed next (at most ``READ_BYTES``, never across a chunk)."""
        return min(READ_BYTES, self.chunk_bytes - self.in_piece)

    def feed(self, buf: bytes) -> None:
        if self._pool is not None:
            done = self._pool.submit(self.whole.update, buf)
            self.piece.update(buf)
            done.result()
        else:
            self.whole.update(buf)
            self.piece.update(buf)
        self.in_piece += len(buf)
        self.size += len(buf)
        if self.in_piece == self.chunk_bytes:
            self.chunks.append(Chunk(self.piece.hexdigest(), self.in_piece))
            self.piece = hashlib.sha256()
            self.in_piece = 0

    def entry(self) -> Entry:
        """The ``Entry`` (path left empty) of what was fed."""
        if self._pool is not None:
            self._pool.shutdown()
        if self.in_piece or not self.chunks:
            self.chunks.append(Chunk(self.piece.hexdigest(), self.in_piece))
        return Entry(path="", digest=self.whole.hexdigest(), size=self.size, chunks=self.chunks)


def hash_file(path: str | os.PathLike[str], chunk_bytes: int = CHUNK_BYTES) -> Entry:
    """``Entry`` (path left empty) for the file at ``path``: whole and chunk digests in one
    pass, reading ``READ_BYTES`` at a time, so memory stays bounded for any file size."""
    with open(path, "rb") as f:
        hasher = FileHasher(chunk_bytes, parallel=os.fstat(f.fileno()).st_size > chunk_bytes)
        while buf := f.read(hasher.want()):
            hasher.feed(buf)
    return hasher.entry()


def check_name(value: object, what: str = "artifact name") -> str:
    """An artifact name, type or alias: the id rule (``rankwise.names``)."""
    return check_id(value, what)


MAX_TAGS = 32  # per version


def check_tags(tags: object) -> list[str]:
    """``log_artifact(tags=)``: a string or a list of strings, each following the id rule
    (letters, digits, '.', '_', '-'); in order, without repeats. ``UsageError`` else."""
    if tags is None:
        return []
    if isinstance(tags, str):
        tags = [tags]
    if not isinstance(tags, list | tuple | set | frozenset):
        raise UsageError(
            f"artifact tags {tags!r}: give a string or a list of strings, e.g. tags=['best']"
        )
    out: list[str] = []
    for tag in tags:
        if not isinstance(tag, str):
            raise UsageError(f"artifact tag {tag!r} is not a string")
        check_id(tag, "artifact tag")
        if tag not in out:
            out.append(tag)
    if len(out) > MAX_TAGS:
        raise UsageError(f"at most {MAX_TAGS} tags per artifact version, not {len(out)}")
    return out


def merge_tags(old: list[str], new: list[str]) -> list[str]:
    """``old`` and then those of ``new`` it lacks (what a version logged again keeps)."""
    return [*old, *(t for t in new if t not in old)]


def check_alias(value: object) -> str:
    """An alias: the id rule, and not a version (``v3`` names a version, not an alias)."""
    alias = check_id(value, "artifact alias")
    if is_version(alias):
        raise BadNameError(
            "artifact alias", f"{alias!r} looks like a version: choose another word", None
        )
    return alias


def check_reference(uri: object) -> str:
    """A reference URI: kept as a string, so only its shape is checked (a known scheme,
    printable, at most 4096 characters); it is never opened or fetched."""
    if not isinstance(uri, str) or not 0 < len(uri) <= REFERENCE_MAX or not uri.isprintable():
        raise UsageError(
            f"reference {uri!r:.80} cannot be used: give a printable URI of at most "
            f"{REFERENCE_MAX} characters"
        )
    scheme, sep, _ = uri.partition("://")
    if not sep or scheme.lower() not in REFERENCE_SCHEMES:
        raise UsageError(
            f"reference {uri!r:.80} cannot be used: give a URI with one of the schemes "
            + ", ".join(REFERENCE_SCHEMES)
        )
    return uri


def validate_manifest(manifest: Manifest) -> None:
    """Refuse a manifest a reader could be tricked by: unsafe or duplicate paths, a file
    and a directory at one path, malformed digests or chunks, paths deeper than
    ``MAX_PATH_DEPTH`` or longer than ``MAX_PATH_BYTES`` together. Messages name the file.

    Linear in the manifest's size (a server runs it on every commit): each path's parts
    are walked once down a tree of the directories seen so far.
    """
    total = 0
    for e in manifest.entries:
        total += len(e.path)
        if total > MAX_PATH_BYTES:
            raise UsageError(
                f"an artifact's file paths add up to over {MAX_PATH_BYTES} characters: "
                "split it into several artifacts"
            )
        check_file_name(e.path, "artifact file name")
        if e.path.count("/") >= MAX_PATH_DEPTH:
            raise UsageError(
                f"artifact file {e.path[:80]!r}... is more than {MAX_PATH_DEPTH} directories deep"
            )
        if e.ref is not None:
            check_reference(e.ref)
            if e.chunks or e.digest:
                raise UsageError(f"artifact file {e.path!r}: a reference has no digest or chunks")
            continue
        if not is_digest(e.digest):
            raise UsageError(f"artifact file {e.path!r}: digest must be 64 lower-case hex digits")
        if e.size < 0 or not e.chunks:
            raise UsageError(f"artifact file {e.path!r}: needs a size and at least one chunk")
        if any(not is_digest(c.digest) or c.size < 0 for c in e.chunks):
            raise UsageError(f"artifact file {e.path!r}: a chunk digest or size is malformed")
        if sum(c.size for c in e.chunks) != e.size:
            raise UsageError(f"artifact file {e.path!r}: its chunks do not add up to its size")
    # Sorted, a file comes before every path under it (a string sorts after its prefixes).
    tree: dict[str, Any] = {}
    for p in sorted(e.path for e in manifest.entries):
        parts = p.split("/")
        node = tree
        for i, part in enumerate(parts[:-1]):
            below = node.setdefault(part, {})
            if below is _FILE:
                raise UsageError(
                    f"artifact file {p!r} lies under {'/'.join(parts[: i + 1])!r}, which is "
                    "a file: one path cannot be both a file and a directory"
                )
            node = below
        if parts[-1] in node:
            if node[parts[-1]] is _FILE:
                raise UsageError(f"artifact file {p!r} appears twice: give each file its own name")
            raise UsageError(  # not reached in sorted order; kept as the invariant's guard
                f"artifact file {p!r} is also a directory: one path cannot be both"
            )
        node[parts[-1]] = _FILE


_FILE: dict[str, Any] = {}  # the tree's leaf marker (compared by identity)


def sorted_entries(entries: Iterable[Entry]) -> list[Entry]:
    return sorted(entries, key=lambda e: e.path)


def local_target(root: Path, path: str) -> Path:
    """Where file ``path`` of a manifest goes under ``root`` for a download; refuses a
    path that would leave ``root`` (whatever the manifest says) or pass a symlink."""
    check_file_name(path, "artifact file name")
    base = Path(root).resolve()
    target = base.joinpath(*path.split("/"))
    probe = base
    for part in path.split("/")[:-1]:
        probe = probe / part
        if probe.is_symlink():
            raise UsageError(f"artifact file {path!r}: {probe} is a symlink; download elsewhere")
    if target.is_symlink() or not target.resolve().is_relative_to(base):
        raise UsageError(f"artifact file {path!r} would be written outside {base}")
    return target


__all__ = [
    "CHUNK_BYTES",
    "EMPTY_DIGEST",
    "ID_RULE",
    "Chunk",
    "Entry",
    "FileHasher",
    "Manifest",
    "check_alias",
    "check_name",
    "check_reference",
    "decode",
    "encode",
    "hash_file",
    "is_digest",
    "is_id",
    "is_version",
    "local_target",
    "manifest_digest",
    "sorted_entries",
    "validate_manifest",
]
