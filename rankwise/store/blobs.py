"""The server's blob store: content-addressed files (images, tables, audio ...) by project.

A blob is named by the sha256 of its bytes (64 lower-case hex digits) and lives in one
project's namespace: ``<root>/<project>/<hex[:2]>/<hex>`` locally, the same keys under an
object store's prefix. Invariants every store keeps:

* **Verified.** ``put`` hashes the bytes as it copies them and stores nothing when the
  digest differs (``DigestMismatch``); so a stored blob's name is always its content.
* **Atomic.** A blob appears whole or not at all: a local write goes to a unique temp name
  in the same folder, is fsync'd and then ``os.replace``d; an S3 PUT is atomic by itself.
  Two writers of one digest write the same bytes, so either rename winning is right.
* **Streamed.** Bytes move in ``CHUNK`` pieces; no blob is ever held whole in memory.
* **Scoped.** Every call names the project; nothing reads across projects.

A record may name a blob its uploader lost (the user deleted the run's ``blobs/``
folder): the uploader declares it with ``mark_lost`` and ingest then accepts the record,
so one deleted file cannot wedge a stream's upload forever. A lost blob is served as 404;
if another uploader later sends the real bytes they are stored and served as usual.

``LocalBlobStore(root)``: a directory (``rankwise server``'s default is ``<db dir>/blobs``
for SQLite; see ``default_root``). ``FsspecBlobStore(url)``: ``s3://bucket/prefix``
through fsspec/s3fs (imported only then; ``pip install 'rankwise[s3]'``).
``RunDirBlobStore(dir)``: ``rankwise ui``'s read-only view of a data directory, where
blobs stay in the run folders that wrote them (``<dir>/<project>/<run>/blobs/``).
"""

from __future__ import annotations

import hashlib
import os
import secrets
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any, BinaryIO, Protocol

from ..stream.blobs import blob_path, fsync_dir, is_digest

__all__ = ["BlobStore", "FsspecBlobStore", "LocalBlobStore", "RunDirBlobStore", "is_digest"]

CHUNK = 1024 * 1024
_LOST = "lost"  # <project>/lost/<hex>: a tombstone, the blob itself is not there


class DigestMismatch(ValueError):
    """The bytes sent do not hash to the digest they were sent as."""


class ReadOnly(PermissionError):
    """This blob store only serves (``rankwise ui``'s view of a data directory)."""


class BlobStore(Protocol):
    """Where the server keeps blobs; see the module docstring for the invariants."""

    def has(self, project: str, digest: str) -> bool: ...

    def missing(self, project: str, digests: Iterable[str]) -> list[str]:
        """Those of ``digests`` not held, in the order given, without repeats."""
        ...

    def put(self, project: str, digest: str, fileobj: IO[bytes]) -> bool:
        """Store ``fileobj``'s bytes (read to the end) as ``digest``: True when new,
        False when already held. Raises ``DigestMismatch`` and stores nothing when the
        bytes hash to another digest."""
        ...

    def open(self, project: str, digest: str) -> BinaryIO | None:
        """The blob for reading (the caller closes it), or None when not held."""
        ...

    def size(self, project: str, digest: str) -> int | None: ...

    def local_path(self, project: str, digest: str) -> Path | None:
        """A local file holding the blob (for DuckDB and the like), or None when the store
        is remote or does not hold it (see ``fetch_local``)."""
        ...

    def mark_lost(self, project: str, digests: Iterable[str]) -> list[str]:
        """Record that ``digests`` were lost by their uploader; returns those not held."""
        ...

    def lost(self, project: str, digests: Iterable[str]) -> set[str]:
        """Those of ``digests`` declared lost (``mark_lost``)."""
        ...

    def delete(self, project: str, digest: str) -> bool:
        """Remove the blob (a purge's garbage collection, ``rankwise.store.trash``): True
        when it was held. Only ever called for a digest no row references any more."""
        ...


def _unique(digests: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(digests))


def _hash_copy(src: IO[bytes], dst: IO[bytes], digest: str) -> int:
    """Copy ``src`` to ``dst`` in chunks, raising ``DigestMismatch`` at the end if the
    bytes are not ``digest``; returns the size."""
    h = hashlib.sha256()
    size = 0
    while True:
        chunk = src.read(CHUNK)
        if not chunk:
            break
        h.update(chunk)
        dst.write(chunk)
        size += len(chunk)
    if h.hexdigest() != digest:
        raise DigestMismatch(f"the bytes hash to {h.hexdigest()}, not {digest}")
    return size


def _check(project: str, digest: str) -> None:
    from .. import names

    if not names.is_id(project):
        raise ValueError("not a project name: " + names.ID_RULE)
    if not is_digest(digest):
        raise ValueError("a blob digest is 64 lower-case hex digits (sha256)")


