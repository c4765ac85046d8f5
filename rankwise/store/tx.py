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
    # True where ``many`` sends all its rows in one round trip (PostgreSQL's pipeline):
    # there one short prepared statement per row costs the client less than long
    # multi-row statements, which the driver parses anew each time (2.5-3.5x the CPU
    # for 4,000 rows of 12 columns); ``insert_rows`` takes that way.
    pipelined: bool

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
        self,
        table: str,
        keys: Sequence[str],
        columns: Sequence[str],
        rows: Sequence[Sequence[Any]],
    ) -> None:
        """``UPDATE table SET columns... WHERE keys = ...`` for each row (its values, then
        its keys), as few statements as the database allows (SQLite: one per
        ``rows_per_statement`` rows; PostgreSQL: pipelined)."""
        ...

    def any_of(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        """A condition that ``column`` is one of ``values`` (not empty) and its
        parameters: ``column IN (?, ...)`` on SQLite; ``column = ANY(?)`` with one array
        on PostgreSQL, one statement text whatever the count, which the driver parses
        and the server plans once (each count of ``IN`` was a statement of its own)."""
        ...


# Rows per multi-row statement: one statement (one step of SQLite's engine, one GIL
# handover) for many rows; at most 999 parameters, the limit of SQLite before 3.32.
MAX_ROWS_PER_STATEMENT = 100
MAX_PARAMETERS = 999


def rows_per_statement(width: int) -> int:
    """How many rows of ``width`` values one multi-row statement takes."""
    return max(1, min(MAX_ROWS_PER_STATEMENT, MAX_PARAMETERS // max(1, width)))


def insert_rows(
    tx: Tx, head: str, width: int, rows: Sequence[Sequence[Any]], tail: str = ""
) -> None:
    """``head`` (``INSERT INTO t (a, b) VALUES``) + one ``(?, ?)`` group of ``width`` per
    row (+ ``tail``, an ``ON CONFLICT`` clause), ``rows_per_statement`` rows a statement;
    where ``tx.pipelined``, the one-row statement for each row, pipelined."""
    one = "(" + marks(width) + ")"
    if tx.pipelined:
        if rows:
            tx.many(f"{head} {one}{tail}", rows)
        return
    step = rows_per_statement(width)
    for a in range(0, len(rows), step):
        part = rows[a : a + step]
        sql = f"{head} {', '.join([one] * len(part))}{tail}"
        tx.run(sql, [v for row in part for v in row])


def delete_ids(tx: Tx, table: str, ids: Sequence[int]) -> None:
    """``DELETE FROM table WHERE id IN (...)``, 500 ids a statement."""
    for a in range(0, len(ids), 500):
        part = ids[a : a + 500]
        tx.run(f"DELETE FROM {table} WHERE id IN ({marks(len(part))})", part)


def schema_in(tx: Tx) -> int:
    """The schema version ``tx`` sees: the highest migration applied (0: none)."""
    row = tx.one("SELECT MAX(version) FROM schema_version")
    return int(row[0]) if row and row[0] is not None else 0


def marks(n: int) -> str:
    """``n`` comma-separated placeholders, for ``IN (...)``."""
    return ", ".join("?" * n)
