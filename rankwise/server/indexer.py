"""Local mode: keep an embedded index in step with the stream files of a data directory.

``rankwise ui`` runs one ``DirectoryTailer`` over ``<dir>/<project>/<run>/streams/``.
Invariants:

* Stream files are only ever read. Each has a byte offset: the end of the last whole
  frame handed to the store. Only whole frames (length and checksum verified) are
  parsed, so a frame still being written is simply picked up by a later pass.
* On first sight of a file the offset is 0 and the records at or below the store's mark
  are skipped; the index therefore survives restarts of ``rankwise ui``, and re-reading a
  file is harmless anyway because the store applies only records above each mark. A
  file whose last whole frame is at or below the mark (indexed by an earlier start) is
  not read at all: its offset goes to that frame's end (``_skip_indexed``), and with a
  ``Finish`` there it is done.
* One pass reads at most ``chunk`` bytes per file, so importing one huge file does not
  hold back the records of live runs; a file whose size did not change is not read,
  and a stream whose ``Finish`` record was ingested is not looked at again. The first
  pass of ``rankwise ui`` may stop at a deadline (``poll(deadline)``): it serves then,
  and the following passes index the rest (``behind()`` says how much).
* A stream whose file is not read to its end yet (``read_to_end``) is not judged by its
  writer's pid: a finished run being indexed is shown running until its ``Finish`` is
  read, never crashed in between.
* Records are checked as an upload of them would be (``upload.check_upload``, the same
  function the ingest route calls), so ``rankwise ui`` and a server accept the same
  records. A refused chunk is warned about once and its file is indexed no further; a
  blob the run folders lack counts as lost (``_RunFolders``: the SDK writes a blob
  before its record, so nobody will write it later), as a server counts a blob its
  uploader declared lost.
* Problems with one file (damage, a store error) are warned about once; they never
  stop the tailing of the others.
* The local artifact stores (``<dir>/<project>/artifacts/``) are indexed on each
  discovery pass (``artifact_index.LocalArtifactIndex``), after the streams, so a
  version's run is in the index when its artifact appears.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ..budget import BudgetError
from ..store.base import Store
from ..store.blobs import BlobStore, RunDirBlobStore
from ..stream import records as R
from ..stream.files import iter_stream_files, last_frame, read_whole_frames
from ..stream.frames import MAGIC, scan
from ..stream.identity import StreamId
from .artifact_index import LocalArtifactIndex
from .upload import DEFAULT_LIMITS, Limits, UploadRefused, check_upload

log = logging.getLogger("rankwise.server")


@dataclass
class _Tail:
    key: StreamId
    path: Path
    offset: int = len(MAGIC)
    mark: int | None = None  # the store's mark; None until asked
    seen_size: int = -1
    done: bool = False  # Finish ingested: never read again
    warned: bool = False


def _ident(key: StreamId) -> tuple[str, str, str, int]:
    return (key.project, key.run_id, key.label, key.incarnation)


class _RunFolders:
    """The run folders' blobs as ``check_upload`` asks them (``upload.Blobs``): none is
    missing, since one the folders lack is lost for good (no uploader will send it), and
    nothing is looked up for that; a table's own file is read where it is."""

    def __init__(self, blobs: BlobStore) -> None:
        self._blobs = blobs

    def missing(self, project: str, digests: Iterable[str]) -> list[str]:
        return []

    def lost(self, project: str, digests: Iterable[str]) -> set[str]:
        return set()

    def open(self, project: str, digest: str) -> BinaryIO | None:
        return self._blobs.open(project, digest)