class BlobWriter:
    """A blob being received straight into its store's temporary file (``LocalBlobStore.
    writer``): bytes are hashed as written; ``commit`` stores them only when they hash to
    the digest (``DigestMismatch`` otherwise, nothing stored); ``abort`` drops them."""

    def __init__(self, tmp: Path, final: Path, digest: str) -> None:
        self.tmp = tmp
        self.final = final
        self.digest = digest
        self.size = 0
        self._hash = hashlib.sha256()
        self._file = open(tmp, "xb")  # noqa: SIM115 - closed by commit or abort

    def write(self, data: bytes) -> None:
        self._hash.update(data)
        self._file.write(data)
        self.size += len(data)

    def write_all(self, pieces: list[bytes]) -> None:
        """``write`` each of ``pieces`` (one call per batch: no joining copy)."""
        for data in pieces:
            self.write(data)

    def commit(self) -> bool:
        """Store the bytes written (fsync, atomic rename): True when new, False when
        another writer stored the digest meanwhile."""
        try:
            if self._hash.hexdigest() != self.digest:
                raise DigestMismatch(f"the bytes hash to {self._hash.hexdigest()}")
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()
            new = not self.final.is_file()
            os.replace(self.tmp, self.final)  # a concurrent writer wrote the same bytes
        finally:
            self.abort()
        fsync_dir(self.final.parent)
        return new

    def abort(self) -> None:
        self._file.close()
        self.tmp.unlink(missing_ok=True)


class _UploadWriter(BlobWriter):
    """A ``BlobWriter`` into a local temporary file that ``commit`` sends to an object
    store with one ``put_file`` (never visible half-written)."""

    def __init__(self, tmp: Path, store: FsspecBlobStore, key: str, digest: str) -> None:
        super().__init__(tmp, tmp, digest)
        self.store = store
        self.key = key

    def commit(self) -> bool:
        try:
            if self._hash.hexdigest() != self.digest:
                raise DigestMismatch(f"the bytes hash to {self._hash.hexdigest()}")
            self._file.close()
            if self.store.fs.exists(self.key):
                return False
            self.store.fs.put_file(str(self.tmp), self.key)
            return True
        finally:
            self.abort()


