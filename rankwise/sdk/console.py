"""Console capture: what each recording process prints, as ``Console`` records.

Modes (``init(console=...)`` / ``settings.console`` / ``RANKWISE_CONSOLE``):

* ``"wrap"`` (default): ``sys.stdout`` and ``sys.stderr`` are replaced by tees. Python
  level only: a C library's ``printf``, NCCL's log, or a ``logging`` handler that kept the
  original stream from before ``init()`` are not seen.
* ``"redirect"``: file descriptors 1 and 2 are pointed at pipes (``dup2``) and one thread
  per descriptor copies the pipe to the original descriptor and hands it over, so C,
  CUDA and NCCL output are captured, and so is that of subprocesses that inherit them.
* ``"off"``.

Output reaches the terminal as before: the original stream (wrap) or descriptor
(redirect) gets every byte, first and unchanged. Handing over is a deque append; turning
text into lines (``LineAssembler``: "\\n" ends a line, "\\r" starts it over so a progress
bar keeps its last state, ANSI escapes are kept) and batching lines into ``Console``
records — one per stream per second at most, each line with its time — happen on the
capture's own thread. Memory is bounded: with more than ``MAX_PENDING`` bytes waiting,
output is left out of the capture (never out of the terminal) and a line says how much.

``stop()`` (at finish, before the finish record) restores ``sys.stdout``/``sys.stderr``
and descriptors 1 and 2, then records what is left. A forked child restores them at
once (``os.register_at_fork``) and records nothing: the parent's stream is not its own.
If a pipe's reader fails, its descriptor is restored, so a print can never block on a
pipe that nobody reads.
"""

from __future__ import annotations

import codecs
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .. import _log
from ..stream import records as R
from . import hooks

if TYPE_CHECKING:
    from ..settings import Settings
    from .handle import RunHandle

STREAMS = ("stdout", "stderr")
MAX_LINE = 8192  # characters; a longer line is cut into several
MAX_RECORD_LINES = 1000
MAX_PENDING = 8 * 1024 * 1024  # bytes handed over but not yet turned into lines
FLUSH_INTERVAL = 1.0

Put = Callable[[str, list[str], list[float]], None]
_active: ConsoleCapture | None = None  # one capture per process
_fork_hook = False


class LineAssembler:
    """Text in, lines out. The pending partial line is kept collapsed and bounded."""

    def __init__(self, max_line: int = MAX_LINE) -> None:
        self._pending = ""
        self._max = max_line

    def feed(self, text: str, t: float, out: list[tuple[float, str]]) -> None:
        if "\n" in text:
            parts = text.split("\n")
            parts[0] = self._pending + parts[0]
            for line in parts[:-1]:
                self._emit(_collapse(line), t, out)
            self._pending = _collapse_partial(parts[-1])
        else:
            self._pending = _collapse_partial(self._pending + text)
        while len(self._pending) > self._max:
            out.append((t, self._pending[: self._max]))
            self._pending = self._pending[self._max :]

    def flush(self, t: float, out: list[tuple[float, str]]) -> None:
        """The pending partial line as a line (at the end of the capture)."""
        if self._pending:
            line = _collapse(self._pending)
            self._pending = ""
            if line:
                self._emit(line, t, out)

    def _emit(self, line: str, t: float, out: list[tuple[float, str]]) -> None:
        while len(line) > self._max:
            out.append((t, line[: self._max]))
            line = line[self._max :]
        out.append((t, line))


def _collapse(line: str) -> str:
    """What a terminal shows last of a line redrawn with "\\r" (a "\\r\\n" ending too)."""
    if "\r" not in line:
        return line
    for segment in reversed(line.split("\r")):
        if segment:
            return segment
    return ""


def _collapse_partial(pending: str) -> str:
    # Drop everything up to the last "\r" that has text after it; a trailing "\r" may
    # still be the first half of "\r\n", so the text before it is kept until we know.
    i = pending.rfind("\r", 0, len(pending) - 1)
    return pending[i + 1 :] if i >= 0 else pending


