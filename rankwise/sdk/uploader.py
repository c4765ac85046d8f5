"""Remote mode: upload a stream file to a rankwise server while it grows.

Why nothing is lost and nothing is doubled:

* The local stream file stays the truth. The uploader only *reads* it; the writer appends
  to it whether or not a server answers, so an outage costs nothing but delay: the bytes
  wait in the file until they are acknowledged.
* Only whole frames (length and checksum verified) are sent, cut from the file as they
  are: an upload body is ``MAGIC`` + frames, the same bytes as the file.
* The read position advances only past a batch the server acknowledged (200). It starts
  from the server's mark (``GET /api/v1/ack``), and a 409 (the server's mark is behind
  the batch, e.g. its database was restored) rewinds it to the frame holding mark + 1.
* A retry may resend records the server already applied; its store applies only records
  above each stream's high-water mark, in the same transaction as the data, so a replay
  changes nothing. Delivery here is at-least-once; exactly-once is the store's property.
* Blobs first (``rankwise.sdk.blobsend``): before a batch is posted, the blobs its
  records name are PUT (those the server lacks); a 409 ``missing_blobs`` from ingest
  sends them and resends the batch. A record is never applied before its blob is stored.
* A run deleted on the server (410 Gone) is told once, in one warning; its streams
  stop uploading and training goes on (the records stay in the file).
* The network is touched only on the uploader's daemon thread: ``log()`` never waits.
  ``finish()`` waits at most ``upload_timeout`` for the upload to drain; what is left is
  named in a warning and stays in the file for ``rankwise sync``.

``StreamUpload`` is the synchronous core (one stream, one batch per ``pump()``), shared by
the live ``Uploader`` thread and by ``rankwise sync`` (``rankwise.sdk.sync``).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import _log
from ..settings import Settings
from ..stream import files, streamkey
from ..stream.files import read_stream_id, read_whole_frames
from ..stream.frames import MAGIC, iter_frames
from ..stream.identity import StreamId
from ..stream.wire import STREAM_CONTENT_TYPE, UPLOAD_INTERVAL_HEADER
from .retry import (
    GiveUp,
    Refused,
    Retry,
    RunDeleted,
    backoff_delay,
    refusal,
    transient,
    unreachable,
)

if TYPE_CHECKING:
    import httpx

INGEST = "/api/v1/ingest"
ACK = "/api/v1/ack"
BATCH_BYTES = 4 * 1024 * 1024  # raw frame bytes per request (compressed on the wire)
# When the server never answered during the run, finish() gives the upload this long for
# one last try instead of the full upload_timeout: an outage that lasted the whole run is
# not going to end in the next 30 s, and every rank would wait for it at exit.
NEVER_REACHED_GRACE = 2.0


def stream_ref(path: Path) -> StreamId:
    """The stream a file holds, from its first record (``StreamStart``)."""
    found = read_stream_id(path)
    if found is None:
        raise GiveUp(f"{path} does not start with a stream-start record")
    return found


class StreamUpload:
    """Upload state of one stream file: where the unacknowledged bytes begin.

    ``pump()`` sends one batch and returns True while there may be more to send at once.
    It raises ``Retry`` for transient failures and ``GiveUp`` for permanent ones.
    ``watch_finish`` makes it decode what it sends to notice the stream's ``Finish``.
    """

    def __init__(
        self,
        client: httpx.Client,
        path: Path,
        ref: StreamId,
        *,
        max_batch: int = BATCH_BYTES,
        encoding: str | None = None,
        watch_finish: bool = False,
    ) -> None:
        self.client = client
        self.path = path
        self.ref = ref
        self.max_batch = max_batch
        from .. import _http

        self.encoding = encoding or _http.default_encoding()
        self.watch_finish = watch_finish
        self.offset: int | None = None  # first byte not acknowledged; None before resume()
        self.acked = -1
        self.sent_bytes = 0
        self.finished = False  # a Finish record was acknowledged (watch_finish only)
        # The upload interval the server last asked for (0: none): it is loaded.
        self.advised = 0.0
        # The stream's secret (``rankwise.stream.streamkey``), sent with every upload.
        self.secret = streamkey.read(path)
        from .blobsend import BlobSender

        # Streams live in <run dir>/streams/, blobs in <run dir>/blobs/.
        self.blobs = BlobSender(client, ref.project, path.parent.parent)

    def resume(self) -> None:
        """Ask the server for its mark and skip the frames it holds already."""
        self._resume_at(int(self._request("GET", ACK, None)["acked_seq"]))

    def _resume_at(self, mark: int) -> None:
        """Go on from the frame holding the record after the server's ``mark``."""
        offset = files.offset_after(self.path, mark)
        if offset is None:
            raise GiveUp(f"{self.path} is not a rankwise stream file")
        self.acked, self.offset = mark, offset

    def pending_bytes(self) -> int:
        try:
            size = self.path.stat().st_size
        except OSError:
            return 0
        return max(0, size - (len(MAGIC) if self.offset is None else self.offset))

    def pump(self) -> bool:
        frames = self.take()
        if frames is None:
            return False
        try:
            reply = self._request("POST", INGEST, MAGIC + frames)
        except (_MissingBlobs, _Rewind, _TooLarge) as refused:
            self.refused(frames, refused)
            return True
        self.took(frames, int(reply["acked_seq"]))
        return True

    def take(self) -> bytes | None:
        """The whole frames to send next (their blobs stored first), or None: nothing new.
        Raises ``GiveUp`` for a damaged file."""
        if self.offset is None:
            self.resume()
        assert self.offset is not None
        found = read_whole_frames(self.path, self.offset, self.max_batch)
        frames, damage = found.data, found.corruption
        if not frames:
            if damage:
                raise GiveUp(f"{self.path} is damaged at offset {self.offset} ({damage})")
            return None
        self.blobs.send_for(files.records_naming_blobs(frames, self.acked))
        return frames

    def took(self, frames: bytes, mark: int) -> None:
        """The server acknowledged ``frames`` (``take``'s) with the stream's ``mark``."""
        assert self.offset is not None
        self.acked = max(self.acked, mark)
        self.offset += len(frames)
        self.sent_bytes += len(frames)
        if self.watch_finish and not self.finished:
            self.finished = files.has_finish(frames)

    def refused(self, frames: bytes, refused: Exception) -> None:
        """Act on a refusal of ``frames`` that a resend answers: send the missing blobs,
        rewind to the server's mark, or halve the batch (``GiveUp`` when one frame is
        over the server's limit)."""
        if isinstance(refused, _MissingBlobs):
            self.blobs.send_missing(refused.digests)
        elif isinstance(refused, _Rewind):
            self._resume_at(refused.mark)
        elif isinstance(refused, _TooLarge):
            if sum(1 for _ in iter_frames(frames)) <= 1:
                raise GiveUp(
                    f"a frame of {len(frames)} bytes in {self.path} is over the server's body "
                    "limit: start the server with a larger --max-body-mb"
                ) from None
            self.max_batch = max(1, len(frames) // 2)  # at least one whole frame still goes
        else:
            raise refused

    def _request(self, method: str, path: str, body: bytes | None) -> dict[str, Any]:
        import httpx

        from .. import _http

        headers = {"Accept": "application/json"}
        content = None
        if body is not None:
            content = _http.compress(body, self.encoding)
            headers["Content-Type"] = STREAM_CONTENT_TYPE
            if self.secret is not None:
                headers[streamkey.HEADER] = self.secret
            if self.encoding != "identity":
                headers["Content-Encoding"] = self.encoding
        try:
            response = self.client.request(
                method, path, params=self.ref.params(), content=content, headers=headers
            )
        except httpx.TransportError as exc:
            raise unreachable(exc) from exc
        status = response.status_code
        if method == "POST":  # only an accepted upload paces the next one
            advice = response.headers.get(UPLOAD_INTERVAL_HEADER)
            self.advised = _http.advised_interval(advice) if status == 200 else 0.0
        if status == 200:
            return _http.decode(response)  # type: ignore[no-any-return]
        message = _http.error_message(response)
        if status in (409, 413, 410):
            raise stream_refusal(status, _http.error_body(response), message)
        if status == 415 and self.encoding != "identity":
            self.encoding = "gzip" if self.encoding == "zstd" else "identity"
            raise Retry(f"server cannot read this encoding: {message}")
        transient(response, message)
        if status == 403 and _http.error_body(response).get("stream_key"):
            # Not the token: this stream's secret is missing or another (its sidecar).
            raise GiveUp(f"the server at {self.client.base_url} refused {self.ref}: {message}")
        if status in (401, 403):
            raise Refused(refusal(str(self.client.base_url), self.ref.project, status, message))
        hint = " (is it a rankwise server?)" if status == 404 else ""
        raise GiveUp(f"server at {self.client.base_url}{hint} answered {status}: {message}")


def stream_refusal(status: int, error: dict[str, Any], message: str) -> Exception:
    """The exception for a refusal of one stream's upload (409, 410, 413), from the
    error object: what ``StreamUpload.refused`` acts on, or ``RunDeleted``."""
    if status == 409:
        if error.get("missing_blobs"):
            return _MissingBlobs([str(d) for d in error["missing_blobs"]])
        return _Rewind(int(error.get("acked_seq", -1)))
    if status == 413:
        return _TooLarge(message)
    return RunDeleted(message)  # 410: the run was deleted on the server


class _Rewind(Exception):
    def __init__(self, mark: int) -> None:
        super().__init__(mark)
        self.mark = mark


class _TooLarge(Exception):
    pass


class _MissingBlobs(Exception):
    def __init__(self, digests: list[str]) -> None:
        super().__init__(digests)
        self.digests = digests


_deleted_warned: set[tuple[str, str]] = set()
_deleted_lock = threading.Lock()


def _warn_deleted_once(ref: StreamId, message: str) -> None:
    """One warning per deleted run in this process, however many streams it uploads."""
    with _deleted_lock:
        if (ref.project, ref.run_id) in _deleted_warned:
            return
        _deleted_warned.add((ref.project, ref.run_id))
    _log.warn(
        f"the server no longer takes run {ref.run_id!r}: {message}. Training goes on; "
        "its records stay on disk and are not uploaded"
    )


def warn_left(
    path: Path, server: str, ref: StreamId, left: int, timeout: float, problem: str | None,
    never: bool,
) -> None:  # fmt: skip
    """The one line an uploader (``Uploader``, ``NodeUploader``) prints at the end when
    ``left`` bytes of its stream are not uploaded: what, where, and the ``rankwise sync``
    command; ``never``: the server was not reachable at any moment of the run."""
    why = problem or "the upload did not finish in time"
    sync = f"rankwise sync {path.parent.parent} --server {server}"
    if never:
        _log.warn(
            f"the server at {server} was not reachable during this run ({why}). "
            f"Nothing is lost: {left} bytes of {ref} are in {path}. Upload them with: {sync}"
        )
        return
    _log.warn(
        f"{left} bytes of {ref} were not uploaded to {server} within {timeout:g}s ({why}). "
        f"Nothing is lost: they are in {path}. Upload them with: {sync}"
    )


URGENT_FOR = 5.0  # seconds of unpaced uploads after Uploader.urgent()


class Uploader:
    """The live uploader of one process's stream: a run component (``stop(deadline)``).

    Woken by the writer's ``flush_listeners`` after each append; posts at most one batch
    per ``upload_interval`` while training runs, and drains as fast as it can once the
    run finishes.
    """

    def __init__(
        self,
        server: str,
        path: Path,
        ref: StreamId,
        settings: Settings,
        *,
        transport: httpx.BaseTransport | None = None,
        on_drained: Callable[[float], object] | None = None,
    ) -> None:
        self.server = server
        self.path = path
        self.ref = ref
        self._settings = settings
        self._transport = transport
        # At stop, once drained: called with the deadline (the session uploads what dead
        # siblings left behind there: rankwise.sdk.orphans).
        self._on_drained = on_drained
        self._upload: StreamUpload | None = None
        self._wake = threading.Event()  # new frames in the file
        self._interrupt = threading.Event()  # cut a backoff or spacing sleep short
        self._closing = threading.Event()  # the file is final: drain it
        self._quit = threading.Event()  # give up now
        self._drained = threading.Event()
        self._done = threading.Event()
        self._reached = threading.Event()  # the server answered at least once
        self._attempted = threading.Event()  # the first request has an outcome
        self._failures = 0  # failed attempts in a row
        self._unpaced_until = 0.0  # monotonic time until which pacing is skipped
        self._problem: str | None = None
        self._refused = False  # warned once already, with the sync command
        self._thread = threading.Thread(target=self._run, name="rankwise-uploader", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def urgent(self) -> None:
        """Send what is new now and for ``URGENT_FOR`` seconds at ``upload_interval``,
        whatever pacing the server asked for: the record that called for it (a stall) may
        be written a moment after this call."""
        self._unpaced_until = time.monotonic() + URGENT_FOR
        self._interrupt.set()
        self._wake.set()

    def wake(self) -> None:
        """Flush listener: called on the writer thread, so it only sets an event."""
        self._wake.set()

    def refused(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s for the first request's outcome: did the server refuse
        this process's token? (``init`` prints no dashboard link to a run that is refused.)"""
        self._attempted.wait(timeout)
        return self._refused

    @property
    def drained(self) -> bool:
        return self._drained.is_set()

    def pending_bytes(self) -> int:
        if self._upload is not None:
            return self._upload.pending_bytes()
        try:
            return max(0, self.path.stat().st_size - len(MAGIC))
        except OSError:
            return 0

    def stop(self, deadline: float) -> None:
        """Wait for the upload to drain until ``deadline`` or ``upload_timeout``, then report."""
        self._closing.set()
        self._interrupt.set()
        self._wake.set()
        limit = min(deadline, time.monotonic() + self._settings.upload_timeout)
        if not self._reached.is_set():  # a short run: let the first try tell us
            self._attempted.wait(max(0.0, limit - time.monotonic()))
        never = not self._reached.is_set() and self._failures > 0
        if self._thread.is_alive():
            if never:  # one last try, not the whole timeout (see NEVER_REACHED_GRACE)
                self._last_try(min(limit, time.monotonic() + NEVER_REACHED_GRACE))
                never = not self._reached.is_set()
            if not never:
                self._done.wait(max(0.0, limit - time.monotonic()))
        if self._drained.is_set():
            if self._on_drained is not None:
                self._on_drained(limit)
            return
        self._quit.set()
        if self._refused:
            return
        self._interrupt.set()
        left, timeout = self.pending_bytes(), self._settings.upload_timeout
        warn_left(self.path, self.server, self.ref, left, timeout, self._problem, never)

    def _last_try(self, until: float) -> None:
        """Keep retrying until ``until``, or until the server answers (the caller then
        waits for the drain): an outage that ends just as the run does costs nothing."""
        while time.monotonic() < until and not self._done.is_set():
            if self._reached.is_set():
                return
            time.sleep(0.01)

    def _run(self) -> None:
        try:
            from .. import _http

            client = _http.make_client(
                self.server, transport=self._transport, token=self._settings.token
            )
        except Exception as exc:
            self._problem = f"cannot set up the upload: {exc!r}"
            _log.warn(f"remote mode is off for this process: {self._problem}")
            self._attempted.set()
            self._done.set()
            return
        try:
            self._loop(StreamUpload(client, self.path, self.ref, max_batch=BATCH_BYTES))
        except Exception as exc:  # never let the thread die silently
            self._problem = f"uploader stopped: {exc!r}"
            _log.warn(f"{self._problem}; the stream file is kept for rankwise sync")
        finally:
            client.close()
            self._attempted.set()
            self._done.set()

    def _loop(self, upload: StreamUpload) -> None:
        self._upload = upload
        failures = 0
        last_post = 0.0
        while not self._quit.is_set():
            try:
                more = upload.pump()
            except Retry as exc:
                failures += 1
                self._failures = failures
                self._attempted.set()
                self._outage(str(exc), failures)
                cap = self._settings.upload_backoff_max
                self._sleep(backoff_delay(failures, cap, advised=exc.after))
                continue
            except Refused as exc:
                self._problem = str(exc)
                self._refused = True
                # One line per rank: what is wrong, the fix, and that nothing is lost.
                _log.warn(
                    f"{self.ref.label}: {exc}; training goes on, the records stay on disk for "
                    f"rankwise sync {self.path.parent.parent} --server {self.server} "
                    "--token <ingest token>"
                )
                return
            except RunDeleted as exc:
                self._problem = str(exc)
                self._refused = True  # stop() adds no "not uploaded" warning
                _warn_deleted_once(self.ref, str(exc))
                return
            except GiveUp as exc:
                self._problem = str(exc)
                _log.warn(f"stopped uploading {self.ref}: {exc}")
                return
            self._reached.set()
            self._attempted.set()
            if failures:
                _log.logger.info(f"upload of {self.ref} to {self.server} resumed")
                failures = self._failures = 0
                self._problem = None
            if more:
                last_post = time.monotonic()
                if (
                    upload.advised > self._settings.upload_interval
                    and not self._closing.is_set()
                    and time.monotonic() >= self._unpaced_until
                ):
                    # The server is loaded and asked for fewer, larger uploads: the
                    # records wait in the stream file. Draining at the end ignores this.
                    spread = upload.advised * random.uniform(0.8, 1.2)  # out of step
                    self._sleep(last_post + spread - time.monotonic())
                continue
            if self._closing.is_set():
                self._drained.set()
                return
            self._wake.wait(max(1.0, self._settings.upload_interval))
            self._wake.clear()
            # Batch what arrives within upload_interval into one request.
            self._sleep(last_post + self._settings.upload_interval - time.monotonic())

    def _outage(self, reason: str, failures: int) -> None:
        self._problem = f"server unreachable: {reason}"
        if failures == 1:
            _log.warn(
                f"cannot upload to {self.server} ({reason}); training goes on, the records "
                f"are kept in {self.path} and uploaded when the server answers"
            )

    def _sleep(self, seconds: float) -> None:
        if seconds > 0 and not self._interrupt.wait(seconds):
            return
        if not self._quit.is_set():
            self._interrupt.clear()
