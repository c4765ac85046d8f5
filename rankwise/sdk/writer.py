"""The writer thread: turns what ``log()`` queued into frames appended to the stream file.

The training thread only appends to ``StreamWriter.queue`` (a ``collections.deque``,
whose ``append`` and ``popleft`` are atomic); everything else — coercing values,
numbering records, encoding, I/O, heartbeats — happens here. A ``log()`` call is queued
as ``(time, step, weight, values)`` with ``values`` its private dict copy; one value of
``Run._log_one()`` (the TensorBoard capture's ``add_scalar``) as ``(time, step, weight,
key, value)``, its dict made here. Invariants:

* Backpressure, in bytes: each queued ``log()`` call is charged ``call_units(values)``
  units of ``UNIT`` bytes (an estimate of what it holds in memory). ``log()`` counts what
  it queued, this thread counts in ``taken_units`` what it took off the queue, so their
  difference is what waits; each counter has one writer, so no increment is lost to a
  race. ``log()`` waits on ``progress`` (set after every frame) while the difference is
  over the bound.
* ``seq`` numbers the records of the file 0, 1, 2, ... in the order they are appended.
* A frame is appended whole or, if the write fails part-way, the file is truncated back
  to the last whole frame and the frame is retried later, so a failing disk never leaves
  a torn frame in the middle of a file. Frames that cannot be written are kept (bounded)
  and retried; past the bound they are dropped and counted.
* The thread is a daemon and ``close()`` waits for it at most ``timeout`` seconds, so a
  hung filesystem cannot hang interpreter exit.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from .. import _log
from ..budget import MAX_KEYS_PER_RECORD
from ..stream import records as R
from ..stream.frames import encode_frame
from .values import coerce

# Records and estimated bytes per frame: keep frames (and the writer's working memory)
# bounded, also when each call logs thousands of values.
_FRAME_RECORDS = 4096
_FRAME_UNITS = 4 * 1024 * 1024 // 64
# The estimate of a queued log() call's memory, in units of UNIT bytes: the tuple, its
# time and step and the dict copy's header (CALL_UNITS), and per value a dict entry plus
# the value object it keeps alive (one unit). Only top-level keys are counted (a nested
# mapping counts as one value): a len() is all log() can afford.
UNIT = 64
CALL_UNITS = 3  # Run.log() spells it out, to spare a global lookup per call


def call_units(values: dict[str, Any]) -> int:
    return CALL_UNITS + len(values)


# Encoded bytes kept for retry while the file cannot be written.
_MAX_BACKLOG = 64 * 1024 * 1024


class Control:
    """A non-metrics item on the queue: builds its record once ``seq`` is known."""

    __slots__ = ("build", "time")

    def __init__(self, build: Callable[[int, float], R.Record]) -> None:
        self.time = time.time()
        self.build = build


class StreamWriter:
    def __init__(
        self,
        fd: int,
        start: R.StreamStart,
        flush_interval: float,
        heartbeat_interval: float,
        fsync: bool = False,
    ) -> None:
        self.fd = fd
        self.queue: deque[Any] = deque()
        self.last_values: dict[str, Any] = {}  # for run.summary
        self.last_step = -1
        self.metrics_records = 0  # made so far; the hang watchdog watches it move
        self.dropped = 0  # incremented by the training thread only
        self.taken_units = 0  # call_units() of every call taken off the queue
        self.progress = threading.Event()  # set after each frame: log() waits on it
        # Values in frames given up because the file could not be written: the writer
        # thread's own counter (a shared one would lose increments to the race).
        self.lost = 0
        self.written_seq = -1  # last seq handed to the OS
        self._seq = 0
        self._flush_interval = flush_interval
        self._heartbeat_interval = heartbeat_interval
        self._fsync = fsync
        # Rich values coerce() found in a call (log() hands them to the media encoder
        # itself; these raced past it) go to on_rich(time, step, [(key, value)]).
        self.on_rich: Callable[[float, int, list[tuple[str, Any]]], None] | None = None
        self._rich: list[tuple[str, Any]] = []
        # Called on the writer thread after each append (the uploader listens).
        self.flush_listeners: list[Callable[[], None]] = []
        # (frame, last seq in it, metric values in it)
        self._backlog: deque[tuple[bytes, int, int]] = deque()
        self._backlog_bytes = 0
        self._size = os.lseek(fd, 0, os.SEEK_END)
        self.warn_once = _log.Once()  # warn_once(key, message)
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._done = threading.Event()
        self._last_heartbeat = time.time()
        self._finish: R.Finish | None = None
        self._thread = threading.Thread(target=self._run, name="rankwise-writer", daemon=True)
        # The first record is written synchronously: the stream exists once init() returns.
        self._append([start])
        self._seq = 1

    # -- training-thread side -------------------------------------------------------
    def start(self) -> None:
        self._thread.start()

    def put_control(self, build: Callable[[int, float], R.Record]) -> None:
        self.queue.append(Control(build))

    def sync(self, timeout: float = 5.0) -> bool:
        """Wait until everything queued before this call has been written."""
        if not self._thread.is_alive():
            return False
        event = threading.Event()
        self.queue.append(event)
        self._wake.set()
        return event.wait(timeout)

    def close(self, finish: R.Finish, timeout: float) -> bool:
        """Write ``finish`` after everything queued; True when all of it reached the file."""
        self._finish = finish
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
        elif not self._done.is_set():
            self._run()  # never started (e.g. closed right after init)
        return self._done.is_set() and not self._backlog

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    # -- writer thread ------------------------------------------------------------------
    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self._wake.wait(self._flush_interval)
                self._wake.clear()
                self._drain()
                now = time.time()
                if now - self._last_heartbeat >= self._heartbeat_interval:
                    self._last_heartbeat = now
                    beat = R.Heartbeat(
                        self._take_seq(), now, self.last_step, self.dropped + self.lost
                    )
                    self._emit([beat], fsync=True)
            self._drain()
            if self._finish is not None:
                f = self._finish
                f.last_step, f.dropped = self.last_step, self.dropped + self.lost
                f.seq = self._take_seq()
                self._emit([f], fsync=True)
                self._retry_backlog()
                if self._fsync:
                    _quiet(os.fsync, self.fd)
        except Exception as exc:  # never let the thread die silently
            _log.warn(f"stream writer stopped: {exc!r}; values logged after this are lost")
        finally:
            self._done.set()
            _quiet(os.close, self.fd)

    def _take_seq(self) -> int:
        seq = self._seq
        self._seq += 1
        return seq

    def _drain(self) -> None:
        queue = self.queue
        while queue:
            batch: list[R.AnyRecord] = []
            events: list[threading.Event] = []
            frame_units = 0
            while queue and len(batch) < _FRAME_RECORDS and frame_units < _FRAME_UNITS:
                item = queue.popleft()
                cls = item.__class__
                if cls is tuple:
                    if len(item) == 4:  # log(): (time, step, weight, its dict copy)
                        t, step, weight, data = item
                    else:  # Run._log_one(): (time, step, weight, key, value)
                        t, step, weight, key, value = item
                        data = {key: value}
                    units = CALL_UNITS + len(data)
                    self.taken_units += units
                    frame_units += units
                    values = coerce(data, self.warn_once, rich=self._rich)
                    if self._rich:
                        self._hand_rich(t, step)
                    if not values:
                        continue
                    self.last_values.update(values)
                    if step > self.last_step:
                        self.last_step = step
                    if len(values) > MAX_KEYS_PER_RECORD:  # a record the server takes
                        self._wide(batch, t, step, values, _weight(weight, self))
                        continue
                    batch.append(R.Metrics(self._seq, t, step, values, _weight(weight, self)))
                    self._seq += 1
                    self.metrics_records += 1
                elif cls is Control:
                    try:
                        rec = item.build(self._seq, item.time)
                    except Exception as exc:
                        _log.warn(f"could not record an update: {exc!r}")
                        continue
                    batch.append(rec)
                    if rec.__class__ is R.Console:  # each line is a row on the server
                        frame_units += len(rec.lines)
                    self._seq += 1
                elif cls is threading.Event:
                    events.append(item)
            if batch:
                self._emit(batch)
            self.progress.set()
            for event in events:
                event.set()

    def _wide(
        self,
        batch: list[R.AnyRecord],
        t: float,
        step: int,
        values: dict[str, Any],
        weight: float | None,
    ) -> None:
        """A ``log()`` call of more than ``MAX_KEYS_PER_RECORD`` keys, as records of at
        most that many, each with the call's step, time and weight (a server refuses a
        wider record, and the local index skips its file)."""
        keys = list(values)
        n = MAX_KEYS_PER_RECORD
        self.warn_once(
            "wide",
            f"a log() call of {len(keys)} keys is stored as {-(-len(keys) // n)} records of "
            f"at most {n} keys at step {step} (history() shows a row per record; shown once)",
        )
        for a in range(0, len(keys), n):
            part = {k: values[k] for k in keys[a : a + n]}
            batch.append(R.Metrics(self._seq, t, step, part, weight))
            self._seq += 1
            self.metrics_records += 1

    def _hand_rich(self, t: float, step: int) -> None:
        found, self._rich = self._rich, []
        if self.on_rich is not None:
            try:
                self.on_rich(t, step, found)
            except Exception as exc:
                self.warn_once("rich", f"could not queue a rich value: {exc!r}")

    def _emit(self, batch: list[R.AnyRecord], fsync: bool = False) -> None:
        frame = encode_frame(batch)
        self._backlog.append((frame, batch[-1].seq, _values_in(batch)))
        self._backlog_bytes += len(frame)
        self._retry_backlog()
        while self._backlog_bytes > _MAX_BACKLOG and len(self._backlog) > 1:
            lost, _, values = self._backlog.popleft()
            self._backlog_bytes -= len(lost)
            self.lost += values
            self.warn_once("backlog", "stream file cannot be written; dropping frames")
        if fsync and self._fsync:
            _quiet(os.fsync, self.fd)
        for listener in self.flush_listeners:
            try:
                listener()
            except Exception:
                pass

    def _retry_backlog(self) -> None:
        while self._backlog:
            frame, last_seq, _ = self._backlog[0]
            if not self._append_bytes(frame):
                return
            self._backlog.popleft()
            self._backlog_bytes -= len(frame)
            self.written_seq = last_seq

    def _append(self, batch: list[R.AnyRecord]) -> None:
        frame = encode_frame(batch)
        if self._append_bytes(frame):
            self.written_seq = batch[-1].seq
        else:
            self._backlog.append((frame, batch[-1].seq, _values_in(batch)))
            self._backlog_bytes += len(frame)

    def _append_bytes(self, frame: bytes) -> bool:
        view = memoryview(frame)
        written = 0
        try:
            while written < len(view):
                written += os.write(self.fd, view[written:])
        except OSError as exc:
            self.warn_once(
                f"oserror:{exc.errno}",
                f"cannot append to the stream file ({exc}); keeping data in memory and retrying",
            )
            if written:
                _quiet(os.ftruncate, self.fd, self._size)
            return False
        self._size += written
        return True


def _values_in(batch: list[R.AnyRecord]) -> int:
    # What "dropped" counts: metric values, as log() counts those it cannot queue.
    return sum(len(r.values) for r in batch if isinstance(r, R.Metrics))


def _weight(weight: Any, writer: StreamWriter) -> float | None:
    if weight is None:
        return None
    try:
        w = float(weight)
    except (TypeError, ValueError):
        writer.warn_once(
            "weight",
            f"log() weight={weight!r} is not a number: ignored, the values are kept "
            "unweighted (shown once)",
        )
        return None
    if w != w or w in (math.inf, -math.inf) or w < 0:
        writer.warn_once(
            "weight-range",
            f"log() weight={weight!r} is not a finite number >= 0: ignored, the values are "
            "kept unweighted (shown once). Pass the batch's sample count, for example.",
        )
        return None
    return w


def _quiet(fn: Callable[..., Any], *args: Any) -> None:
    try:
        fn(*args)
    except OSError:
        pass
