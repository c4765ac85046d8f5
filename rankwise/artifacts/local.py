"""The local artifact store: versions, aliases and lineage in the data directory.

Layout, under ``<root>/<project>/artifacts/``::

    files/<sha[:2]>/<sha256>                  whole files, content-addressed
    manifests/<manifest digest>.json          Manifest JSON, immutable
    names/<name>/versions/v<N>.json           VersionInfo without manifest, aliases, lineage
    names/<name>/aliases/<alias>              "v<N>"
    names/<name>/used/<run>.<label>.<vN>.json Use (lineage)
    names/<name>/synced/v<N>                  this version is on the server (rankwise sync)
    outbox/<client id>.json                   OutboxEntry: a commit not yet on the server

Invariants, safe between processes on a shared filesystem (no lock is ever taken):

* Every file appears whole or not at all: written to a temporary name, then renamed
  (``os.replace``) or hard-linked into place; a stored file is fsynced first, so no
  digest ever names bytes a crash lost.
* A version number is owned by the one process that *creates* ``v<N>.json``: created
  with ``os.link`` of a complete temporary file (atomic and exclusive, like
  ``O_CREAT|O_EXCL``, even over NFS), or with ``O_CREAT|O_EXCL`` where hard links are not
  supported. A process that loses N tries N+1: two ranks logging one name at the same
  moment get distinct versions, and neither loses a file.
* Files and the manifest are in place before the version that names them.
* ``latest`` is never stored: it is the highest version. An alias is a one-line file
  moved atomically (``os.replace``); ``latest`` and ``v<N>`` cannot be aliases.
* Identical content (the same manifest digest as the latest version) makes no version
  and copies no byte; the aliases asked for move onto the latest version.
* A manifest read back is checked against the digest that names it, and a file against
  its digest as it is read (``Artifact.download``), so a tampered store is detected.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import IO

import msgspec

from ..errors import ArtifactNotFoundError, UsageError
from ..wire.artifacts import ArtifactSummary, CommitRequest, Use, VersionInfo
from .fsutil import create_exclusive, read_file_chunks, write_atomic, write_verified
from .manifest import (
    CHUNK_BYTES,
    READ_BYTES,
    Entry,
    FileHasher,
    Manifest,
    check_alias,
    check_name,
    check_tags,
    decode,
    encode,
    is_digest,
    is_version,
    manifest_digest,
    merge_tags,
    validate_manifest,
)

_info_decoder = msgspec.json.Decoder(VersionInfo)
_use_decoder = msgspec.json.Decoder(Use)


class OutboxEntry(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A commit waiting for the server: its files are in ``files/`` already."""

    name: str
    request: CommitRequest
    # False: the run ended before its files were hashed; ``files`` holds (name, local
    # path, reference) and ``rankwise sync`` stages them first.
    staged: bool = True
    files: list[tuple[str, str | None, str | None]] = msgspec.field(default_factory=list)
    local: bool = False  # logged in local mode: a version of the local store comes first
    error: str | None = None


def parse_ref(text: str) -> tuple[str | None, str, str]:
    """``"project/name:ref"`` (project and ``:ref`` optional) -> (project, name, ref);
    ref defaults to ``latest``. Checks each part. W&B's ``entity/project/name:ref`` is
    taken too: rankwise has no entities, so the first part is checked and left out."""
    project: str | None = None
    if not isinstance(text, str):
        raise UsageError(f"an artifact is named by a string, not {type(text).__name__}")
    if text.count("/") == 2:
        check_name(text.split("/", 1)[0], "entity")
        text = text.split("/", 1)[1]
    if "/" in text:
        project, text = text.split("/", 1)
        check_name(project, "project")
    name, colon, ref = text.partition(":")
    check_name(name, "artifact name")
    if colon and not ref:
        raise UsageError(f"{text!r}: give a version, an alias or 'latest' after ':'")
    ref = ref or "latest"
    if ref != "latest" and not is_version(ref):
        check_alias(ref)
    return project, name, ref


def _vnum(file_name: str) -> int | None:
    stem = file_name[:-5] if file_name.endswith(".json") else ""
    return int(stem[1:]) if is_version(stem) else None