class LocalBlobStore:
    """Blobs in a local directory: ``<root>/<project>/<hex[:2]>/<hex>``."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).expanduser().absolute()

    def __repr__(self) -> str:
        return f"LocalBlobStore({str(self.root)!r})"

    def _path(self, project: str, digest: str) -> Path:
        _check(project, digest)
        return self.root / project / digest[:2] / digest

    def has(self, project: str, digest: str) -> bool:
        return self._path(project, digest).is_file()

    def missing(self, project: str, digests: Iterable[str]) -> list[str]:
        return [d for d in _unique(digests) if not self.has(project, d)]

    def put(self, project: str, digest: str, fileobj: IO[bytes]) -> bool:
        final = self._path(project, digest)
        if final.is_file():
            return False
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = final.parent / f".tmp-{digest[:16]}-{secrets.token_hex(8)}"
        try:
            with open(tmp, "xb") as out:
                _hash_copy(fileobj, out, digest)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, final)  # atomic; a concurrent writer of the digest wrote the same
        finally:
            tmp.unlink(missing_ok=True)
        fsync_dir(final.parent)
        return True

    def writer(self, project: str, digest: str) -> BlobWriter | None:
        """A ``BlobWriter`` into the store's own temporary file (one copy of the bytes,
        hashed once), or None when the blob is held already."""
        final = self._path(project, digest)
        if final.is_file():
            return None
        final.parent.mkdir(parents=True, exist_ok=True)
        return BlobWriter(
            final.parent / f".tmp-{digest[:16]}-{secrets.token_hex(8)}", final, digest
        )

    def open(self, project: str, digest: str) -> BinaryIO | None:
        path = self._path(project, digest)
        # O_NOFOLLOW: a symlink planted under the root is never followed out of it.
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
        try:
            fd = os.open(path, flags)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError:  # ELOOP: a symlink where a blob should be
            return None
        return os.fdopen(fd, "rb")

    def size(self, project: str, digest: str) -> int | None:
        try:
            st = os.lstat(self._path(project, digest))
        except OSError:
            return None
        return st.st_size if not os.path.islink(self._path(project, digest)) else None

    def local_path(self, project: str, digest: str) -> Path | None:
        path = self._path(project, digest)
        return path if path.is_file() and not path.is_symlink() else None

    def mark_lost(self, project: str, digests: Iterable[str]) -> list[str]:
        out = self.missing(project, digests)
        for d in out:
            marker = self.root / project / _LOST / d
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.touch(exist_ok=True)
        return out

    def lost(self, project: str, digests: Iterable[str]) -> set[str]:
        for d in digests:
            _check(project, d)
        return {d for d in digests if (self.root / project / _LOST / d).is_file()}

    def delete(self, project: str, digest: str) -> bool:
        path = self._path(project, digest)
        try:
            path.unlink()
        except FileNotFoundError:
            return False
        (self.root / project / _LOST / digest).unlink(missing_ok=True)
        return True


class FsspecBlobStore:
    """Blobs in an object store by URL (``s3://bucket/prefix``), through fsspec.

    The endpoint is ``endpoint`` (``--blobs-endpoint``), else ``AWS_ENDPOINT_URL``, else
    AWS's; credentials come from the usual AWS variables and files (s3fs/botocore).
    Listings are never cached: another server process may have stored a blob since.
    ``put`` hashes into a local temporary file first, so a mismatch uploads nothing,
    then sends it with one ``put_file`` (an S3 PUT, or a multipart upload completed
    only at the end: never visible half-written).
    """

    def __init__(self, url: str, endpoint: str | None = None, **options: Any) -> None:
        try:
            import fsspec  # type: ignore[import-untyped]
        except ImportError:
            raise ImportError(
                "an s3:// blob store needs fsspec and s3fs: pip install 'rankwise[s3]'"
            ) from None
        self.url = url.rstrip("/")
        self.endpoint = endpoint or os.environ.get("AWS_ENDPOINT_URL") or None
        opts: dict[str, Any] = {"use_listings_cache": False, "skip_instance_cache": True}
        if url.startswith("s3://") and self.endpoint:
            opts["endpoint_url"] = self.endpoint
        opts.update(options)
        self.fs, self.base = fsspec.core.url_to_fs(self.url, **opts)
        self.base = self.base.rstrip("/")

    def __repr__(self) -> str:
        return f"FsspecBlobStore({self.url!r})"

    def _key(self, project: str, digest: str) -> str:
        _check(project, digest)
        return f"{self.base}/{project}/{digest[:2]}/{digest}"

    def has(self, project: str, digest: str) -> bool:
        return bool(self.fs.exists(self._key(project, digest)))

    def missing(self, project: str, digests: Iterable[str]) -> list[str]:
        wanted = _unique(digests)
        if len(wanted) <= 4:
            return [d for d in wanted if not self.has(project, d)]
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(8) as pool:  # one HEAD per digest: overlap them
            held = list(pool.map(lambda d: self.has(project, d), wanted))
        return [d for d, h in zip(wanted, held) if not h]

    def put(self, project: str, digest: str, fileobj: IO[bytes]) -> bool:
        key = self._key(project, digest)
        if self.fs.exists(key):
            return False
        with tempfile.NamedTemporaryFile(prefix="rankwise-blob-") as tmp:
            _hash_copy(fileobj, tmp, digest)
            tmp.flush()
            self.fs.put_file(tmp.name, key)
        return True

    def writer(self, project: str, digest: str) -> BlobWriter | None:
        """A ``BlobWriter`` into a local temporary file, sent at ``commit`` (the bytes are
        copied and hashed once on this host), or None when the blob is held already."""
        key = self._key(project, digest)
        if self.fs.exists(key):
            return None
        fd, name = tempfile.mkstemp(prefix="rankwise-blob-")
        os.close(fd)
        os.unlink(name)  # BlobWriter creates it exclusively
        return _UploadWriter(Path(name), self, key, digest)

    def open(self, project: str, digest: str) -> BinaryIO | None:
        try:
            return self.fs.open(self._key(project, digest), "rb", block_size=CHUNK)  # type: ignore[no-any-return]
        except FileNotFoundError:
            return None

    def size(self, project: str, digest: str) -> int | None:
        try:
            return int(self.fs.info(self._key(project, digest))["size"])
        except FileNotFoundError:
            return None

    def local_path(self, project: str, digest: str) -> Path | None:
        return None

    def mark_lost(self, project: str, digests: Iterable[str]) -> list[str]:
        out = self.missing(project, digests)
        for d in out:
            self.fs.pipe_file(f"{self.base}/{project}/{_LOST}/{d}", b"")
        return out

    def lost(self, project: str, digests: Iterable[str]) -> set[str]:
        for d in digests:
            _check(project, d)
        return {d for d in digests if self.fs.exists(f"{self.base}/{project}/{_LOST}/{d}")}

    def delete(self, project: str, digest: str) -> bool:
        key = self._key(project, digest)
        try:
            self.fs.rm_file(key)
        except FileNotFoundError:
            return False
        return True


class RunDirBlobStore:
    """``rankwise ui``: the blobs of a data directory, read where the runs wrote them.

    Runs keep their blobs in ``<dir>/<project>/<run>/blobs/<hex[:2]>/<hex>``, and the
    project's local artifact store its files in ``<dir>/<project>/artifacts/files/``; a
    digest is looked up there and in every run folder of the project (content-addressed:
    any copy is right) and where it was found is remembered. Nothing is copied and
    nothing is written.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).expanduser().absolute()
        self._found: dict[tuple[str, str], Path] = {}

    def __repr__(self) -> str:
        return f"RunDirBlobStore({str(self.root)!r})"

    def _find(self, project: str, digest: str) -> Path | None:
        _check(project, digest)
        hit = self._found.get((project, digest))
        if hit is not None and hit.is_file():
            return hit
        project_dir = self.root / project
        try:
            runs = sorted(project_dir.iterdir())
        except OSError:
            return None
        # Artifact files of the project's local store sit whole under artifacts/files/.
        stored = project_dir / "artifacts" / "files" / digest[:2] / digest
        for path in (stored, *(blob_path(run, digest) for run in runs)):
            if path.is_file() and not path.is_symlink():
                if len(self._found) > 100_000:
                    self._found.clear()
                self._found[(project, digest)] = path
                return path
        return None

    def has(self, project: str, digest: str) -> bool:
        return self._find(project, digest) is not None

    def missing(self, project: str, digests: Iterable[str]) -> list[str]:
        return [d for d in _unique(digests) if not self.has(project, d)]

    def put(self, project: str, digest: str, fileobj: IO[bytes]) -> bool:
        raise ReadOnly("rankwise ui serves the run folders' blobs and stores none")

    def open(self, project: str, digest: str) -> BinaryIO | None:
        path = self._find(project, digest)
        if path is None:
            return None
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except OSError:
            return None
        return os.fdopen(fd, "rb")

    def size(self, project: str, digest: str) -> int | None:
        path = self._find(project, digest)
        return path.stat().st_size if path is not None else None

    def local_path(self, project: str, digest: str) -> Path | None:
        return self._find(project, digest)

    def mark_lost(self, project: str, digests: Iterable[str]) -> list[str]:
        raise ReadOnly("rankwise ui serves the run folders' blobs and stores none")

    def delete(self, project: str, digest: str) -> bool:
        """Nothing: a run folder's blobs go with the folder (``rankwise rm`` locally)."""
        return False

    def lost(self, project: str, digests: Iterable[str]) -> set[str]:
        return set()  # the local index applies every record: there is no upload to wedge


