"""Remote mode, shared by a node: one process posts every local rank's stream together.

At a thousand ranks, one upload a second per rank is a thousand requests a second, and
their fixed price (HTTP, the route, a worker-thread hop, the group commit's wake-up) is
most of what a server process spends. With ``node_upload`` on, the processes of one node
that write one run to one server share a single uploader: it reads every member's stream
file and posts what is new in all of them as one ``POST /api/v1/ingest/batch``, each part
answered as ``/ingest`` answers it alone. Eight ranks a node: an eighth of the requests.

How the processes agree, with nothing but the node's own filesystem:

* The share is a private directory of this user (``<tmp>/rankwise-<uid>/upload-<h>``, h
  from the server, the token and the run's stream folder). Each process registers its
  stream there (``<m>.member``: the file's path and the process id).
* Whoever holds ``lock`` (``flock``, exclusive) is the node's uploader. Every process's
  uploader thread tries it, without blocking, about once a second; the kernel releases it
  when its holder exits or dies (SIGKILL, OOM), so another takes over within a second.
  A process that ends hands over once its own stream is drained.
* The uploader writes each member's state beside it (``<m>.ack``: the server's mark, the
  file offset up to which everything is acknowledged, the outage count, and why it
  stopped if it did). An owner reads its own: ``finish()`` waits for its offset to reach
  the end of its file, as the per-process uploader waits for its drain, and it prints its
  own warnings (refused, deleted, not uploaded in time). ``<m>.closing`` asks the
  uploader to send that stream now, past the server's pacing; ``<m>.urgent`` too, for
  ``URGENT_FOR`` seconds (a stall record).
* Nothing changes for exactly-once: the stream files stay the truth, a member's offset
  advances only past acknowledged frames, a new uploader resumes from the state its
  predecessor wrote (or asks the server's mark), and the server applies each record once.
  A member whose process died is uploaded to its end, then forgotten.
* A server without the batch route (404 or 405) gets one ``/ingest`` per stream from the
  node's uploader instead: still one uploader for the node.
* A member whose run is ending sends its own stream itself once the node's uploader has
  moved none of it and saved nothing for ``ALONE_AFTER`` seconds: a holder of the lock
  that is stopped or stuck never holds another rank's exit.

If the share cannot be set up (no private directory), the process uploads alone.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import random
import stat
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import _log
from ..settings import Settings
from ..stream.files import read_stream_start
from ..stream.fold import process_alive
from ..stream.frames import MAGIC
from ..stream.identity import StreamId
from ..stream.wire import BATCH_CONTENT_TYPE, UPLOAD_INTERVAL_HEADER
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
from .uploader import (
    BATCH_BYTES,
    INGEST,
    NEVER_REACHED_GRACE,
    URGENT_FOR,
    StreamUpload,
    _MissingBlobs,
    _Rewind,
    _TooLarge,
    _warn_deleted_once,
    stream_ref,
    stream_refusal,
    warn_left,
)

if TYPE_CHECKING:
    import httpx

BATCH = "/api/v1/ingest/batch"
FOLLOW_EVERY = 1.0  # a member's look at its state (and at the lock) while training
CLOSING_EVERY = 0.1  # the same once its run is ending
# A member whose run is ending sends its stream itself once the node's uploader has moved
# none of it, and saved nothing, for this long: that process may be stopped (SIGSTOP, a
# debugger) or stuck holding the interpreter, and a rank's exit must not wait on it.
ALONE_AFTER = 10.0


def share_dir(server: str, token: str | None, streams: Path) -> Path:
    """The node's share for one run's streams on one server (created, private)."""
    base = Path(tempfile.gettempdir()) / f"rankwise-{os.getuid()}"
    base.mkdir(mode=0o700, exist_ok=True)
    st = os.lstat(base)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise OSError(f"{base} is not a private directory of this user")
    what = "\0".join((server, token or "", os.path.realpath(streams)))
    share = base / f"upload-{hashlib.sha256(what.encode()).hexdigest()[:24]}"
    share.mkdir(mode=0o700, exist_ok=True)
    return share


def member_name(path: Path) -> str:
    return hashlib.sha256(os.path.realpath(path).encode()).hexdigest()[:24]


def _write_json(path: Path, value: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
    tmp.write_text(json.dumps(value))
    os.replace(tmp, path)


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        got = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return got if isinstance(got, dict) else None


class _Member:
    """A stream the node's uploader sends: its upload state, and why it stopped."""

    def __init__(self, share: Path, name: str, upload: StreamUpload) -> None:
        self.share, self.name, self.upload = share, name, upload
        start = read_stream_start(upload.path)  # whose it is: host, pid and its start time
        self.writer = (start.host, start.pid, start.pid_start_time) if start else None
        self.limit = BATCH_BYTES  # raw bytes a request may carry of it (halved on a 413)
        self.dirty = False  # its state changed since it was last saved
        self.stopped: str | None = None  # "refused", "deleted", "gave up"
        self.problem: str | None = None

    def stop(self, why: str, problem: str) -> None:
        self.stopped, self.problem = why, problem
        self.dirty = True

    def give_up(self, exc: Exception) -> None:
        """Stop sending this stream for a permanent refusal of it (``GiveUp`` and its
        kinds, or its file unreadable)."""
        self.stop(_why(exc), str(exc))

    def flag(self, what: str) -> Path:
        return self.share / f"{self.name}.{what}"

    def save(self, reached: bool, failures: int, outage: str | None = None) -> None:
        self.dirty = False
        up = self.upload
        _write_json(
            self.flag("ack"),
            {
                "acked": up.acked,
                "offset": up.offset,
                "reached": reached,
                "failures": failures,
                "stopped": self.stopped,
                "problem": self.problem or (f"server unreachable: {outage}" if outage else None),
            },
        )

    def forget(self) -> None:
        _forget(self.share, self.name)


