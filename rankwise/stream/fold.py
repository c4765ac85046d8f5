"""What a stream's records add up to, and the states of streams and runs.

``StreamFold`` is applied record by record, in ``seq`` order (a run of ascending, new
``Metrics`` records is folded in bulk, to the same result); the same fold serves the
local reader and the server's ingester, so both tell the same story of a run.

A stream's state is its ``Finish`` record's state; without one it is *running* while its
process can be seen alive (same host, same pid and start time) or its last record is
younger than the crash timeout, and *crashed* otherwise. A reader on the writer's host
and in its pid namespace (both recorded at the start) that finds the pid gone, or held
by a process started at another time, calls the stream crashed at once: a SIGKILLed rank
reads as crashed as soon as its job is torn down, not a heartbeat later. A run's state looks at the
latest incarnation of each stream: *crashed* when any of them crashed (those ranks are
named), otherwise the primary stream's state — except that a primary *killed* while
another rank *failed* makes the run *failed*, because that failure is what the launcher
killed the job for.

``StreamFold.first_nonfinite`` keeps, per metric, the stream's first non-finite value
(NaN, +Inf, -Inf): its step, time and kind. It is set once and never moved, so the
store keeps it at ingest and no reader scans a history for it (``rankwise.divergence``
compares the ranks').

A stream is *stalled* (``StreamFold.stall``) from a watchdog ``Stall`` record until the
``Stall`` record with ``cleared=True`` that follows it; a stall is not a state of its
own, because a stalled process is still alive and heartbeating.
"""

from __future__ import annotations

import math
import operator
import os
import socket
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from itertools import chain
from typing import Any

from . import records as R

_seq = operator.attrgetter("seq")
_time = operator.attrgetter("time")
_step = operator.attrgetter("step")
_values = operator.attrgetter("values")


def nonfinite_kind(value: float) -> str:
    """ "NaN", "+Inf" or "-Inf" (the value must be non-finite)."""
    if value != value:
        return "NaN"
    return "+Inf" if value > 0 else "-Inf"


@dataclass
class FirstNonFinite:
    """A stream's first non-finite value of one metric."""

    step: int
    time: float
    value: str  # NaN, +Inf or -Inf