def open_blob_store(spec: str, endpoint: str | None = None) -> BlobStore:
    """A blob store from ``--blobs``: a URL with a scheme (``s3://...``) or a directory."""
    if "://" in spec and not spec.startswith("file://"):
        return FsspecBlobStore(spec, endpoint)
    return LocalBlobStore(spec.removeprefix("file://"))


def default_root(db_url: str) -> Path:
    """Where ``rankwise server`` keeps blobs without ``--blobs``.

    SQLite: ``blobs/`` beside the database file, so the file and its blobs move and are
    backed up together. PostgreSQL (the database is elsewhere): ``./rankwise-blobs`` under
    the server's working directory, announced at start; a team with several server hosts
    should pass ``--blobs s3://...`` (or a shared path) so every worker sees every blob.
    """
    if db_url.startswith("sqlite:///"):
        return Path(db_url.removeprefix("sqlite:///")).expanduser().absolute().parent / "blobs"
    return Path.cwd() / "rankwise-blobs"


def store_blobs(store: object) -> BlobStore | None:
    """``create_app``'s blob store when the settings name none: ``blobs/`` beside a
    SQLite file (``default_root``); None for other stores (the blob routes answer 503)."""
    path = getattr(store, "path", None)
    if isinstance(path, Path) and path.name != ":memory:":
        return LocalBlobStore(path.parent / "blobs")
    return None


def fetch_local(store: BlobStore, project: str, digest: str, cache_dir: Path) -> Path | None:
    """A local file holding the blob: the store's own, or a copy fetched once into
    ``cache_dir`` (immutable by digest, so a cached copy is always right)."""
    path = store.local_path(project, digest)
    if path is not None:
        return path
    cached = LocalBlobStore(cache_dir)
    if cached.has(project, digest):
        return cached.local_path(project, digest)
    src = store.open(project, digest)
    if src is None:
        return None
    with src:
        cached.put(project, digest, src)
    return cached.local_path(project, digest)


def iter_chunks(fileobj: BinaryIO, chunk: int = CHUNK, limit: int | None = None) -> Iterator[bytes]:
    """Read ``fileobj`` to the end (or ``limit`` bytes) in pieces, then close it (a
    streamed reply's body)."""
    left = limit
    try:
        while left is None or left > 0:
            data = fileobj.read(chunk if left is None else min(chunk, left))
            if not data:
                return
            if left is not None:
                left -= len(data)
            yield data
    finally:
        fileobj.close()
