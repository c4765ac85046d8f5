"""A run's health and telemetry as the server sends them: each rank's health
(``GET .../health``, also what ``RunInfo.health()`` returns from files), stall events,
the hang report's envelope, console pages and system series.

``rankwise.health.assess`` builds ``RankHealth``; the store's health reads return the
console, system and stall structs; the server encodes them all as they are.
"""

from __future__ import annotations

import msgspec

from ..hang import HangReport


class Stall(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Where a stalled rank is stuck, since when, for how long."""

    where: str  # e.g. "all_reduce at train.py:88"
    since: float | None  # when logging stopped (Unix seconds)
    seconds: float | None  # how long it has been stalled
    # Each thread's stack; the server sends them only when asked (stacks=true).
    stacks: dict[str, str] | None = None


class RankHealth(msgspec.Struct, kw_only=True):
    """One rank's health (the latest incarnation of its stream), as ``assess`` found it."""

    label: str
    rank: int
    node: int
    host: str
    state: str
    last_step: int
    last_seen: float | None  # the stream's last record of any kind
    step_rate: float | None  # steps per second over the window; None: not enough steps
    median_rate: float | None  # the median of the ranks' step rates
    lag_steps: float  # behind the median stream's step (negative: ahead)
    lag_seconds: float | None
    slow: bool  # slower than the median rate by the factor
    stalled: bool
    stall: Stall | None  # the open stall
    message: str = ""  # ``describe()``: "rank 5 stalled for 7 min in all_reduce at ..."

    @property
    def stall_where(self) -> str:
        return self.stall.where if self.stall is not None else ""

    @property
    def stall_since(self) -> float | None:
        return self.stall.since if self.stall is not None else None

    @property
    def stall_seconds(self) -> float | None:
        return self.stall.seconds if self.stall is not None else None

    @property
    def stacks(self) -> dict[str, str]:
        """The stalled rank's stack per thread ({} when not stalled, or not sent)."""
        return dict(self.stall.stacks or {}) if self.stall is not None else {}

    def describe(self) -> str:
        """One line for people: "rank 5 stalled for 7 min in all_reduce at train.py:88"."""
        who = f"rank {self.rank}" if self.rank >= 0 else self.label
        if self.stalled:
            where = f" in {self.stall_where}" if self.stall_where else ""
            return f"{who} stalled for {duration_text(self.stall_seconds or 0.0)}{where}"
        if self.slow and self.step_rate is not None and self.median_rate:
            return (
                f"{who} is slow: {self.step_rate:.3g} steps/s against a median of "
                f"{self.median_rate:.3g}, {self.lag_steps:.0f} steps behind"
            )
        return f"{who} {self.state}, step {self.last_step}"


class HealthReply(msgspec.Struct, kw_only=True):
    """A run's health as the server replies it (``GET .../health``)."""

    state: str
    crashed: list[str]
    now: float  # the time assessed at
    window: float
    factor: float
    median_rate: float | None
    ranks: list[RankHealth]


class ConsoleLine(msgspec.Struct, kw_only=True):
    id: int  # increasing in ingest order; with ``time``, the sort key and a page cursor
    label: str
    rank: int
    node: int
    stream: str  # stdout | stderr
    time: float
    text: str  # as printed, ANSI escapes kept


class ConsolePage(msgspec.Struct, kw_only=True):
    """Lines in time order (ties by id). ``total`` counts every line matching the
    filters and ``offset`` is the index of ``lines[0]`` among them (None when not
    counted)."""

    lines: list[ConsoleLine]
    total: int | None
    offset: int | None


class SystemSeries(msgspec.Struct, kw_only=True):
    """One line of a system chart: a node, a GPU of a node, or a recording process."""

    key: str  # the stored key, e.g. gpu/3/util_percent
    name: str  # "node 0", "node 0 · gpu 3", "rank 5"
    label: str
    rank: int
    node: int
    host: str
    gpu: int | None
    x: list[float]  # times (Unix seconds)
    y: list[float | None]  # a NaN sample is null in JSON
    downsampled: bool = False


class StallEvent(msgspec.Struct, kw_only=True):
    label: str
    incarnation: int
    rank: int
    time: float
    idle_seconds: float
    where: str
    cleared: bool
    stacks: dict[str, str] = msgspec.field(default_factory=dict)
    # The rank's step when the stall began (a report) or ended (a clear): where a chart
    # by step marks it; None when the store has no step progress for the stream.
    step: int | None = None


class StallsReply(msgspec.Struct, kw_only=True):
    stalls: list[StallEvent]  # newest first


class HangReply(msgspec.Struct, kw_only=True):
    hang: HangReport | None  # null while no rank is stalled (rankwise.hang)


class SystemReply(msgspec.Struct, kw_only=True):
    keys: list[str]  # one per chart: node/cpu_percent, gpu/util_percent, ...


class SystemSeriesReply(msgspec.Struct, kw_only=True):
    key: str
    series: list[SystemSeries]


def duration_text(seconds: float) -> str:
    """Seconds for people: "7 s", "12 min", "1.5 h"."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