@dataclass
class StreamFold:
    start: R.StreamStart | None = None
    config: dict[str, Any] = field(default_factory=dict)
    user_summary: dict[str, Any] = field(default_factory=dict)
    last_values: dict[str, Any] = field(default_factory=dict)
    metric_keys: set[str] = field(default_factory=set)
    last_seq: int = -1
    first_time: float | None = None
    last_time: float | None = None
    last_step: int = -1
    metrics_records: int = 0
    points: int = 0
    dropped: int = 0
    finish: R.Finish | None = None
    stall: R.Stall | None = None  # the open stall, None once logging resumed
    last_stall: R.Stall | None = None  # the latest stall report, cleared or not
    stalls: int = 0
    # ``run.define_metric()`` records by name, the latest of each (rankwise.metric_defs)
    metric_defs: dict[str, R.DefineMetric] = field(default_factory=dict)
    # Bytes (UTF-8) of console text received (one more per line): the store keeps a
    # stream's lines only up to its budget (``store.health.MAX_CONSOLE_BYTES``).
    console_bytes: int = 0
    # A digest of the record at the stream's mark (``store.ingest.record_digest``): a
    # resend reaching back to the mark must hold that same record (else 409).
    tip: bytes = b""
    # The stream's key digest, fixed by its first StreamStart (``StreamStart.key_digest``):
    # a later StreamStart cannot change which secret the store asks uploads for.
    key_digest: str | None = None
    # Per metric, the first non-finite value the stream logged (module docstring).
    first_nonfinite: dict[str, FirstNonFinite] = field(default_factory=dict)
    # ``run.name = ...`` and friends on the live run, in stream order (rankwise.edits).
    edits: list[R.RunEdit] = field(default_factory=list)

    # What ran (``Provenance`` records) by scope, the latest of each: ``run`` on the
    # primary, ``node`` on each node's local rank 0.
    provenance: dict[str, R.Provenance] = field(default_factory=dict)

    def note_nonfinite(self, key: str, step: int, time: float, value: float) -> None:
        """Keep ``value`` as ``key``'s first non-finite one unless one came before."""
        held = self.first_nonfinite.get(key)
        if held is None or (step, time) < (held.step, held.time):
            self.first_nonfinite[key] = FirstNonFinite(step, time, nonfinite_kind(value))

    def _check_finite(self, rec: R.Metrics) -> None:
        for key, value in rec.values.items():
            if type(value) is float and not math.isfinite(value):
                self.note_nonfinite(key, rec.step, rec.time, value)

    def apply(self, records: Iterable[R.AnyRecord]) -> None:
        recs = list(records)
        seqs = list(map(_seq, recs))
        if not recs or seqs[0] <= self.last_seq or not all(map(operator.lt, seqs, seqs[1:])):
            self._apply_each(recs)  # replays or disorder: the record-by-record rules
            return
        # Ascending and all new: each run of Metrics records folds in bulk, which gives
        # what folding them one by one gives; other records keep the per-record rules.
        others = [i for i, rec in enumerate(recs) if type(rec) is not R.Metrics]
        a = 0
        for b in [*others, len(recs)]:
            if b > a:
                self._apply_metrics(recs[a:b])
            if b < len(recs):
                self._apply_each(recs[b : b + 1])
            a = b + 1

    def _apply_metrics(self, mets: list[R.AnyRecord]) -> None:
        """Fold ascending, new ``Metrics`` records (the common batch) in C-level calls."""
        self.last_seq = mets[-1].seq
        times = list(map(_time, mets))
        if self.first_time is None:
            self.first_time = times[0]
        if self.last_time is not None:
            times.insert(0, self.last_time)
        self.last_time = max(times)  # the first of equal maxima, as the per-record rule
        values = list(map(_values, mets))
        try:  # one C-level pass; a NaN or an infinity makes the sum non-finite
            finite = math.isfinite(sum(chain.from_iterable(map(dict.values, values))))
        except (TypeError, OverflowError):  # an int past float range, an odd value
            finite = False
        if not finite:  # (or finite values that overflowed): look record by record
            for rec in mets:
                self._check_finite(rec)  # type: ignore[arg-type]
        self.metrics_records += len(mets)
        self.points += sum(map(len, values))
        deque(map(self.last_values.update, values), 0)
        self.metric_keys.update(*values)
        self.last_step = max(self.last_step, max(map(_step, mets)))

    def _apply_each(self, records: Iterable[R.AnyRecord]) -> None:
        for rec in records:
            if rec.seq <= self.last_seq:
                continue  # already folded: replays are harmless
            self.last_seq = rec.seq
            if self.first_time is None:
                self.first_time = rec.time
            if self.last_time is None or rec.time > self.last_time:
                self.last_time = rec.time
            if isinstance(rec, R.Metrics):
                self.metrics_records += 1
                self.points += len(rec.values)
                self.last_values.update(rec.values)
                self.metric_keys.update(rec.values)
                self._check_finite(rec)
                if rec.step > self.last_step:
                    self.last_step = rec.step
            elif isinstance(rec, R.StreamStart):
                if self.start is None:
                    self.key_digest = rec.key_digest
                self.start = rec
                self.config = dict(rec.config)
            elif isinstance(rec, R.ConfigUpdate):
                self.config.update(rec.items)
            elif isinstance(rec, R.SummaryUpdate):
                self.user_summary.update(rec.items)
            elif isinstance(rec, R.Heartbeat):
                self.dropped = max(self.dropped, rec.dropped)
            elif isinstance(rec, R.Dropped):
                self.dropped = max(self.dropped, rec.count)
            elif isinstance(rec, R.Finish):
                self.finish = rec
                self.dropped = max(self.dropped, rec.dropped)
            elif isinstance(rec, R.Console):
                self.console_bytes += sum(
                    len(x.encode("utf-8", "surrogatepass")) for x in rec.lines
                ) + len(rec.lines)
            elif isinstance(rec, R.DefineMetric):
                self.metric_defs[rec.name] = rec
            elif isinstance(rec, R.RunEdit):
                self.edits.append(rec)

            elif isinstance(rec, R.Provenance):
                self.provenance[rec.scope] = rec
            elif isinstance(rec, R.Stall):
                if rec.cleared:
                    self.stall = None
                else:
                    if self.stall is None:
                        self.stalls += 1
                    self.stall = self.last_stall = rec

    @property
    def summary(self) -> dict[str, Any]:
        out = dict(self.last_values)
        out.update(self.user_summary)
        return out


