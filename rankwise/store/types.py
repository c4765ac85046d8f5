"""What the store's reads answer beyond runs: console pages, system series, stall events
and saved views (runs and streams are ``rankwise.read.model``'s).

Declared once, as msgspec structs: the store returns them and the server encodes them as
they are, so the HTTP replies and the OpenAPI document are these same declarations. The
store protocol (``base``) imports these, and no implementation module.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgspec


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
    y: list[float]
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
