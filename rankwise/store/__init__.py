"""Stores: where the ingester writes and the HTTP API reads (see ``base.Store``).

``open_store(url)`` picks the implementation from a URL. Each one is imported only when
asked for, so the SQLite store never imports psycopg, the PostgreSQL store never imports
sqlite3, and ``import rankwise`` imports neither.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

from ..errors import UsageError

if TYPE_CHECKING:
    from .base import Store

__all__ = ["open_store"]

# A libpq key=value string ("host=db dbname=runs user=me"): PostgreSQL, never a file name.
_CONNINFO = re.compile(
    r"\s*(host|hostaddr|port|dbname|user|password|options|sslmode|service)\s*=.*", re.S
)


def open_store(url: str | os.PathLike[str], crash_timeout: float = 60.0) -> Store:
    """Open the store at ``url``: ``sqlite:///abs/path.db``, a plain file path, or
    PostgreSQL as ``postgresql://user@host:port/db`` (``postgres://`` too) or a libpq
    ``key=value`` string. Call ``migrate()`` before first use.
    """
    text = os.fspath(url)
    if text.startswith(("postgresql://", "postgres://")) or _CONNINFO.fullmatch(text):
        from .postgres import PostgresStore

        return PostgresStore(text, crash_timeout=crash_timeout)
    if text.startswith("sqlite:"):
        path = text[len("sqlite:") :]
        if not path.startswith("///"):
            raise UsageError(
                f"cannot open {text!r}: write a SQLite URL as sqlite:/// followed by the "
                "absolute path (sqlite:///data/rankwise.db) or pass a plain file path"
            )
        # sqlite:///abs/path.db and sqlite:////abs/path.db both name /abs/path.db.
        text = "/" + path.lstrip("/")
    elif "://" in text:
        scheme = text.split("://", 1)[0]
        raise UsageError(
            f"unknown store scheme {scheme!r} in {text!r}: use sqlite:///PATH, a file path, "
            "or postgresql://..."
        )
    from .sqlite import SQLiteStore

    return SQLiteStore(text, crash_timeout=crash_timeout)
