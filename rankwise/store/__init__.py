"""Stores: where the ingester writes and the HTTP API reads (see ``base.Store``).

``open_store(url)`` picks the implementation from a URL. Each one is imported only when
asked for, so the SQLite store never imports psycopg, the PostgreSQL store never imports
sqlite3, and ``import rankwise`` imports neither.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .sql import SQLStore

__all__ = ["open_store"]


def open_store(url: str | os.PathLike[str], crash_timeout: float = 60.0) -> SQLStore:
    """Open the store at ``url``: ``sqlite:///abs/path.db``, a plain file path, or
    ``postgresql://user@host:port/db`` (``postgres://`` too). Call ``migrate()`` before
    first use.
    """
    text = os.fspath(url)
    if text.startswith(("postgresql://", "postgres://")):
        from .postgres import PostgresStore

        return PostgresStore(text, crash_timeout=crash_timeout)
    if text.startswith("sqlite:"):
        path = text[len("sqlite:") :]
        if not path.startswith("///"):
            raise ValueError(
                f"cannot open {text!r}: write a SQLite URL as sqlite:/// followed by the "
                "absolute path (sqlite:///data/rankwise.db) or pass a plain file path"
            )
        # sqlite:///abs/path.db and sqlite:////abs/path.db both name /abs/path.db.
        text = "/" + path.lstrip("/")
    elif "://" in text:
        scheme = text.split("://", 1)[0]
        raise ValueError(
            f"unknown store scheme {scheme!r} in {text!r}: use sqlite:///PATH, a file path, "
            "or postgresql://..."
        )
    from .sqlite import SQLiteStore

    return SQLiteStore(text, crash_timeout=crash_timeout)