class LocalArtifacts:
    """The artifact store of one project in a data directory (see the module docstring)."""

    def __init__(self, root: str | os.PathLike[str], project: str) -> None:
        self.project = check_name(project, "project")
        self.base = Path(root) / project / "artifacts"
        self.files_root = self.base / "files"

    # -- files and manifests ----------------------------------------------------------
    def file_path(self, digest: str) -> Path:
        if not is_digest(digest):
            raise UsageError(f"{digest!r} is not a file digest")
        return self.files_root / digest[:2] / digest

    def has_file(self, entry: Entry) -> bool:
        try:
            return self.file_path(entry.digest).stat().st_size == entry.size
        except OSError:
            return False

    def store_file(self, source: str | os.PathLike[str], entry: Entry) -> int:
        """Copy ``source`` into ``files/`` as ``entry.digest`` (bounded memory); returns
        the bytes copied (0: already there). ``UsageError`` when the file no longer has
        that content (it changed after it was hashed)."""
        if self.has_file(entry):
            return 0

        def changed(_digest: str, _size: int) -> Exception:
            return UsageError(
                f"file {entry.path!r} ({source}) changed while it was being logged: keep "
                "it unchanged until artifact.wait() returns"
            )

        return write_verified(
            self.file_path(entry.digest),
            read_file_chunks(source),
            entry.digest,
            entry.size,
            mismatch=changed,
        )

    def stage_file(self, source: str | os.PathLike[str]) -> tuple[Entry, int]:
        """Hash ``source`` and copy it into ``files/`` in one pass (bounded memory);
        returns its entry (path left empty) and the bytes stored (0: it was there)."""
        self.files_root.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".staging-", dir=self.files_root)
        try:
            with open(source, "rb") as src, os.fdopen(fd, "wb") as out:
                size = os.fstat(src.fileno()).st_size
                hasher = FileHasher(parallel=size > CHUNK_BYTES)
                # Each piece is written on a helper thread while the next is hashed:
                # at most two pieces in memory.
                with ThreadPoolExecutor(1, thread_name_prefix="rankwise-copy") as pool:
                    writing: Future[int] | None = None
                    while buf := src.read(hasher.want()):
                        hasher.feed(buf)
                        if writing is not None:
                            writing.result()
                        writing = pool.submit(out.write, buf)
                    if writing is not None:
                        writing.result()
                out.flush()
                os.fsync(out.fileno())  # never a digest's name on bytes a crash lost
            entry = hasher.entry()
            if self.has_file(entry):
                os.unlink(tmp)
                return entry, 0
            target = self.file_path(entry.digest)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(tmp, target)
            return entry, entry.size
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def open_file(self, digest: str) -> IO[bytes]:
        return open(self.file_path(digest), "rb")

    def read_chunks(self, info: VersionInfo, entry: Entry) -> Iterator[bytes]:
        """``Artifact.download``'s source: the stored file's bytes (checked by the caller)."""
        try:
            f = self.open_file(entry.digest)
        except FileNotFoundError:
            raise UsageError(
                f"file {entry.path!r} of {info.qualified_name} is missing from {self.files_root}"
            ) from None
        with f:
            while buf := f.read(READ_BYTES):
                yield buf

    def put_manifest(self, manifest: Manifest) -> str:
        digest = manifest_digest(manifest)
        path = self.base / "manifests" / f"{digest}.json"
        if not path.exists():
            write_atomic(path, encode(manifest))
        return digest

    def manifest(self, digest: str) -> Manifest:
        """The manifest named ``digest``, checked: a tampered one is refused."""
        if not is_digest(digest):
            raise UsageError(f"{digest!r} is not a manifest digest")
        path = self.base / "manifests" / f"{digest}.json"
        try:
            manifest = decode(path.read_bytes())
        except FileNotFoundError:
            raise UsageError(f"manifest {digest} is missing from {path.parent}") from None
        if manifest_digest(manifest) != digest:
            raise UsageError(f"manifest {path} does not match its digest: the store was altered")
        return manifest

    # -- versions ---------------------------------------------------------------------
    def _name_dir(self, name: str) -> Path:
        return self.base / "names" / check_name(name, "artifact name")

    def names(self) -> list[str]:
        try:
            return sorted(p.name for p in (self.base / "names").iterdir() if p.is_dir())
        except FileNotFoundError:
            return []

    def version_numbers(self, name: str) -> list[int]:
        try:
            found = os.listdir(self._name_dir(name) / "versions")
        except FileNotFoundError:
            return []
        return sorted(n for n in map(_vnum, found) if n is not None)

    def _read_info(self, name: str, n: int) -> VersionInfo:
        path = self._name_dir(name) / "versions" / f"v{n}.json"
        for _ in range(50):  # the O_EXCL fallback writes after creating: wait for it
            try:
                return _info_decoder.decode(path.read_bytes())
            except FileNotFoundError:
                raise ArtifactNotFoundError(
                    f"artifact {self.project}/{name} has no version v{n}"
                ) from None
            except msgspec.DecodeError:
                time.sleep(0.01)
        raise UsageError(f"{path} is damaged: not a version record")

    def aliases(self, name: str) -> dict[str, str]:
        """alias -> ``v<N>`` (``latest`` included when a version exists)."""
        out: dict[str, str] = {}
        folder = self._name_dir(name) / "aliases"
        with contextlib.suppress(FileNotFoundError):
            for p in folder.iterdir():
                if not p.name.startswith("."):
                    with contextlib.suppress(OSError):
                        out[p.name] = p.read_text().strip()
        numbers = self.version_numbers(name)
        if numbers:
            out["latest"] = f"v{numbers[-1]}"
        return out

    def version(self, name: str, n: int, manifest: bool = False) -> VersionInfo:
        info = self._read_info(name, n)
        info.aliases = sorted(a for a, v in self.aliases(name).items() if v == f"v{n}")
        if manifest:
            info.manifest = self.manifest(info.digest)
            info.used_by = self.uses(name, info.version)
        return info

    def versions(self, name: str) -> list[VersionInfo]:
        """Every version of ``name``, newest first (without manifests)."""
        return [self.version(name, n) for n in reversed(self.version_numbers(name))]

    def resolve(self, name: str, ref: str = "latest") -> VersionInfo:
        """The version ``ref`` (``latest``, ``v3`` or an alias) names, with its manifest."""
        numbers = self.version_numbers(name)
        if not numbers:
            raise ArtifactNotFoundError(f"no artifact {name!r} in project {self.project!r}")
        if ref == "latest":
            return self.version(name, numbers[-1], manifest=True)
        if is_version(ref):
            return self.version(name, int(ref[1:]), manifest=True)
        target = self.aliases(name).get(check_alias(ref))
        if target is None or not is_version(target):
            raise ArtifactNotFoundError(f"artifact {self.project}/{name} has no alias {ref!r}")
        return self.version(name, int(target[1:]), manifest=True)

    def commit(self, name: str, request: CommitRequest) -> tuple[VersionInfo, bool]:
        """Store a version of ``name`` whose files are in ``files/`` already; returns it
        and whether it is new (False: identical to the latest, which is returned)."""
        check_name(request.type, "artifact type")
        aliases = [check_alias(a) for a in request.aliases if a != "latest"]
        tags = check_tags(request.tags)
        validate_manifest(request.manifest)
        for e in request.manifest.entries:
            if e.ref is None and not self.has_file(e):
                raise UsageError(f"file {e.path!r} is not in {self.files_root}: store it first")
        digest = self.put_manifest(request.manifest)
        info = VersionInfo(
            project=self.project,
            name=name,
            version="",
            type=request.type,
            digest=digest,
            size=request.manifest.size,
            file_count=len(request.manifest.entries),
            description=request.description,
            metadata=request.metadata,
            tags=tags,
            created_at=request.created_at or time.time(),
            run_id=request.run_id,
            label=request.label,
        )
        folder = self._name_dir(name) / "versions"
        while True:
            numbers = self.version_numbers(name)
            if numbers:
                latest = self._read_info(name, numbers[-1])
                if latest.digest == digest:
                    if merge_tags(latest.tags, tags) != latest.tags:  # it gains the new tags
                        latest.tags = merge_tags(latest.tags, tags)
                        write_atomic(folder / f"v{numbers[-1]}.json", msgspec.json.encode(latest))
                    self.move_aliases(name, numbers[-1], aliases)
                    return self.version(name, numbers[-1]), False
                if latest.type != request.type:
                    raise UsageError(
                        f"artifact {name!r} has type {latest.type!r}, not {request.type!r}: "
                        "use another name"
                    )
            n = numbers[-1] + 1 if numbers else 0
            info.version = f"v{n}"
            if create_exclusive(folder / f"v{n}.json", msgspec.json.encode(info)):
                break
        self.move_aliases(name, n, aliases)
        return self.version(name, n), True

    def move_aliases(self, name: str, n: int, aliases: list[str]) -> None:
        for alias in aliases:
            write_atomic(self._name_dir(name) / "aliases" / check_alias(alias), f"v{n}".encode())

    # -- lineage ------------------------------------------------------------------------
    def record_use(self, name: str, version: str, run_id: str, label: str | None) -> None:
        use = Use(run_id=check_name(run_id, "run id"), label=label, time=time.time())
        lab = check_name(label, "label") if label is not None else "_"
        path = self._name_dir(name) / "used" / f"{run_id}.{lab}.{version}.json"
        if not path.exists():
            write_atomic(path, msgspec.json.encode(use))

    def _use_files(self, name: str) -> Iterator[tuple[str, Path]]:
        with contextlib.suppress(FileNotFoundError):
            for p in sorted((self._name_dir(name) / "used").iterdir()):
                if p.suffix == ".json" and not p.name.startswith("."):
                    yield p.name[:-5].rsplit(".", 1)[-1], p

    def uses(self, name: str, version: str) -> list[Use]:
        out = [
            _use_decoder.decode(p.read_bytes()) for v, p in self._use_files(name) if v == version
        ]
        return sorted(out, key=lambda u: u.time)

    def all_uses(self, name: str) -> list[tuple[str, Use]]:
        return [(v, _use_decoder.decode(p.read_bytes())) for v, p in self._use_files(name)]

    # -- listing --------------------------------------------------------------------------
    def summaries(self, type: str | None = None) -> list[ArtifactSummary]:
        out = []
        for name in self.names():
            numbers = self.version_numbers(name)
            if not numbers:
                continue
            latest = self._read_info(name, numbers[-1])
            if type is not None and latest.type != type:
                continue
            out.append(
                ArtifactSummary(
                    name=name,
                    type=latest.type,
                    versions=len(numbers),
                    latest=latest.version,
                    size=latest.size,
                    updated_at=latest.created_at,
                )
            )
        return out

    def logged_by(self, run_id: str) -> list[VersionInfo]:
        return [
            info for name in self.names() for info in self.versions(name) if info.run_id == run_id
        ]

    def used_by(self, run_id: str) -> list[VersionInfo]:
        out: dict[tuple[str, str], VersionInfo] = {}
        for name in self.names():
            for version, use in self.all_uses(name):
                if use.run_id == run_id and (name, version) not in out:
                    with contextlib.suppress(ArtifactNotFoundError):
                        out[(name, version)] = self.version(name, int(version[1:]))
        return list(out.values())

    # -- sync bookkeeping -------------------------------------------------------------------
    def mark_synced(self, name: str, version: str) -> None:
        write_atomic(self._name_dir(name) / "synced" / version, b"")

    def is_synced(self, name: str, version: str) -> bool:
        return (self._name_dir(name) / "synced" / version).exists()

    def outbox_put(self, entry: OutboxEntry) -> Path:
        path = self.base / "outbox" / f"{entry.request.client_id}.json"
        write_atomic(path, msgspec.json.encode(entry))
        return path

    def outbox(self) -> list[OutboxEntry]:
        out = []
        with contextlib.suppress(FileNotFoundError):
            for p in sorted((self.base / "outbox").glob("*.json")):
                with contextlib.suppress(msgspec.DecodeError, OSError):
                    out.append(msgspec.json.decode(p.read_bytes(), type=OutboxEntry))
        return out

    def in_outbox(self, client_id: str) -> bool:
        return (self.base / "outbox" / f"{client_id}.json").exists()

    def outbox_done(self, client_id: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            (self.base / "outbox" / f"{client_id}.json").unlink()


def projects_with_artifacts(root: str | os.PathLike[str]) -> list[str]:
    try:
        return sorted(p.name for p in Path(root).iterdir() if (p / "artifacts" / "names").is_dir())
    except FileNotFoundError:
        return []