_HOST = socket.gethostname()


def pid_namespace() -> str:
    """This process's pid namespace (``pid:[4026531836]``; "" where there is none)."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


_PID_NS = pid_namespace()


def process_alive(host: str, pid: int, start_time: float) -> bool | None:
    """True/False when the writing process can be checked from here, else None."""
    if host != _HOST or pid <= 0:
        return None
    try:
        import psutil
    except ImportError:
        return None
    try:
        proc = psutil.Process(pid)
        if start_time and abs(proc.create_time() - start_time) > 1.0:
            return False  # the pid now belongs to another process
        return bool(proc.status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True
    except Exception:
        return None


# Whether a stream's (host, pid) may be looked up in this host's process table: False for
# uploads, True for files the reader reads whole, or a callable for an index that follows
# files (``rankwise ui``'s tailer): whether it has read that stream's file to its end.
LocalPids = bool | Callable[[R.StreamStart], bool]


def stream_state(
    fold: StreamFold, now: float, crash_timeout: float, local_pids: LocalPids = False
) -> str:
    """``running``, ``crashed`` or the Finish's state, as of ``now``.

    ``local_pids``: the stream was read from a file on this host (the local reader,
    ``rankwise ui``), so its (host, pid) may be looked up in this host's process table.
    A server judging uploaded streams passes False: an uploaded (host, pid) is only a
    claim, and checking it would answer whether a pid lives on the server (an oracle)
    and keep a stream that names a live server pid running forever. A callable
    ``local_pids`` says whether the index has read the stream's file to its end: until it
    has, a stream whose writer is dead reads running (its Finish may be in the part not
    read yet: a page polled then saw a finished run as crashed, and stopped polling).
    """
    if fold.finish is not None:
        return fold.finish.state
    start = fold.start
    age = float("inf") if fold.last_time is None else now - fold.last_time
    if start is None:
        return "crashed" if age > crash_timeout else "running"
    alive = process_alive(start.host, start.pid, start.pid_start_time) if local_pids else None
    if alive is False and callable(local_pids) and not local_pids(start):
        # The index has not read all its file yet (rankwise ui catching up with a big
        # directory): its Finish may be in the rest. Its heartbeat is as old as the part
        # read, so it would read crashed: it is running until the index catches up.
        return "running"
    if alive is True:
        return "running"
    if alive is False and start.pid_ns and start.pid_ns == _PID_NS and start.pid_start_time:
        return "crashed"  # its own host and pid namespace, its start time checked: certain
    # A dead pid is trusted once the heartbeat is late too: a same-named host in another
    # pid namespace (a container) must not turn a live stream crashed.
    if alive is False and age > 2 * start.heartbeat_interval + 1.0:
        return "crashed"
    return "crashed" if age > max(crash_timeout, 3 * start.heartbeat_interval) else "running"


@dataclass
class StreamState:
    """The minimum ``run_state`` needs to know of a stream."""

    label: str
    incarnation: int
    is_primary: bool
    state: str


def latest(streams: Iterable[StreamState]) -> list[StreamState]:
    """The latest incarnation of each label."""
    best: dict[str, StreamState] = {}
    for s in streams:
        if s.label not in best or s.incarnation > best[s.label].incarnation:
            best[s.label] = s
    return [best[k] for k in sorted(best)]


def run_state(streams: Iterable[StreamState]) -> tuple[str, list[str]]:
    """The run's state and the labels of its crashed streams (see the module docstring)."""
    current = latest(streams)
    if not current:
        return "running", []
    crashed = [s.label for s in current if s.state == "crashed"]
    if crashed:
        return "crashed", crashed
    primaries = [s for s in current if s.is_primary]
    states = {s.state for s in current}
    if primaries:
        state = primaries[0].state
    elif "running" in states:
        state = "running"
    else:
        state = next(s for s in ("failed", "killed", "finished") if s in states)
    if state == "killed" and "failed" in states:
        state = "failed"
    return state, []
