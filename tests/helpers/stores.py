"""Opening the store under test, and racing ingesters over it, for the store tests.

``kind`` is the store tests' fixture parameter: ``sqlite`` (a file under ``tmp_path``)
or ``postgres`` (the ``pg_dsn`` fixture's own schema, so two stores opened in one test
share one database, as two server processes would).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from rankwise.store.sql import SQLStore


def open_sql_store(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest, **kw: Any
) -> SQLStore:
    """A store of ``kind`` on the test's database (not migrated); ``kw`` go to the store."""
    if kind == "sqlite":
        from rankwise.store.sqlite import SQLiteStore

        return SQLiteStore(tmp_path / "store.db", **kw)
    from rankwise.store.postgres import PostgresStore

    return PostgresStore(request.getfixturevalue("pg_dsn"), **kw)


def race(work: Callable[[SQLStore, int], None], stores: Sequence[SQLStore]) -> None:
    """Run ``work(store, n)`` for each ``stores[n]`` at once, one thread each; fail with
    every exception a thread raised (a thread's failure would otherwise go unseen)."""
    errors: list[BaseException] = []

    def one(st: SQLStore, n: int) -> None:
        try:
            work(st, n)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(st, n)) for n, st in enumerate(stores)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