class _Sink:
    """Where tees and pipe readers hand output over: a deque bounded by bytes.

    ``put_bytes`` grows on the producers' side, ``taken_bytes`` on the consumer's: two
    counters, each with its own writers, so a lost update can only loosen the bound
    (two producers racing), never make it drift shut.
    """

    def __init__(self) -> None:
        self.chunks: deque[tuple[str, float, str | bytes]] = deque()
        self.put_bytes = 0
        self.taken_bytes = 0
        self.dropped = dict.fromkeys(STREAMS, 0)

    def put(self, stream: str, data: str | bytes) -> None:
        n = len(data)
        if self.put_bytes - self.taken_bytes + n > MAX_PENDING:
            self.dropped[stream] += n
            return
        self.put_bytes += n
        self.chunks.append((stream, time.time(), data))


class _Tee:
    """Stands in for ``sys.stdout``/``sys.stderr``: the original first, then the sink."""

    def __init__(self, target: Any, name: str, sink: _Sink) -> None:
        self._target = target
        self._name = name
        self._sink = sink
        self._on = True

    def write(self, s: str) -> int:
        n = self._target.write(s)
        if self._on and s:
            self._sink.put(self._name, s)
        return n  # type: ignore[no-any-return]

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:  # encoding, fileno, isatty, buffer, flush ...
        return getattr(self._target, name)


class _FdPump:
    """Descriptor ``fd`` pointed at a pipe whose reader copies it to the original."""

    def __init__(self, fd: int, name: str, sink: _Sink) -> None:
        self.fd, self.name, self._sink = fd, name, sink
        self.capturing = True
        self._forward = True
        self._restored = False
        self._lock = threading.Lock()
        self.saved = os.dup(fd)  # the terminal (or whatever fd pointed at before)
        read_end, write_end = os.pipe()
        self._read = read_end
        os.dup2(write_end, fd)
        os.close(write_end)
        self.thread = threading.Thread(target=self._pump, name=f"rankwise-{name}", daemon=True)
        self.thread.start()

    def _pump(self) -> None:
        try:
            while True:
                data = os.read(self._read, 65536)
                if not data:
                    break  # every write end is closed: restored, and no child holds one
                if self._forward:
                    try:
                        _write_all(self.saved, data)
                    except OSError:
                        self._forward = False  # the terminal went away; keep capturing
                if self.capturing:
                    self._sink.put(self.name, data)
        except Exception:
            pass
        finally:
            self.restore()
            with self._lock:
                _close(self._read)
                _close(self.saved)

    def restore(self) -> None:
        with self._lock:
            if not self._restored:
                self._restored = True
                try:
                    os.dup2(self.saved, self.fd)
                except OSError:
                    pass

    def forked(self) -> None:
        """In a forked child: no reader thread here, so point ``fd`` back at once."""
        self._restored = True
        try:
            os.dup2(self.saved, self.fd)
        except OSError:
            pass
        _close(self._read)
        _close(self.saved)


