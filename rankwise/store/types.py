"""The store's own types that are no reply: how a console read is asked for
(``ConsoleQuery``) and a logged table as the store keeps it (``TableRow``). What the
store's reads answer is declared in ``rankwise.wire``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

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