class DirectoryTailer:
    """Ingests every stream file under ``root`` into ``store`` and keeps following them."""

    def __init__(
        self,
        root: Path,
        store: Store,
        *,
        interval: float = 0.2,
        discover_interval: float = 0.5,
        chunk: int = 8 * 1024 * 1024,
        limits: Limits = DEFAULT_LIMITS,
        blobs: BlobStore | None = None,
    ) -> None:
        self.root = Path(root)
        self.store = store
        self.limits = limits  # the server's caps (``ServerSettings``), as uploads meet them
        self.blobs = _RunFolders(blobs if blobs is not None else RunDirBlobStore(self.root))
        self.interval = interval
        self.discover_interval = discover_interval
        self.chunk = chunk
        self._tails: dict[Path, _Tail] = {}
        self._by_stream: dict[tuple[str, str, str, int], _Tail] = {}
        self._artifacts = LocalArtifactIndex(self.root, store)
        self._last_discover = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rankwise-tailer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stopped(self) -> bool:
        return self._stop.is_set()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.poll()
            except Exception as exc:  # keep serving what is indexed already
                log.warning("rankwise ui: tailing pass failed: %r", exc)
            self._stop.wait(self.interval)

    def poll(self, deadline: float | None = None) -> int:
        """One pass: find new stream files, ingest what was appended; returns records.
        With ``deadline`` (``time.monotonic()``) the pass stops after the first file it
        indexed records of past it (files indexed before, or unchanged, are looked at
        all the same: that is cheap): ``rankwise ui``'s first pass before it serves. A
        pass also stops when the tailer is stopped."""
        now = time.monotonic()
        discover = now - self._last_discover >= self.discover_interval
        if discover:
            self._last_discover = now
            self._discover()
        total = 0
        for tail in list(self._tails.values()):
            if tail.done:
                continue
            got = 0
            try:
                got = self._follow(tail)
            except BudgetError as exc:  # the stream's config past its budget: for good
                self._warn(tail, f"not indexed further: {exc}")
                tail.done = True
            except Exception as exc:  # one bad file must not stop the others
                self._warn(tail, f"cannot index it: {exc!r}")
            total += got
            if self._stop.is_set():
                return total
            if got and deadline is not None and time.monotonic() >= deadline:
                return total  # the rest in the next pass (files indexed before are skipped)
        if discover and hasattr(self.store, "commit_artifact"):
            total += self._artifacts.poll()
        return total

    def behind(self) -> tuple[int, int]:
        """(bytes of stream files not indexed yet, bytes of stream files in all), of the
        files found so far (a file given up on counts as indexed)."""
        left = total = 0
        for tail in list(self._tails.values()):
            try:
                size = tail.path.stat().st_size
            except OSError:
                continue
            total += size
            if not tail.done and tail.seen_size != size:
                left += max(0, size - tail.offset)
        return left, total

    def _discover(self) -> None:
        for found in iter_stream_files(self.root):
            if found.path not in self._tails:
                tail = _Tail(found.id, found.path)
                self._tails[found.path] = tail
                self._by_stream[_ident(found.id)] = tail

    def read_to_end(self, start: R.StreamStart) -> bool:
        """Whether this stream's file has been read to its end (the store's
        ``local_pids``: until then a dead writer's stream is not judged crashed, since
        its Finish may be in what is not read yet). Called from request threads."""
        tail = self._by_stream.get((start.project, start.run_id, start.label, start.incarnation))
        if tail is None or tail.done:
            return True  # no file of it here (any more), or one read to its Finish or given up

        try:
            size = tail.path.stat().st_size
        except OSError:
            return True  # the file is gone: nothing more will be read
        # All read, or all that is whole: a torn last frame (SIGKILL mid-write) is never
        # completed by a dead writer.
        return tail.offset >= size or tail.seen_size == size

    def _follow(self, tail: _Tail) -> int:
        try:
            size = tail.path.stat().st_size
        except OSError:
            return 0
        if size == tail.seen_size or size <= tail.offset:
            return 0
        if tail.mark is None:
            tail.mark = self.store.acked(tail.key)
            if self._skip_indexed(tail, size):
                return 0
        try:
            records, consumed, damage = self._read(tail, size)
        except OSError as exc:
            self._warn(tail, f"cannot read it: {exc}")
            return 0
        if damage is not None:
            # Not final: on a network filesystem a fresh frame can read as garbage for a
            # moment. It is read again when the file grows; real damage stays put.
            self._warn(tail, f"unreadable ({damage}); the records before it are indexed")
        if tail.mark is None:
            tail.mark = self.store.acked(tail.key)
        fresh = [r for r in records if r.seq > tail.mark]
        if fresh:
            try:  # what an upload could not store, a file cannot either
                _, fresh = check_upload(
                    self.store, tail.key, fresh, self.limits, self.blobs, posted=False
                )
            except UploadRefused as exc:
                self._warn(tail, f"not indexed: {exc.message}")
                tail.done = True  # given up: read_to_end() is True, its state final
                return 0
        if fresh:
            tail.mark = self.store.ingest([(tail.key, fresh)]).get(tail.key, fresh[-1].seq)
            if any(type(r) is R.Finish for r in fresh):
                tail.done = True
        tail.offset += consumed
        if consumed == 0 or tail.offset >= size:
            tail.seen_size = size  # nothing more whole until the file grows
        return len(fresh)

    def _skip_indexed(self, tail: _Tail, size: int) -> bool:
        """On first sight: whether every whole frame of the file is at or below the
        store's mark (the SDK numbers a file's records in order), read from its last
        frame; then the tail moves past them, done when they end with a ``Finish``."""
        if tail.mark is None or tail.mark < 0:
            return False
        last, end = last_frame(tail.path)
        if not last or last[-1].seq > tail.mark:
            return False
        tail.offset = max(tail.offset, end)
        tail.done = any(type(r) is R.Finish for r in last)
        if tail.offset >= size:
            tail.seen_size = size
        return True

    def _read(self, tail: _Tail, size: int) -> tuple[list[R.AnyRecord], int, str | None]:
        """Whole frames from the tail's offset: (records, bytes consumed, damage)."""
        found = read_whole_frames(tail.path, tail.offset, self.chunk)
        decoded = scan(found.data, start=0)
        # A torn frame at the tail is a write in progress, not damage.
        damage = decoded.damage or (
            found.damage if found.damage and not found.damage.torn else None
        )
        return decoded.records, decoded.end, (str(damage) if damage is not None else None)

    def _warn(self, tail: _Tail, message: str) -> None:
        if not tail.warned:
            tail.warned = True
            log.warning("rankwise ui: stream file %s: %s", tail.path, message)
