"""What the store's reads answer beyond runs: chart columns (a stream's series, the
cross-rank band), console pages, system series, stall events and saved views (runs and
streams are ``rankwise.read.model``'s).

Declared once, as msgspec structs: the store returns them and the server encodes them as
they are, so the HTTP replies and the OpenAPI document are these same declarations. The
store protocol (``base``) imports these, and no implementation module.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from ..read.model import Spelled


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


class ConsoleQuery(msgspec.Struct, kw_only=True):
    """Which lines of a run's console, and where in them (see ``Store.console``).

    Filters: ``labels`` and ``nodes`` (streams whose label, or whose node, is listed;
    both given: either), ``stream`` (``stdout``/``stderr``), ``q`` (a case-insensitive
    substring), ``since``/``until`` (a time range, inclusive). Position, at most one:
    ``offset`` (index among the matching lines in time order), ``after``/``before`` (a
    line id: the lines just after or before it), ``at`` (a time: the lines from there
    on); none: the newest ``limit`` lines.
    """

    labels: Sequence[str] = ()
    nodes: Sequence[int] = ()
    stream: str | None = None
    q: str | None = None
    since: float | None = None
    until: float | None = None
    offset: int | None = None
    after: int | None = None
    before: int | None = None
    at: float | None = None
    limit: int = 200
    count: bool = True


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


class SavedView(msgspec.Struct, kw_only=True):
    """A saved view of the dashboard's runs table (``rankwise.store.saved_views``)."""

    project: str
    name: str  # unique per project
    # The runs table's filters, e.g. {"state": ["crashed"], "tag": ["ddp"]}, kept verbatim.
    filters: dict[str, Any] = msgspec.field(default_factory=dict)
    columns: list[str] = msgspec.field(default_factory=list)  # summary keys shown as columns
    updated: float = 0.0  # when it was last saved (Unix seconds)


@dataclass(frozen=True)
class TableRow:
    """One logged table as the store holds it (the cells are in the Parquet blob)."""

    key: str
    label: str
    step: int
    digest: str
    size: int
    nrows: int
    columns: list[str]
    types: list[str]
    steps: list[int]  # every step the key was logged at (any label)
    labels: list[str]  # every label that logged it
