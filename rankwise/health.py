"""Rank health: which rank is slow, how far behind it is, and which is stuck where.

Pure functions of per-stream step timestamps, usable by the local reader and by the
server alike (nothing here reads files or a store; numpy is not needed).

* A stream's **step timestamps** are the times at which it first logged each new highest
  step (``step_points``), so logging several times per step, or a step going back, does
  not count as progress.
* Its **step rate** is the steps it advanced per second over the last ``window`` seconds
  of its life: up to ``now`` while it runs (so a rank that stopped logging slows down to
  zero), up to its last record once it ended. A stream that started inside the window is
  measured from its first step; one with a single step so far has no rate yet.
* Its **lag** is how many steps it is behind the median of the streams' current steps
  (negative: ahead), and ``lag_seconds`` that lag at the median rate.
* It is **slow** when its rate times ``factor`` (1.25 by default) is still below the
  median rate of the streams that have one.
* It is **stalled** while its latest watchdog ``Stall`` has not been cleared; the stall
  began ``idle_seconds`` before that record and lasts until ``now`` (or the stream's end).

``RankHealth`` and ``HealthReply`` are declared once, as msgspec structs, in
``rankwise.wire.health``: ``assess`` returns them, the server encodes them as they are
(``GET .../health``) and ``Api(server=)`` decodes them as they are, so a rank's health
read from files and from a server is the same object.
"""

from __future__ import annotations

import bisect
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .stream import records as R
from .wire.health import RankHealth, Stall

DEFAULT_WINDOW = 60.0
DEFAULT_FACTOR = 1.25


@dataclass(frozen=True)
class StreamSteps:
    """What ``assess`` needs of one stream (the latest incarnation of one label)."""

    label: str
    points: Sequence[tuple[int, float]]  # (step, time) from step_points()
    rank: int = -1
    node: int = -1
    state: str = "running"
    last_seen: float | None = None  # time of the stream's last record of any kind
    stall: R.Stall | None = None  # the open stall (StreamFold.stall)
    host: str = ""


def step_points(records: Iterable[R.AnyRecord]) -> list[tuple[int, float]]:
    """(step, time) each time a stream's ``Metrics`` reached a new highest step."""
    out: list[tuple[int, float]] = []
    top = None
    for rec in records:
        if type(rec) is R.Metrics and (top is None or rec.step > top):
            top = rec.step
            out.append((rec.step, rec.time))
    return out


def step_rate(
    points: Sequence[tuple[int, float]], end: float, window: float = DEFAULT_WINDOW
) -> float | None:
    """Steps per second over ``[end - window, end]`` (see the module docstring)."""
    times = [t for _, t in points]
    n = bisect.bisect_right(times, end)  # points at or before end
    if n < 2:
        return None
    start = end - window
    first_step, first_time = points[0]
    if first_time >= start:
        s0, t0 = first_step, first_time
    else:
        i = bisect.bisect_right(times, start) - 1  # the step the stream was at when it began
        s0, t0 = points[i][0], start
    if end <= t0:
        return None
    return (points[n - 1][0] - s0) / (end - t0)


def assess(
    streams: Sequence[StreamSteps],
    now: float | None = None,
    window: float = DEFAULT_WINDOW,
    factor: float = DEFAULT_FACTOR,
) -> list[RankHealth]:
    """Each stream's health, in rank order. ``now`` defaults to the latest time seen."""
    if window <= 0 or factor < 1:
        raise ValueError("window must be > 0 and factor >= 1")
    if now is None:
        seen = [s.last_seen for s in streams if s.last_seen is not None]
        seen += [s.points[-1][1] for s in streams if s.points]
        now = max(seen, default=0.0)
    ends = {s.label: _end(s, now) for s in streams}
    rates = {s.label: step_rate(s.points, ends[s.label], window) for s in streams}
    steps = {s.label: _step_at(s.points, ends[s.label]) for s in streams}
    known = [r for r in rates.values() if r is not None]
    median_rate = statistics.median(known) if known else None
    current = [v for v in steps.values() if v >= 0]
    median_step = statistics.median(current) if current else -1
    out = []
    for s in streams:
        rate, step = rates[s.label], steps[s.label]
        lag = float(median_step - step)
        stall = None
        if s.stall is not None:
            since = s.stall.time - s.stall.idle_seconds
            stall = Stall(
                where=s.stall.where,
                since=since,
                seconds=max(ends[s.label], s.stall.time) - since,
                stacks=dict(s.stall.stacks),
            )
        health = RankHealth(
            label=s.label,
            rank=s.rank,
            node=s.node,
            host=s.host,
            state=s.state,
            last_step=step,
            last_seen=s.last_seen,
            step_rate=rate,
            median_rate=median_rate,
            lag_steps=lag,
            lag_seconds=lag / median_rate if median_rate else None,
            slow=rate is not None and median_rate is not None and rate * factor < median_rate,
            stalled=stall is not None,
            stall=stall,
        )
        health.message = health.describe()
        out.append(health)
    out.sort(key=lambda h: (h.rank, h.label))
    return out


def _end(s: StreamSteps, now: float) -> float:
    if s.state == "running":
        return now
    last = s.last_seen if s.last_seen is not None else (s.points[-1][1] if s.points else now)
    return min(now, last)


def _step_at(points: Sequence[tuple[int, float]], t: float) -> int:
    i = bisect.bisect_right([p[1] for p in points], t)
    return points[i - 1][0] if i else -1
