"""``rankwise.Artifact``: a named, typed set of files, logged by a run as a new version.

Adding records *paths* only (checked at once: every name follows ``names.check_file_name``,
so ``..``, absolute paths, drive letters, backslashes, control characters, empty segments,
two files at one path and a file that is also a directory are refused with an error
naming the file, and nothing is added). The bytes are read later, by the run's artifact
worker (``rankwise.artifacts.worker``), which hashes and stores them off the training
thread: do not change a file between ``log_artifact`` and ``wait()`` (a file whose size or
modification time changed meanwhile is refused, and ``wait()`` says so).

``add_dir`` walks a directory without leaving it: a symlink that points outside it is
refused; one that stays inside is followed (its target's content is stored under the
link's path); a directory reached twice (a symlink loop) is walked once. FIFOs, sockets
and devices are refused (reading one could block the worker forever).

A reference (``add_reference``) is a URI kept as a string: neither rankwise nor its server
ever opens it.

An artifact read back (``run.use_artifact``, ``Api.artifact``) carries its manifest and
a *source* it reads bytes from (the local store or a server); ``download()`` writes its
files under a root, verifying each against its digest, never outside the root and never
through a symlink.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
import threading
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import msgspec

from ..errors import ArtifactError, ArtifactNotFoundError, UsageError
from ..names import check_file_name
from ..wire.artifacts import VersionInfo
from .fsutil import fetch, sha_of, sha_text, size_of, walk_dir
from .manifest import (
    Entry,
    Manifest,
    check_name,
    check_reference,
    local_target,
    manifest_digest,
    validate_manifest,
)
from .source import Source

if TYPE_CHECKING:
    from collections.abc import Mapping


class _File:
    """A file to add: where it is on disk now (``source``) or a reference URI."""

    __slots__ = ("ref", "source")

    def __init__(self, source: str | None, ref: str | None = None) -> None:
        self.source = source
        self.ref = ref


def _file_name(name: object) -> str:
    return check_file_name(name, "artifact file name")


class Artifact:
    """A set of files to log as a version of artifact ``name`` (see the module docstring).

    ``type`` groups artifacts (``dataset``, ``model``, ...). ``description`` and
    ``metadata`` (a JSON-like dict) are stored with the version. W&B keyword arguments
    rankwise has no use for (``incremental``, ``use_as``) are accepted and ignored.
    """

    def __init__(
        self,
        name: str,
        type: str,
        description: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        incremental: bool = False,
        use_as: str | None = None,
        **_ignored: Any,
    ) -> None:
        self._name = check_name(name, "artifact name")
        self._type = check_name(type, "artifact type")
        if description is not None and not isinstance(description, str):
            raise UsageError(f"artifact {name!r}: description must be a string")
        self.description = description
        if metadata is not None and not isinstance(metadata, dict):
            try:
                metadata = dict(metadata)
            except (TypeError, ValueError):
                raise UsageError(f"artifact {name!r}: metadata must be a dict") from None
        self.metadata: dict[str, Any] = dict(metadata or {})
        self.check_metadata()
        self._files: dict[str, _File] = {}
        self._dirs: dict[str, str] = {}  # each directory prefix -> a file under it
        self._tmp: str | None = None
        # Filled once stored (logged) or when read back.
        self._info: VersionInfo | None = None
        self._manifest: Manifest | None = None
        self._source: Source | None = None
        self._logged = False
        self._done = threading.Event()
        self._error: BaseException | None = None
        self._bytes_copied = 0

    # -- identity -------------------------------------------------------------------
    name = property(lambda self: self._name, doc="The artifact name (``model-abc``).")
    type = property(lambda self: self._type)

    @property
    def version(self) -> str | None:
        """``v0``, ``v1``... once stored (``wait()``) or read back; None before."""
        return self._info.version if self._info is not None else None

    @property
    def aliases(self) -> list[str]:
        return list(self._info.aliases) if self._info is not None else []

    @property
    def tags(self) -> list[str]:
        """The version's tags (``log_artifact(tags=)``), once stored or read back."""
        return list(self._info.tags) if self._info is not None else []

    @property
    def digest(self) -> str | None:
        """The manifest digest (what names the content), once hashed."""
        if self._info is not None:
            return self._info.digest
        return manifest_digest(self._manifest) if self._manifest is not None else None

    @property
    def size(self) -> int:
        """Bytes of its stored files (references count 0)."""
        if self._manifest is not None:
            return self._manifest.size
        return sum(size_of(f.source) for f in self._files.values() if f.source)

    @property
    def project(self) -> str | None:
        return self._info.project if self._info is not None else None

    @property
    def qualified_name(self) -> str:
        """``project/name:v3`` once stored, ``name`` before."""
        if self._info is not None:
            return self._info.qualified_name
        return self._name

    @property
    def created_at(self) -> float | None:
        return self._info.created_at if self._info is not None else None

    @property
    def state(self) -> str:
        """``PENDING`` (not logged or not stored yet), ``COMMITTED`` or ``FAILED``."""
        if self._error is not None:
            return "FAILED"
        return "COMMITTED" if self._info is not None else "PENDING"

    @property
    def info(self) -> VersionInfo | None:
        """The stored version (``VersionInfo``), once stored or read back."""
        return self._info

    @property
    def bytes_copied(self) -> int:
        """Bytes the worker copied into the local store for this artifact (0 when the
        content was already there: an identical version, or files stored before)."""
        return self._bytes_copied

    def __repr__(self) -> str:
        return f"<rankwise.Artifact {self.qualified_name} type={self._type} {self.state}>"

    def check_metadata(self) -> None:
        """``UsageError`` unless ``metadata`` is JSON-like (checked again when logged)."""
        try:
            msgspec.json.encode(self.metadata)
        except (TypeError, ValueError, OverflowError) as exc:
            raise UsageError(
                f"artifact {self._name!r}: metadata must be JSON-like (dicts, lists, str, "
                f"numbers, bool, None): {exc}"
            ) from None

    # -- adding files -----------------------------------------------------------------
    def _writable(self) -> None:
        if self._logged or self._info is not None:
            raise UsageError(
                f"artifact {self._name!r} was already logged or read back: make a new "
                "rankwise.Artifact to log another version"
            )

    def _check_new(self, names: list[str], overwrite: bool) -> None:
        """Every name is valid and fits beside the others: no file at a directory's
        path, no directory at a file's, no duplicate unless ``overwrite``."""
        seen: set[str] = set()
        dirs = dict(self._dirs)
        for name in names:
            _file_name(name)
            if name in seen or (name in self._files and not overwrite):
                raise UsageError(
                    f"artifact {self._name!r}: file {name!r} was added twice; give each "
                    "file its own name (or pass overwrite=True)"
                )
            seen.add(name)
            if name in dirs:
                raise UsageError(
                    f"artifact {self._name!r}: file {name!r} is already a directory "
                    f"(holding {dirs[name]!r}): one path cannot be both"
                )
            parts = name.split("/")
            for i in range(1, len(parts)):
                prefix = "/".join(parts[:i])
                if prefix in self._files or prefix in seen:
                    raise UsageError(
                        f"artifact {self._name!r}: file {name!r} lies under {prefix!r}, "
                        "which is a file: one path cannot be both"
                    )
                dirs.setdefault(prefix, name)

    def _add(self, files: dict[str, _File], overwrite: bool = False) -> None:
        self._check_new(list(files), overwrite)
        for name, f in files.items():
            self._files[name] = f
            parts = name.split("/")
            for i in range(1, len(parts)):
                self._dirs.setdefault("/".join(parts[:i]), name)

    def add_file(
        self,
        local_path: str | os.PathLike[str],
        name: str | None = None,
        is_tmp: bool = False,
        skip_cache: bool = False,
        policy: str = "mutable",
        overwrite: bool = False,
    ) -> Entry:
        """Add the file at ``local_path`` as ``name`` (default: its base name).

        The file is read by the artifact worker after ``log_artifact``; keep it unchanged
        until ``wait()`` returns. Returns the entry (its digest filled once stored)."""
        self._writable()
        path = os.fspath(local_path)
        if not os.path.isfile(path):
            raise UsageError(f"artifact {self._name!r}: {path!r} is not a file")
        name = os.path.basename(path) if name is None else name
        if is_tmp:  # W&B: a temporary file is named by its content, keeping its suffix
            folder, _, base = _file_name(name).rpartition("/")
            name = (folder + "/" if folder else "") + sha_of(path)[:20] + os.path.splitext(base)[1]
        self._add({name: _File(os.path.abspath(path))}, overwrite)
        return Entry(path=name, size=os.path.getsize(path))

    def add_dir(
        self,
        local_path: str | os.PathLike[str],
        name: str | None = None,
        skip_cache: bool = False,
        policy: str = "mutable",
        merge: bool = False,
    ) -> None:
        """Add every file under the directory ``local_path``, under ``name/`` (default:
        at the top). All or nothing: one bad file name or a symlink leading out of the
        directory refuses the whole call, naming the file. ``merge=True`` lets these
        files replace ones added before at the same paths."""
        self._writable()
        top = os.fspath(local_path)
        if not os.path.isdir(top):
            raise UsageError(f"artifact {self._name!r}: {top!r} is not a directory")
        prefix = "" if name is None else check_file_name(name.strip("/"), "artifact dir name")
        found = {
            (f"{prefix}/{rel}" if prefix else rel): _File(src)
            for rel, src in walk_dir(top, self._name)
        }
        self._add(found, overwrite=merge)

    @contextlib.contextmanager
    def new_file(
        self, name: str, mode: str = "x", encoding: str | None = None
    ) -> Iterator[IO[Any]]:
        """``with artifact.new_file("labels.json") as f: f.write(...)``: a file written in
        a private temporary directory (0o700) and added as ``name`` when the block ends."""
        self._writable()
        self._check_new([name], overwrite=False)
        if mode not in ("x", "w", "xb", "wb"):
            raise UsageError(f"new_file mode={mode!r}: use 'x', 'w', 'xb' or 'wb'")
        if self._tmp is None:
            self._tmp = tempfile.mkdtemp(prefix="rankwise-artifact-")  # 0o700
            weakref.finalize(self, shutil.rmtree, self._tmp, True)
        path = os.path.join(self._tmp, sha_text(name))
        with open(path, mode, encoding=None if "b" in mode else (encoding or "utf-8")) as f:
            yield f
        self._add({name: _File(path)})

    def add_reference(
        self,
        uri: str,
        name: str | None = None,
        checksum: bool = True,
        max_objects: int | None = None,
    ) -> Entry:
        """Record ``uri`` (``s3://``, ``https://``, ``file://``...) under ``name``
        (default: its last path part). Stored as a string: never opened or fetched."""
        self._writable()
        check_reference(uri)
        if name is None:
            tail = uri.partition("://")[2].split("?", 1)[0].rstrip("/")
            name = tail.rsplit("/", 1)[-1] if "/" in tail else ""
            if not name:
                raise UsageError(
                    f"artifact {self._name!r}: reference {uri!r} has no file name to use: "
                    "pass name="
                )
        self._add({name: _File(None, ref=uri)})
        return Entry(path=name, ref=uri)

    def add(self, obj: Any, name: str) -> None:
        """Not supported: save the object to a file and use ``add_file``."""
        raise UsageError(
            f"Artifact.add({type(obj).__name__}) is not supported by rankwise: save it to a "
            f"file and call add_file(path, name={name!r})"
        )

    def pending(self) -> list[tuple[str, str | None, str | None]]:
        """``(name, local path, reference)`` of every file added, by name."""
        return [(n, f.source, f.ref) for n, f in sorted(self._files.items())]

    # -- after logging / reading back ---------------------------------------------------
    def files(self) -> list[Entry]:
        """Its entries (``path``, ``digest``, ``size``, ``ref``), sorted by path; before
        it is stored, the digests are empty."""
        if self._manifest is not None:
            return list(self._manifest.entries)
        return [
            Entry(path=n, size=size_of(f.source) if f.source else 0, ref=f.ref)
            for n, f in sorted(self._files.items())
        ]

    def get_entry(self, path: str) -> Entry:
        """The entry at ``path``; ``ArtifactNotFoundError`` (a KeyError) when there is
        none."""
        for entry in self.files():
            if entry.path == path:
                return entry
        raise ArtifactNotFoundError(
            f"artifact {self.qualified_name} has no file {path!r}: Artifact.files() lists "
            "the paths it holds"
        )

    def wait(self, timeout: float | None = None) -> Artifact:
        """Block until the logged artifact is stored (its ``version`` then set); raises
        ``ArtifactError`` when it could not be, TimeoutError after ``timeout`` seconds."""
        if self._info is not None and not self._logged:
            return self  # read back: stored already
        if not self._logged:
            raise UsageError(
                f"artifact {self._name!r} was not logged: call run.log_artifact() first"
            )
        if not self._done.wait(timeout):
            raise TimeoutError(f"artifact {self._name!r} is not stored after {timeout}s")
        if self._error is not None:
            raise ArtifactError(f"artifact {self._name!r} was not stored: {self._error}")
        return self

    def download(
        self,
        root: str | os.PathLike[str] | None = None,
        path_prefix: str | None = None,
        **_ignored: Any,
    ) -> str:
        """Write its files under ``root`` (default ``./artifacts/<name>:<version>``) and
        return that directory; ``path_prefix`` keeps the files whose path starts with it.
        Each file is checked against its digest before it takes its place; nothing is
        written outside ``root`` or through a symlink, whatever the manifest says; a
        file already there with the right digest is kept. References are not fetched
        (they are only strings). W&B's other keywords are accepted and ignored."""
        info, manifest, source = self._info, self._manifest, self._source
        if info is None or manifest is None or source is None:
            if self._logged:
                self.wait()
                info, manifest, source = self._info, self._manifest, self._source
            if info is None or manifest is None or source is None:
                raise UsageError(
                    f"artifact {self._name!r} is not stored yet: log it (and wait()) or "
                    "get it with run.use_artifact() first"
                )
        validate_manifest(manifest)
        if root is None:
            sep = "-" if sys.platform == "win32" else ":"
            root = os.path.join("artifacts", f"{info.name}{sep}{info.version}")
        base = Path(root).absolute()
        base.mkdir(parents=True, exist_ok=True)
        # Every target checked before any byte is written: a bad one writes nothing.
        wanted = [
            e
            for e in manifest.entries
            if e.ref is None and (path_prefix is None or e.path.startswith(path_prefix))
        ]
        targets = [(e, local_target(base, e.path)) for e in wanted]
        for entry, target in targets:
            fetch(source, info, entry, target)
        return str(base)

    # -- set by the worker and the readers --------------------------------------------
    def _mark_logged(self) -> None:
        self._logged = True

    def _stored(self, info: VersionInfo, manifest: Manifest, source: Source | None) -> None:
        self._manifest = manifest
        self._source = source
        self._info = info
        self._error = None
        self._done.set()

    def _failed(self, error: BaseException) -> None:
        self._error = error
        self._done.set()

    @classmethod
    def from_version(cls, info: VersionInfo, source: Source) -> Artifact:
        """An artifact read back (its ``info.manifest`` must be set)."""
        if info.manifest is None:
            raise UsageError(f"version {info.qualified_name} came without its manifest")
        art = cls(info.name, info.type, info.description, info.metadata)
        art._stored(info, info.manifest, source)
        return art