class ConsoleCapture:
    """One process's capture; ``put(stream, lines, times)`` hands a batch to the writer."""

    def __init__(self, mode: str, put: Put, interval: float = FLUSH_INTERVAL) -> None:
        self.mode = mode
        self._put = put
        self._interval = interval
        self._sink = _Sink()
        self._lines = {s: LineAssembler() for s in STREAMS}
        self._decoders = {s: codecs.getincrementaldecoder("utf-8")("replace") for s in STREAMS}
        self._reported = dict.fromkeys(STREAMS, 0)
        self._tees: list[_Tee] = []
        self._pumps: list[_FdPump] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="rankwise-console", daemon=True)
        self.lines = 0

    def start(self) -> None:
        global _active, _fork_hook
        if self.mode == "wrap":
            for name in STREAMS:
                target = getattr(sys, name)
                if target is not None:
                    tee = _Tee(target, name, self._sink)
                    setattr(sys, name, tee)
                    self._tees.append(tee)
        elif self.mode == "redirect":
            _flush_all()
            for fd, name in ((1, "stdout"), (2, "stderr")):
                try:
                    self._pumps.append(_FdPump(fd, name, self._sink))
                except OSError as exc:
                    _log.warn(f"console capture of {name} is off: {exc}")
        _active = self
        if not _fork_hook and hasattr(os, "register_at_fork"):
            _fork_hook = True
            os.register_at_fork(after_in_child=_after_fork_in_child)
        self._thread.start()

    def stop(self, deadline: float) -> None:
        """Restore the streams and descriptors, then record what is left."""
        global _active
        if _active is self:
            _active = None
        self._restore()
        if self._pumps:
            _flush_all()
            for pump in self._pumps:
                pump.restore()
            for pump in self._pumps:  # EOF at once, unless a child still holds the pipe
                pump.thread.join(max(0.0, min(deadline - time.monotonic(), 1.0)))
                pump.capturing = False
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(max(0.0, deadline - time.monotonic()))

    def _restore(self) -> None:
        for tee in self._tees:
            tee._on = False
            if getattr(sys, tee._name) is tee:
                setattr(sys, tee._name, tee._target)

    def _forked(self) -> None:
        self._restore()
        for pump in self._pumps:
            pump.forked()

    def _loop(self) -> None:
        failed = False
        while True:
            final = self._stop.wait(self._interval)
            try:
                self._drain(final)
            except Exception as exc:
                if not failed:
                    failed = True
                    _log.warn(f"console capture could not record output: {exc!r}")
            if final:
                return

    def _drain(self, final: bool) -> None:
        out: dict[str, list[tuple[float, str]]] = {s: [] for s in STREAMS}
        chunks, sink = self._sink.chunks, self._sink
        while chunks:
            stream, t, data = chunks.popleft()
            sink.taken_bytes += len(data)
            text = self._decoders[stream].decode(data) if isinstance(data, bytes) else data
            self._lines[stream].feed(text, t, out[stream])
        now = time.time()
        for stream, lines in out.items():
            dropped = sink.dropped[stream] - self._reported[stream]
            if dropped:
                self._reported[stream] += dropped
                lines.append(
                    (
                        now,
                        f"[rankwise: {dropped} bytes of {stream} not captured: "
                        "output came faster than it could be recorded]",
                    )
                )
            if final:
                self._lines[stream].feed(self._decoders[stream].decode(b"", final=True), now, lines)
                self._lines[stream].flush(now, lines)
            for i in range(0, len(lines), MAX_RECORD_LINES):
                part = lines[i : i + MAX_RECORD_LINES]
                self._put(stream, [line for _, line in part], [t for t, _ in part])
                self.lines += len(part)


def _after_fork_in_child() -> None:
    global _active
    capture, _active = _active, None
    if capture is not None:
        try:
            capture._forked()
        except Exception:
            pass


def _flush_all() -> None:
    """Python's and C's buffered output, so it goes where the descriptor points now."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except Exception:
            pass  # e.g. a reentrant flush from a signal handler
    try:
        import ctypes

        ctypes.CDLL(None).fflush(None)
    except Exception:
        pass


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _close(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


def note(stream: str, text: str) -> None:
    """Record ``text`` as output of ``stream`` without printing it (the uncaught
    exception's traceback, which is printed only after the run has ended)."""
    capture = _active
    if capture is not None:
        capture._sink.put(stream, text)


# An uncaught exception's traceback goes among the stderr lines before the runs end; it
# reaches the terminal only after that (see hooks.py), too late for the capture.
hooks.on_uncaught(lambda text: note("stderr", text))


def attach(run: RunHandle, settings: Settings) -> ConsoleCapture | None:
    """Start capturing for a recording run, unless ``console="off"`` or one already runs."""
    if settings.console == "off" or _active is not None:
        return None

    def put(stream: str, lines: list[str], times: list[float]) -> None:
        if run.behind():
            return  # the writer is behind by more than its bound: log() values come first
        run.put_control(lambda seq, t: R.Console(seq, t, stream, lines, times))

    capture = ConsoleCapture(settings.console, put)
    try:
        capture.start()
    except Exception as exc:
        _log.warn(f"console capture is off: {exc!r}")
        capture.stop(time.monotonic() + 1.0)
        return None
    run.add_component(capture)
    return capture
