"""The run's first failure: the cause, ahead of the symptoms.

When one rank of a distributed job fails, the others usually fail after it — in a
collective whose peer went away ("Connection closed by peer"), or killed by the launcher.
Their errors are symptoms; the cause is the rank that went first. So, as torchrun's own
"Root Cause (first observed failure)", a run's **first failure** is chosen by time:

* a *failed* stream ended at its ``Finish`` record's time;
* a *crashed* stream (SIGKILL, OOM killer: no ``Finish``) ended at its last sign of life,
  its last record of any kind. It died after that record, so when its death made another
  rank fail, the crashed one still comes first.

Only the latest incarnation of each stream counts (a torchrun restart that recovered is
not a failure of the run). Streams *killed* by a signal are never the first failure (the
launcher kills the rest of a job *because* something failed), but those that ended after
the first failure are listed with the other failed and crashed ones in ``then``, in time
order. A run with no failed or crashed stream has no first failure.

A crashed rank is known only once its death is (``rankwise.stream.fold.stream_state``);
until then it reads as running, and the first failure would be a peer's symptom ("Connection
closed by peer"). So when the first failure's message is such a peer-connection symptom
and a stream still called running gave its last sign of life before it, that *silent*
stream leads instead ("rank 1: no sign of life since 12:03:04 — checking"), the symptom
following in ``then``.

Pure functions of per-stream facts: the local reader and the server use the same rule.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

FAILING = ("failed", "crashed")
AFTER = ("failed", "crashed", "killed")
# How a collective reports that a peer went away (gloo, NCCL, MPI, sockets); lower case.
PEER_SYMPTOMS = (
    "connection closed by peer",
    "connection reset by peer",
    "connection refused",
    "broken pipe",
    "socket closed",
    "remote process exited",
    "nccl communicator was aborted",
    "ncclremoteerror",
    "peer closed",
    "timed out in call to",
)


@dataclass(frozen=True)
class StreamEnd:
    """What the rule needs of one stream."""

    label: str
    incarnation: int
    rank: int
    node: int
    state: str
    error_type: str | None
    error_message: str | None
    time: float | None  # Finish time when it has one, else its last record's time
    exit_code: int | None = None
    signal: int | None = None


@dataclass
class Failure:
    """One stream's failure; the first one of a run lists the later ones in ``then``."""

    label: str
    incarnation: int
    rank: int
    node: int
    state: str  # failed, crashed (or killed, in ``then`` only)
    error_type: str | None
    message: str | None
    time: float | None
    exit_code: int | None = None
    signal: int | None = None
    then: list[Failure] = field(default_factory=list)

    def describe(self) -> str:
        """One line: "rank 1 failed: RuntimeError: boom" / "rank 1 crashed (…)"."""
        who = f"rank {self.rank}" if self.rank >= 0 else self.label
        if self.state == "silent":
            import time

            since = time.strftime("%H:%M:%S", time.localtime(self.time)) if self.time else "?"
            return f"{who}: no sign of life since {since} — checking"
        if self.state == "crashed":
            return f"{who} crashed: its process ended with no exit recorded (SIGKILL, OOM?)"
        if self.error_type:
            return f"{who} {self.state}: {self.error_type}: {self.message or ''}".rstrip(": ")
        if self.signal:
            return f"{who} {self.state} by signal {self.signal}"
        if self.exit_code is not None:
            return f"{who} {self.state} with exit code {self.exit_code}"
        return f"{who} {self.state}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Failure:
        fields: dict[str, Any] = {k: data.get(k) for k in cls.__dataclass_fields__ if k != "then"}
        return cls(**fields, then=[cls.from_dict(t) for t in data.get("then") or []])


def _latest(streams: Iterable[StreamEnd]) -> list[StreamEnd]:
    best: dict[str, StreamEnd] = {}
    for s in streams:
        if s.label not in best or s.incarnation > best[s.label].incarnation:
            best[s.label] = s
    return list(best.values())


def _failure(s: StreamEnd) -> Failure:
    return Failure(
        label=s.label,
        incarnation=s.incarnation,
        rank=s.rank,
        node=s.node,
        state=s.state,
        error_type=s.error_type,
        message=s.error_message,
        time=s.time,
        exit_code=s.exit_code,
        signal=s.signal,
    )


def _order(s: StreamEnd) -> tuple[float, int, str]:
    # An unknown time (a stream with no record at all) sorts last; ties go to the rank.
    return (s.time if s.time is not None else float("inf"), s.rank, s.label)


def first_failure(streams: Iterable[StreamEnd]) -> Failure | None:
    """The run's first failure with the later ones in ``then`` (module docstring)."""
    current = _latest(streams)
    failing = sorted((s for s in current if s.state in FAILING), key=_order)
    if not failing:
        return None
    first = _failure(failing[0])
    later = sorted(
        (s for s in current if s.state in AFTER and s.label != first.label),
        key=_order,
    )
    first.then = [
        _failure(s)
        for s in later
        if s.state in FAILING or (s.time is not None and s.time >= (first.time or 0.0))
    ]
    return _silent_first(current, first)


def is_peer_symptom(error_type: str | None, message: str | None) -> bool:
    """Whether an error reads as a peer going away (``PEER_SYMPTOMS``), not a cause."""
    text = f"{error_type or ''}: {message or ''}".lower()
    return any(p in text for p in PEER_SYMPTOMS)


def _silent_first(current: list[StreamEnd], first: Failure) -> Failure:
    """A running stream silent since before a peer symptom leads it (module docstring)."""
    if first.state != "failed" or first.time is None:
        return first
    if not is_peer_symptom(first.error_type, first.message):
        return first
    silent = sorted(
        (s for s in current if s.state == "running" and s.time is not None and s.time < first.time),
        key=_order,
    )
    if not silent:
        return first
    lead = _failure(silent[0])
    lead.state = "silent"
    symptoms, first.then = first.then, []
    lead.then = [first, *symptoms]
    return lead
