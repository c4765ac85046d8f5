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

    def update_rows(
        self, table: str, key: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]
    ) -> None:
        """``UPDATE table SET columns... WHERE key = ?`` for each row (its values, then its
        key), as few statements as the database allows (SQLite: one per ``ROWS_PER_STATEMENT``
        rows; PostgreSQL: pipelined)."""
        ...


# Rows per multi-row statement: one statement (one step of SQLite's engine, one GIL
# handover) for many rows, with parameters well under either database's limits.
ROWS_PER_STATEMENT = 100


def insert_rows(
    tx: Tx, head: str, width: int, rows: Sequence[Sequence[Any]], tail: str = ""
) -> None:
    """``head`` (``INSERT INTO t (a, b) VALUES``) + one ``(?, ?)`` group of ``width`` per
    row (+ ``tail``, an ``ON CONFLICT`` clause), ``ROWS_PER_STATEMENT`` rows a statement."""
    one = "(" + marks(width) + ")"
    for a in range(0, len(rows), ROWS_PER_STATEMENT):
        part = rows[a : a + ROWS_PER_STATEMENT]
        sql = f"{head} {', '.join([one] * len(part))}{tail}"
        tx.run(sql, [v for row in part for v in row])


def marks(n: int) -> str:
    """``n`` comma-separated placeholders, for ``IN (...)``."""
    return ", ".join("?" * n)
