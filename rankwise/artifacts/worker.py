"""The run's artifact worker: stages and publishes logged artifacts off the training thread.

``run.log_artifact`` only puts the artifact on this worker's queue (it holds paths, not
bytes). The worker thread then, for each artifact in turn:

1. *stages* it: hashes every file (whole and chunk digests in one pass with a 4 MiB
   buffer, so memory stays bounded for a file of any size) and copies it into the local
   store's ``files/`` in that same pass (what is stored is what was hashed). In local
   mode a file the size of the latest version's at that path is only hashed: when the
   whole content is identical to the latest version nothing is copied; otherwise such
   files are copied after, re-hashed as they are (a file changed meanwhile is refused,
   never stored under a wrong digest). A file whose size or modification time changed
   since ``log_artifact`` is refused too;
2. builds the manifest;
3. *publishes* it: local mode assigns a version in the local store; remote mode writes an
   outbox entry, then calls the ``Publisher`` (``rankwise.artifacts.remote``'s
   ``RemoteArtifacts``) and removes the entry once the server holds the version.

Nothing here raises into training: a failure is recorded on the artifact (its ``wait()``
raises it) and warned about once. A remote commit that fails stays in the outbox for
``rankwise sync``. ``stop(deadline)`` (from ``run.finish()``) waits for the queue until
the deadline, then writes what is left to the outbox (file paths not yet hashed) so that
``rankwise sync`` can store it.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from .. import _log
from ..errors import UsageError
from ..wire.artifacts import CommitRequest, VersionInfo
from .artifact import Artifact
from .local import LocalArtifacts, OutboxEntry
from .manifest import Entry, Manifest, hash_file, manifest_digest, validate_manifest


class Publisher(Protocol):
    """Commits a staged version to a server (``RemoteArtifacts``): uploads the chunks the
    server lacks, read from ``files_root`` (the local store's ``files/``), then commits.
    Idempotent on ``request.client_id``."""

    def publish(self, name: str, request: CommitRequest, files_root: Path) -> VersionInfo: ...


Files = list[tuple[str, str | None, str | None]]  # (name, local path, reference)


def stage(
    files: Files, store: LocalArtifacts | None = None, likely: dict[str, int] | None = None
) -> tuple[Manifest, int]:
    """The manifest of ``files`` (each hashed with bounded memory, references kept) and
    the bytes copied into ``store``: with a store, each file is hashed and copied in one
    pass, except those in ``likely`` (path -> size of the latest version's files) with
    the same size, which are only hashed: probably identical, so nothing is copied."""
    entries = []
    copied = 0
    likely = likely or {}
    for name, source, ref in files:
        if ref is not None:
            entries.append(Entry(path=name, ref=ref))
            continue
        assert source is not None
        if store is not None and likely.get(name) != os.path.getsize(source):
            entry, n = store.stage_file(source)
            copied += n
        else:
            entry = hash_file(source)
        entry.path = name
        entries.append(entry)
    manifest = Manifest(entries=sorted(entries, key=lambda e: e.path))
    validate_manifest(manifest)
    return manifest, copied


def latest_sizes(store: LocalArtifacts, name: str) -> dict[str, int]:
    """path -> size of the files of ``name``'s latest version (empty when none)."""
    numbers = store.version_numbers(name)
    if not numbers:
        return {}
    try:
        manifest = store.manifest(store.version(name, numbers[-1]).digest)
    except Exception:
        return {}
    return {e.path: e.size for e in manifest.entries if e.ref is None}


def copy_files(store: LocalArtifacts, manifest: Manifest, files: Files) -> int:
    """Copy the manifest's files the store lacks into it; returns the bytes copied."""
    sources = {name: source for name, source, _ in files}
    copied = 0
    for e in manifest.entries:
        source = sources.get(e.path)
        if e.ref is None and source is not None:
            copied += store.store_file(source, e)
    return copied


def commit_local(
    store: LocalArtifacts, name: str, request: CommitRequest, files: Files
) -> tuple[VersionInfo, int]:
    """Local mode: copy (unless identical to the latest) and assign a version."""
    numbers = store.version_numbers(name)
    same = bool(numbers) and store.version(name, numbers[-1]).digest == manifest_digest(
        request.manifest
    )
    copied = 0 if same else copy_files(store, request.manifest, files)
    info, _created = store.commit(name, request)
    return info, copied


class _Job:
    __slots__ = ("aliases", "artifact", "client_id", "created_at", "files", "stats", "tags")

    def __init__(self, artifact: Artifact, aliases: list[str], tags: list[str]) -> None:
        self.artifact = artifact
        self.aliases = aliases
        self.tags = tags
        self.client_id = uuid.uuid4().hex
        self.created_at = time.time()
        self.files = artifact.pending()
        # Each file's (size, mtime) when logged: one changed before it is stored is
        # refused rather than stored with content the caller did not log.
        self.stats = {name: _stat(src) for name, src, _ in self.files if src is not None}


def _stat(path: str) -> tuple[int, int]:
    try:
        st = os.stat(path)
    except OSError:
        return (-1, -1)
    return (st.st_size, st.st_mtime_ns)


def check_unchanged(job_stats: dict[str, tuple[int, int]], files: Files) -> None:
    for name, src, _ in files:
        if src is not None and name in job_stats and _stat(src) != job_stats[name]:
            raise UsageError(
                f"file {name!r} ({src}) changed or vanished after log_artifact(): log a file "
                "that stays as it is until artifact.wait() returns (a new path per "
                "checkpoint, or wait() before overwriting it)"
            )


_STOP = object()


class ArtifactWorker:
    """One run's artifact thread (a ``Component``: ``stop(deadline)``)."""

    def __init__(
        self,
        store: LocalArtifacts,
        run_id: str | None,
        label: str | None,
        publisher: Callable[[], Publisher] | None = None,
    ) -> None:
        """``publisher`` (remote mode) makes the ``Publisher`` on first use; None: local."""
        self.store = store
        self.run_id = run_id
        self.label = label
        self._make_publisher = publisher
        self._publisher: Publisher | None = None
        self._publisher_failed = False
        self._queue: queue.Queue[_Job | object] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._current: _Job | None = None
        self._warned = False
        self._stopped = False

    def submit(self, artifact: Artifact, aliases: list[str], tags: list[str] | None = None) -> None:
        """Queue ``artifact`` (training thread: no I/O beyond a few ``stat`` calls)."""
        artifact._mark_logged()
        job = _Job(artifact, aliases, tags or [])
        if self._stopped:
            self._leave([job], "the run had ended")
            return
        self._queue.put(job)
        if self._thread is None:
            with self._lock:
                if self._thread is None:
                    self._thread = threading.Thread(
                        target=self._loop, name="rankwise-artifacts", daemon=True
                    )
                    self._thread.start()

    def _loop(self) -> None:
        while True:
            job = self._queue.get()
            if job is _STOP:
                return
            assert isinstance(job, _Job)
            self._current = job
            try:
                self._process(job)
            except Exception as exc:
                job.artifact._failed(exc)
                self._warn(f"artifact {job.artifact.name!r} was not stored: {exc}")
            finally:
                self._current = None

    def _request(self, job: _Job, manifest: Manifest) -> CommitRequest:
        art = job.artifact
        return CommitRequest(
            type=art.type,
            manifest=manifest,
            client_id=job.client_id,
            description=art.description,
            metadata=art.metadata,
            aliases=job.aliases,
            tags=job.tags,
            run_id=self.run_id,
            label=self.label,
            created_at=job.created_at,
        )

    def _process(self, job: _Job) -> None:
        art = job.artifact
        check_unchanged(job.stats, job.files)
        local = self._make_publisher is None
        likely = latest_sizes(self.store, art.name) if local else {}
        manifest, copied = stage(job.files, self.store, likely)
        check_unchanged(job.stats, job.files)  # changed while read: refused, nothing made
        request = self._request(job, manifest)
        if local:
            info, more = commit_local(self.store, art.name, request, job.files)
            if self._stopped:  # stop() may have left it in the outbox meanwhile
                self.store.outbox_done(job.client_id)
            art._bytes_copied = copied + more
            art._stored(info, request.manifest, self.store)
            return
        art._bytes_copied = copied
        self.store.outbox_put(OutboxEntry(name=art.name, request=request))
        publisher = self._get_publisher()
        if publisher is None:
            raise RuntimeError("no connection to the server: kept for `rankwise sync`")
        try:
            info = publisher.publish(art.name, request, self.store.files_root)
        except Exception as exc:
            raise RuntimeError(f"{exc} (kept in the outbox for `rankwise sync`)") from exc
        self.store.outbox_done(job.client_id)
        art._stored(info, request.manifest, self.store)

    def _get_publisher(self) -> Publisher | None:
        if self._publisher is None and not self._publisher_failed:
            try:
                assert self._make_publisher is not None
                self._publisher = self._make_publisher()
            except Exception as exc:
                self._publisher_failed = True
                self._warn(f"artifacts cannot reach the server ({exc!r})")
        return self._publisher

    def _warn(self, message: str) -> None:
        if not self._warned:
            self._warned = True
            _log.warn(f"{message}; later artifact problems are not shown (run rankwise sync)")

    def _leave(self, jobs: list[_Job], why: str) -> None:
        """Write unstored jobs to the outbox (paths only) for ``rankwise sync``."""
        for job in jobs:
            art = job.artifact
            art._failed(RuntimeError(f"{why}: kept in the outbox for `rankwise sync`"))
            if self.store.in_outbox(job.client_id):
                continue  # staged already (remote mode): that entry needs no source file
            request = self._request(job, Manifest())
            entry = OutboxEntry(
                name=art.name,
                request=request,
                files=job.files,
                staged=False,
                local=self._make_publisher is None,
            )
            try:
                self.store.outbox_put(entry)
            except OSError as exc:
                _log.warn(f"artifact {art.name!r} was lost: cannot write the outbox: {exc}")
        if jobs:
            _log.warn(
                f"{len(jobs)} artifact(s) not stored before the run ended ({why}): "
                f"kept in {self.store.base / 'outbox'}; run `rankwise sync` to store them"
            )

    def stop(self, deadline: float) -> None:
        """Wait for the queue until ``deadline``; write what is left to the outbox."""
        self._stopped = True
        thread = self._thread
        if thread is None:
            return
        self._queue.put(_STOP)
        thread.join(max(0.0, deadline - time.monotonic()))
        if not thread.is_alive():
            close = getattr(self._publisher, "close", None)
            if callable(close):
                with contextlib.suppress(Exception):
                    close()
            return
        left: list[_Job] = []
        current = self._current
        if current is not None:
            left.append(current)
        while True:
            try:
                job = self._queue.get_nowait()
            except queue.Empty:
                break
            if isinstance(job, _Job):
                left.append(job)
        self._leave(left, "finish() timed out")
