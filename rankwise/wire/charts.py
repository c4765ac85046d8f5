"""A chart's columns as the server sends them: one stream's series of a metric, the
cross-rank band, and the replies that carry them (``GET .../series``, ``POST /compare``).

The store returns ``Series`` and ``Band`` and the server encodes them as they are, so the
HTTP replies and the OpenAPI document are these same declarations.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from .runs import Spelled

XAxis = Literal["step", "time"]


class NonFinite(msgspec.Struct, kw_only=True):
    """The points of a series whose value is NaN or ±Inf, spelled out: JSON turns them
    into ``null`` (as it does a missing value), so a chart could not otherwise tell a NaN
    loss from nothing logged."""

    x: list[float] = msgspec.field(default_factory=list)
    value: list[Spelled] = msgspec.field(default_factory=list)


class Series(msgspec.Struct):
    """One stream label's series of one metric, as columns (x sorted ascending).

    ``y`` holds NaN and ±Inf as floats (MessagePack keeps them); JSON writes them as
    ``null`` and ``nonfinite`` says which they were. ``nonfinite`` is filled in from ``y``
    when a series is made without one.
    """

    label: str
    x: list[float]
    y: list[float | None]  # null in JSON for NaN and ±Inf (see nonfinite)
    downsampled: bool = False
    nonfinite: NonFinite = msgspec.field(default_factory=NonFinite)

    def __post_init__(self) -> None:
        if self.nonfinite.x:
            return  # decoded from a reply: as sent
        at = [i for i, y in enumerate(self.y) if y is not None and (y != y or y in _INF)]
        if at:
            xs, ys = self.x, self.y
            self.nonfinite = NonFinite(x=[xs[i] for i in at], value=[_spelled(ys[i]) for i in at])


_INF = (float("inf"), float("-inf"))


def _spelled(y: float | None) -> Spelled:
    return "NaN" if y is None or y != y else ("Infinity" if y > 0 else "-Infinity")


class Band(msgspec.Struct):
    """The cross-rank aggregate of one metric, per step, as columns; ``reduce`` names
    the column that is the metric's line (the mean unless ``define_metric`` chose one).

    ``wmean`` is the weighted mean where every value at that step carried a weight, and
    equals ``mean`` otherwise. ``std`` is the population standard deviation across ranks.
    NaN and ±Inf values are left out of ``n`` and the rest and counted in ``nan``,
    ``posinf`` and ``neginf``; where ``n`` is 0 the mean, min and max are NaN (or the one
    infinity logged there), ``null`` in JSON. Downsampling keeps, per bucket, the steps
    with the most of each kind.
    """

    x: list[float]
    n: list[int]
    mean: list[float | None]
    wmean: list[float | None]
    min: list[float | None]
    max: list[float | None]
    std: list[float | None]
    downsampled: bool = False
    step: list[int] = msgspec.field(default_factory=list)  # each point's step (x when x=step)
    nw: list[int] = msgspec.field(default_factory=list)  # how many of the n carried a weight
    nan: list[int] = msgspec.field(default_factory=list)
    posinf: list[int] = msgspec.field(default_factory=list)
    neginf: list[int] = msgspec.field(default_factory=list)
    # True where not every rank has reached the step (every live rank, while the run
    # runs): the mean there averages only the ranks that got there (set by
    # ``at_complete``; the store leaves it).
    partial: list[bool] = msgspec.field(default_factory=list)
    # The last step every rank has reached (``rankwise.read.summary.complete_step``); null
    # when every step is complete.
    complete_step: int | None = None
    # The total of the finite values at each step (null where n is 0, as the mean).
    sum: list[float | None] = msgspec.field(default_factory=list)
    # Which column is the metric's cross-rank line: mean, wmean, sum, min or max
    # (``run.define_metric(reduce=)``; set by the series route from the run's definitions).
    reduce: str = "mean"

    def at_complete(self, complete: int | None) -> Band:
        """This band with ``partial`` and ``complete_step`` for the run's complete step
        (``rankwise.read.summary.complete_step``)."""
        partial = [False] * len(self.x) if complete is None else [s > complete for s in self.step]
        return msgspec.structs.replace(self, partial=partial, complete_step=complete)


class SeriesReply(msgspec.Struct, kw_only=True):
    """One metric's chart: each stream's series and the cross-rank band."""

    key: str
    x: XAxis
    series: list[Series]
    band: Band | None  # null when band=false


class CompareRun(msgspec.Struct, kw_only=True):
    project: str
    run: str
    series: list[Series]
    band: Band | None


class CompareReply(msgspec.Struct, kw_only=True):
    key: str
    x: XAxis
    runs: list[CompareRun]
