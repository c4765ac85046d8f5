"""``Tx``: the few cursor operations the shared store code needs.

SQL is written once, with ``?`` placeholders, in the subset SQLite and PostgreSQL share
(``INSERT ... ON CONFLICT``, ``RETURNING``); each store adapts it to its driver. Row
locks are spelled ``tx.for_update``, empty where the database has one writer anyway.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol


class Tx(Protocol):
    for_update: str  # " FOR UPDATE" where rows can be locked, else ""

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...

    def one(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None: ...

    def run(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Execute; returns the number of rows changed."""
        ...

    def many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None: ...

    def many_returning(
        self, sql: str, rows: Sequence[Sequence[Any]]
    ) -> list[tuple[Any, ...] | None]:
        """Execute ``sql`` (ending in ``RETURNING ...``) once per row; the first row each
        returned (None: no row), in the order of ``rows`` (PostgreSQL: pipelined)."""
        ...


def marks(n: int) -> str:
    """``n`` comma-separated placeholders, for ``IN (...)``."""
    return ", ".join("?" * n)
