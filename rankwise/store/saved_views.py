"""Saved views of the dashboard's runs table: a name, filters and columns, per project.

A view is small JSON chosen by a person (``{"state": ["crashed"], "tag": ["ddp"]}``,
``["val/accuracy"]``); the store keeps it verbatim in the ``views`` table (migration 3)
and never interprets it, so the dashboard can add filters without a schema change.
Saving under an existing name replaces that view (one upsert, so two people saving at
once leave one of the two, whole).
"""

from __future__ import annotations

import json
import time
from typing import Any

from ..errors import UsageError
from ..wire.runs import SavedView
from .sqlbase import SQLBase

MAX_NAME = 100
MAX_JSON = 64 * 1024  # bytes of filters + columns; a view is a handful of settings


def check_view(name: str, filters: dict[str, Any], columns: list[str]) -> str:
    """The view's name, stripped; raises ``UsageError`` naming the fix when unfit."""
    clean = name.strip()
    if not clean:
        raise UsageError("a saved view needs a name: pass a non-empty name")
    if len(clean) > MAX_NAME:
        raise UsageError(f"a view name has at most {MAX_NAME} characters, not {len(clean)}")
    if not isinstance(filters, dict):
        raise UsageError('a view\'s filters are a JSON object, e.g. {"state": ["crashed"]}')
    if not isinstance(columns, list) or not all(isinstance(c, str) for c in columns):
        raise UsageError("a view's columns are a list of summary keys (strings)")
    if len(_encode(filters, columns)) > MAX_JSON:
        raise UsageError(f"a view's filters and columns take at most {MAX_JSON} bytes as JSON")
    return clean


def _encode(filters: dict[str, Any], columns: list[str]) -> str:
    return json.dumps({"filters": filters, "columns": columns}, sort_keys=True)


class SavedViews(SQLBase):
    """Store methods for saved views; mixed into ``SQLStore`` (uses its transactions)."""

    def list_views(self, project: str) -> list[SavedView]:
        """The project's saved views, by name."""
        rows = self._read(
            lambda tx: tx.all(
                "SELECT name, data, updated FROM views WHERE project = ? ORDER BY name",
                (project,),
            )
        )
        out = []
        for name, data, updated in rows:
            doc = json.loads(data)
            out.append(
                SavedView(
                    project=project,
                    name=name,
                    filters=doc["filters"],
                    columns=doc["columns"],
                    updated=float(updated),
                )
            )
        return out

    def save_view(
        self, project: str, name: str, filters: dict[str, Any], columns: list[str]
    ) -> SavedView:
        """Create the view, or replace the one of that name."""
        name = check_view(name, filters, columns)
        now = time.time()
        data = _encode(filters, columns)

        def put(tx: Any) -> None:
            tx.run(
                "INSERT INTO views (project, name, data, updated) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (project, name) DO UPDATE SET data = excluded.data, "
                "updated = excluded.updated",
                (project, name, data, now),
            )

        self._write(put)
        return SavedView(project=project, name=name, filters=filters, columns=columns, updated=now)

    def delete_view(self, project: str, name: str) -> bool:
        """Delete the view; False when there was none of that name."""
        n = self._write(
            lambda tx: tx.run("DELETE FROM views WHERE project = ? AND name = ?", (project, name))
        )
        return bool(n)