def _why(exc: Exception) -> str:
    """A stream's permanent refusal as its state says it: refused, deleted, gave up."""
    if isinstance(exc, Refused):
        return "refused"
    return "deleted" if isinstance(exc, RunDeleted) else "gave up"


def _forget(share: Path, name: str) -> None:
    """A member's files gone from the share."""
    for what in ("member", "ack", "closing", "urgent"):
        with contextlib.suppress(OSError):
            (share / f"{name}.{what}").unlink()


class NodeUploader:
    """The upload of one process's stream through its node's share: a run component with
    ``rankwise.sdk.uploader.Uploader``'s interface (``start``, ``wake``, ``urgent``,
    ``refused``, ``drained``, ``pending_bytes``, ``stop(deadline)``)."""

    def __init__(
        self,
        server: str,
        path: Path,
        ref: StreamId,
        settings: Settings,
        share: Path,
        *,
        transport: httpx.BaseTransport | None = None,
        on_drained: Callable[[float], object] | None = None,
    ) -> None:
        self.server, self.path, self.ref, self.share = server, path, ref, share
        self._settings = settings
        self._transport = transport
        self._on_drained = on_drained
        self.name = member_name(path)
        self._wake = threading.Event()
        self._closing = threading.Event()
        self._quit = threading.Event()
        self._drained = threading.Event()
        self._done = threading.Event()
        self._attempted = threading.Event()
        self._state: dict[str, Any] = {}  # this stream's last state (the .ack file's)
        self._warned = False
        self._refused = False
        self.leading = False  # this process is the node's uploader now
        self._members: dict[str, _Member] = {}
        self._unpaced_until = 0.0
        self._batch_route = True
        self._advised = 0.0  # the upload interval the server last asked for
        self._moved_at = time.monotonic()  # when this stream's saved offset last moved
        self._closing_at = 0.0  # when stop() began
        _write_json(self._flag("member"), {"path": str(path), "pid": os.getpid()})
        self._lock_fd = os.open(share / "lock", os.O_RDWR | os.O_CREAT, 0o600)
        self._thread = threading.Thread(target=self._run, name="rankwise-node-upload", daemon=True)

    def _flag(self, what: str) -> Path:
        return self.share / f"{self.name}.{what}"

    # -- the component's interface -------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def wake(self) -> None:
        self._wake.set()

    def urgent(self) -> None:
        with contextlib.suppress(OSError):
            self._flag("urgent").touch()
        self._unpaced_until = time.monotonic() + URGENT_FOR
        self._wake.set()

    def refused(self, timeout: float) -> bool:
        self._attempted.wait(timeout)
        return self._refused

    @property
    def drained(self) -> bool:
        return self._drained.is_set()

    def pending_bytes(self) -> int:
        try:
            size = self.path.stat().st_size
        except OSError:
            return 0
        offset = self._state.get("offset")
        return max(0, size - (offset if isinstance(offset, int) else len(MAGIC)))

    def stop(self, deadline: float) -> None:
        self._closing_at = time.monotonic()
        self._closing.set()
        with contextlib.suppress(OSError):
            self._flag("closing").touch()
        self._wake.set()
        limit = min(deadline, time.monotonic() + self._settings.upload_timeout)
        if not self._state.get("reached"):
            self._attempted.wait(max(0.0, limit - time.monotonic()))
        if not self._state.get("reached") and self._state.get("failures"):
            limit = min(limit, time.monotonic() + NEVER_REACHED_GRACE)
        self._done.wait(max(0.0, limit - time.monotonic()))
        self._quit.set()
        self._wake.set()
        self._thread.join(1.0)
        if self._drained.is_set():
            if self._on_drained is not None:
                self._on_drained(limit)
            return
        if self._refused or self._warned:
            return
        never = not self._state.get("reached") and bool(self._state.get("failures"))
        left, timeout = self.pending_bytes(), self._settings.upload_timeout
        problem = self._state.get("problem")
        warn_left(self.path, self.server, self.ref, left, timeout, problem, never)

    # -- the thread ------------------------------------------------------------------

    def _run(self) -> None:
        client = None
        try:
            from .. import _http

            client = _http.make_client(
                self.server, transport=self._transport, token=self._settings.token
            )
            while not self._quit.is_set():
                if not self.leading and self._try_lock():
                    self.leading = True
                if self.leading:
                    if self._lead(client):
                        break
                elif self._follow(client):
                    break
        except Exception as exc:  # never let the thread die silently
            self._state["problem"] = f"node upload stopped: {exc!r}"
            _log.warn(f"{self._state['problem']}; the stream file is kept for rankwise sync")
        finally:
            if self._drained.is_set() or self._state.get("stopped"):
                _forget(self.share, self.name)
            if self.leading:
                self._drop_departed()
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)
            if client is not None:
                client.close()
            self._attempted.set()
            self._done.set()

    def _try_lock(self) -> bool:
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False
        return True

    def _follow(self, client: httpx.Client) -> bool:
        """One look at this stream's state as the node's uploader wrote it; True when
        there is nothing more to wait for."""
        state = _read_json(self._flag("ack"))
        now = time.monotonic()
        if state is not None and state.get("offset") != self._state.get("offset"):
            self._moved_at = now
        if self._closing.is_set() and self._stalled(now):
            return self._drain_alone(client)
        if state is not None:
            self._state = state
            if state.get("reached") or state.get("failures") or state.get("stopped"):
                self._attempted.set()
            if state.get("stopped"):
                self._warn_stopped(str(state["stopped"]), str(state.get("problem")))
                return True
            if self._closing.is_set() and self._at_end(state.get("offset")):
                self._drained.set()
                return True
        # Often until the first outcome is known (init waits on it for its link) and
        # while the run ends; about once a second while it trains.
        soon = self._closing.is_set() or not self._attempted.is_set()
        self._wake.wait(CLOSING_EVERY if soon else FOLLOW_EVERY)
        self._wake.clear()
        return False

    def _stalled(self, now: float) -> bool:
        """The node's uploader has moved none of this ending stream and saved nothing
        for ``ALONE_AFTER`` seconds (an outage it reports is not a stall)."""
        since = max(self._moved_at, self._closing_at)
        if now - since < ALONE_AFTER:
            return False
        try:
            saved = time.time() - self._flag("ack").stat().st_mtime
        except OSError:
            saved = ALONE_AFTER
        return saved >= ALONE_AFTER

    def _drain_alone(self, client: httpx.Client) -> bool:
        """Send this stream to its end without the node's uploader, as a process without
        node upload does (the store takes each record once, whoever sends it)."""
        _log.logger.info(f"{self.ref}: the node's uploader is not moving; uploading it alone")
        upload = StreamUpload(client, self.path, self.ref, max_batch=BATCH_BYTES)
        failures = 0
        while not self._quit.is_set():
            try:
                more = upload.pump()
            except Retry as exc:
                failures += 1
                outage = f"server unreachable: {exc}"
                self._state = {**self._state, "failures": failures, "problem": outage}
                self._attempted.set()
                cap = self._settings.upload_backoff_max
                self._wake.wait(backoff_delay(failures, cap, advised=exc.after))
                continue
            except GiveUp as exc:
                why = _why(exc)
                self._state = {"stopped": why, "problem": str(exc)}
                self._warn_stopped(why, str(exc))
                return True
            self._state = {"offset": upload.offset, "reached": True}
            self._attempted.set()
            if not more:
                self._drained.set()
                return True
        return True

    def _at_end(self, offset: object) -> bool:
        try:
            return isinstance(offset, int) and offset >= self.path.stat().st_size
        except OSError:
            return False

    def _warn_stopped(self, why: str, problem: str) -> None:
        if self._warned:
            return
        self._warned = True
        if why == "refused":
            self._refused = True
            _log.warn(
                f"{self.ref.label}: {problem}; training goes on, the records stay on disk for "
                f"rankwise sync {self.path.parent.parent} --server {self.server} "
                "--token <ingest token>"
            )
        elif why == "deleted":
            self._refused = True
            _warn_deleted_once(self.ref, problem)
        else:
            _log.warn(f"stopped uploading {self.ref}: {problem}")

    # -- leading ---------------------------------------------------------------------

    def _lead(self, client: httpx.Client) -> bool:
        """Send one batch of every member's new frames (with retries and pacing); True
        once this process's own stream is drained or stopped and its run is ending."""
        failures = 0
        advised = 0.0
        saved_for = -1  # members whose state was saved since the last change
        while not self._quit.is_set():
            self._join_members(client)
            me = self._members.get(self.name)
            try:
                sent = self._send(client)
            except Retry as exc:
                failures += 1
                outage = f"server unreachable: {exc}"
                self._state = {**self._state, "failures": failures, "problem": outage}
                self._save_all(self._state.get("reached") is True, failures, str(exc))
                self._attempted.set()
                cap = self._settings.upload_backoff_max
                self._wait(backoff_delay(failures, cap, advised=exc.after))
                continue
            except Refused as exc:
                for m in self._members.values():
                    if m.stopped is None:
                        m.stop("refused", str(exc))
                self._save_all(True, failures)
                self._attempted.set()
                continue
            # Each member's state, when something changed (a post, the end of an outage,
            # a member joined): a round with nothing new writes nothing.
            changed = any(m.dirty for m in self._members.values())
            if sent or failures or changed or len(self._members) != saved_for:
                self._save_all(True, 0)
                saved_for = len(self._members)
            if failures:
                _log.logger.info(f"upload of {self.ref} to {self.server} resumed")
                failures = 0
            self._attempted.set()
            if me is not None and me.stopped is not None:
                self._state = {"stopped": me.stopped, "problem": me.problem}
                self._warn_stopped(me.stopped, str(me.problem))
                return True
            if me is not None:
                self._state = {"offset": me.upload.offset, "reached": True}
                if self._closing.is_set() and self._at_end(me.upload.offset) and not sent:
                    self._drained.set()
                    return True
            advised = sent if sent else advised
            if sent and not self._unpaced():
                spread = max(self._settings.upload_interval, advised) * random.uniform(0.8, 1.2)
                self._wait(spread)
            elif not sent:
                self._forget_dead()
                if self._closing.is_set():
                    self._wait(CLOSING_EVERY)
                else:
                    self._wait(self._settings.upload_interval)
        return True

    def _unpaced(self) -> bool:
        """Whether a member's run is ending or asked for its records now: no pacing."""
        if self._closing.is_set() or time.monotonic() < self._unpaced_until:
            return True
        for m in self._members.values():
            if m.flag("closing").exists():
                return True
            urgent = m.flag("urgent")
            try:
                if time.time() - urgent.stat().st_mtime < URGENT_FOR:
                    return True
            except OSError:
                continue
        return False

    def _wait(self, seconds: float) -> None:
        if seconds > 0:
            self._wake.wait(seconds)
        self._wake.clear()

    def _drop_departed(self) -> None:
        """Members whose owner removed its registration (drained, or stopped): their state
        files go too (a save of this process's may have written one again after the
        owner removed it)."""
        for name, m in list(self._members.items()):
            if name != self.name and not m.flag("member").exists():
                m.forget()
                del self._members[name]

    def _join_members(self, client: httpx.Client) -> None:
        """Every registered stream of the share, with the state its last uploader saved."""
        self._drop_departed()
        for entry in self.share.glob("*.member"):
            name = entry.name.removesuffix(".member")
            if name in self._members:
                continue
            found = _read_json(entry)
            if found is None or not isinstance(found.get("path"), str):
                continue
            path = Path(found["path"])
            try:
                upload = StreamUpload(client, path, stream_ref(path), max_batch=BATCH_BYTES)
            except (GiveUp, OSError):
                continue  # not readable from here (yet): looked at again next round
            m = _Member(self.share, name, upload)
            saved = _read_json(m.flag("ack"))
            if saved is not None and saved.get("stopped"):
                m.stop(str(saved["stopped"]), str(saved.get("problem")))
            elif saved is not None and isinstance(saved.get("offset"), int):
                upload.acked, upload.offset = int(saved.get("acked", -1)), saved["offset"]
            self._members[name] = m

    def _forget_dead(self) -> None:
        """Members whose process is gone and whose stream is all sent (or stopped)."""
        for name, m in list(self._members.items()):
            if name == self.name or m.writer is None or process_alive(*m.writer) is not False:
                continue
            if m.stopped is not None or self._sent_all(m):
                m.forget()
                del self._members[name]

    @staticmethod
    def _sent_all(m: _Member) -> bool:
        try:
            return m.upload.offset is not None and m.upload.offset >= m.upload.path.stat().st_size
        except OSError:
            return True

    def _save_all(self, reached: bool, failures: int, outage: str | None = None) -> None:
        for m in self._members.values():
            with contextlib.suppress(OSError):
                m.save(reached, failures, outage)

    def _send(self, client: httpx.Client) -> float:
        """One request of what is new in every member; 0 when nothing was new, else the
        interval the server advised (at least a tiny positive number)."""
        live = [m for m in self._members.values() if m.stopped is None]
        parts: list[tuple[_Member, bytes]] = []
        share = max(64 * 1024, BATCH_BYTES // max(1, len(live)))
        for m in live:
            m.upload.max_batch = min(m.limit, share)
            try:
                frames = m.upload.take()
            except (GiveUp, OSError) as exc:
                m.give_up(exc)
                continue
            if frames is not None:
                parts.append((m, frames))
        if not parts:
            return 0.0
        if not self._batch_route:
            return self._send_one_by_one(parts)
        reply = self._post(client, parts)
        if reply is None:  # the server has no batch route: one request per stream
            self._batch_route = False
            return self._send_one_by_one(parts)
        for (m, frames), answer in zip(parts, reply, strict=True):
            self._answered(m, frames, answer)
        return max(1e-3, self._advised)

    def _post(self, client: httpx.Client, parts: list[tuple[_Member, bytes]]) -> list[Any] | None:
        import httpx
        import msgspec

        from .. import _http

        encoding = parts[0][0].upload.encoding
        batch = {
            "parts": [
                {
                    "project": m.upload.ref.project,
                    "run": m.upload.ref.run_id,
                    "label": m.upload.ref.label,
                    "incarnation": m.upload.ref.incarnation,
                    "key": m.upload.secret,
                    "body": MAGIC + frames,
                }
                for m, frames in parts
            ]
        }
        headers = {"Accept": "application/json", "Content-Type": BATCH_CONTENT_TYPE}
        if encoding != "identity":
            headers["Content-Encoding"] = encoding
        content = _http.compress(msgspec.msgpack.encode(batch), encoding)
        try:
            response = client.post(BATCH, content=content, headers=headers)
        except httpx.TransportError as exc:
            raise unreachable(exc) from exc
        status = response.status_code
        self._advised = (
            _http.advised_interval(response.headers.get(UPLOAD_INTERVAL_HEADER))
            if status == 200
            else 0.0
        )
        if status == 200:
            return list(_http.decode(response)["parts"])
        if status in (404, 405):
            return None
        message = _http.error_message(response)
        if status == 415 and encoding != "identity":
            fallback = "gzip" if encoding == "zstd" else "identity"
            for m, _ in parts:
                m.upload.encoding = fallback
            raise Retry(f"server cannot read this encoding: {message}")
        transient(response, message)
        if status in (401, 403):
            raise Refused(refusal(str(client.base_url), self.ref.project, status, message))
        if status == 413:  # the whole request: smaller shares next time
            for m, frames in parts:
                m.limit = max(1, len(frames) // 2)
            raise Retry(f"the batch was over the server's body limit: {message}")
        raise GiveUp(f"server at {client.base_url} answered {status}: {message}")

    def _answered(self, m: _Member, frames: bytes, answer: dict[str, Any]) -> None:
        if "acked_seq" in answer:
            m.upload.took(frames, int(answer["acked_seq"]))
            return
        error = answer.get("error") or {}
        status, message = int(error.get("status", 0)), str(error.get("message", ""))
        try:
            if status in (409, 410, 413):
                m.upload.refused(frames, stream_refusal(status, error, message))
                m.limit = min(m.limit, m.upload.max_batch)
            elif status == 403 and not error.get("stream_key"):
                m.stop("refused", refusal(self.server, m.upload.ref.project, status, message))
            else:
                m.stop("gave up", f"the server at {self.server} refused {m.upload.ref}: {message}")
        except GiveUp as exc:
            m.give_up(exc)

    def _send_one_by_one(self, parts: list[tuple[_Member, bytes]]) -> float:
        advised = 0.0
        for m, frames in parts:
            try:
                reply = m.upload._request("POST", INGEST, MAGIC + frames)
            except (_MissingBlobs, _Rewind, _TooLarge) as refused:
                try:
                    m.upload.refused(frames, refused)
                    m.limit = min(m.limit, m.upload.max_batch)
                except GiveUp as exc:
                    m.give_up(exc)
                continue
            except Refused:  # the token's refusal is every stream's: the caller stops all
                raise
            except GiveUp as exc:
                m.give_up(exc)
                continue
            m.upload.took(frames, int(reply["acked_seq"]))
            advised = max(advised, m.upload.advised)
        return max(1e-3, advised)
