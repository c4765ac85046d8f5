"""Store methods for run edits (``rankwise.edits``): keep each edit, apply them on read.

Every edit is one row of ``run_edits`` (migration 12), never changed or removed: the
run's edit history. Reads apply them over what the streams say (``apply_edits``), the
latest of each field by time winning, so an edit from the dashboard and a
``run.tags = ...`` of the live run (its ``RunEdit`` record, kept here by ingest through
``record_live_edits``) merge by time whichever arrived first. An edit marks the run's
``run_index`` row stale (``rankwise.store.run_filters``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from ..edits import Edit, apply, live_edits
from ..stream import records as R
from ..wire.runs import RunInfo
from .sqlbase import SQLBase
from .tx import Tx, schema_in

_INSERT = (
    "INSERT INTO run_edits (run, at, field, value, source, who) VALUES (?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (run, at, field, source) DO NOTHING"
)


def _row(edit: Edit, run: int) -> tuple[Any, ...]:
    return (run, float(edit.at), edit.field, json.dumps(edit.value), edit.source, edit.who)


def _edit(at: Any, field: str, value: str, source: str, who: str | None) -> Edit:
    return Edit(field=field, value=json.loads(value), at=float(at), source=source, who=who)


def record_live_edits(tx: Tx, run: int, records: Iterable[R.AnyRecord]) -> None:
    """Ingest's part: keep the ``RunEdit`` records of a batch as the run's edits."""
    found = live_edits(records)
    if found:
        tx.many(_INSERT, [_row(e, run) for e in found])
        tx.run("DELETE FROM run_index WHERE run = ?", (run,))


def edits_ready(tx: Tx) -> bool:
    """Whether the database has the ``run_edits`` table (migration 12): a store read
    before ``migrate()`` (a test of an older schema) has no edits to apply."""
    return schema_in(tx) >= 12


def edits_of_project(tx: Tx, project: str | None) -> dict[tuple[str, str], list[Edit]]:
    """Every edit of the project's runs (all projects: None), by (project, run id)."""
    if not edits_ready(tx):
        return {}
    sql = (
        "SELECT r.project, r.run_id, e.at, e.field, e.value, e.source, e.who "
        "FROM run_edits e JOIN runs r ON r.id = e.run"
    )
    params: list[Any] = []
    if project is not None:
        sql += " WHERE r.project = ?"
        params.append(project)
    out: dict[tuple[str, str], list[Edit]] = {}
    for p, r, *rest in tx.all(sql + " ORDER BY e.at, e.id", params):
        out.setdefault((p, r), []).append(_edit(*rest))
    return out


def edits_of_run(tx: Tx, project: str, run_id: str) -> list[Edit]:
    if not edits_ready(tx):
        return []
    rows = tx.all(
        "SELECT e.at, e.field, e.value, e.source, e.who FROM run_edits e "
        "JOIN runs r ON r.id = e.run WHERE r.project = ? AND r.run_id = ? "
        "ORDER BY e.at, e.id",
        (project, run_id),
    )
    return [_edit(*row) for row in rows]


def apply_edits(run: RunInfo, edits: Sequence[Edit]) -> RunInfo:
    return apply(run, edits) if edits else run


class RunEdits(SQLBase):
    """Store methods for run edits; mixed into ``SQLStore`` (uses its transactions)."""

    def edit_run(self, project: str, run_id: str, edits: Sequence[Edit]) -> bool:
        def put(tx: Tx) -> bool:
            row = tx.one(
                "SELECT r.id FROM runs r WHERE r.project = ? AND r.run_id = ? AND EXISTS "
                "(SELECT 1 FROM streams s WHERE s.run = r.id AND s.acked_seq >= 0)",
                (project, run_id),
            )
            if row is None:
                return False
            run = int(row[0])
            tx.many(_INSERT, [_row(e, run) for e in edits])
            tx.run("DELETE FROM run_index WHERE run = ?", (run,))
            return True

        return bool(self._write(put))

    def run_edits(self, project: str, run_id: str) -> list[Edit] | None:
        def read(tx: Tx) -> list[Edit] | None:
            known = tx.one(
                "SELECT 1 FROM runs r JOIN streams s ON s.run = r.id "
                "WHERE r.project = ? AND r.run_id = ? AND s.acked_seq >= 0",
                (project, run_id),
            )
            return None if known is None else edits_of_run(tx, project, run_id)

        return self._read(read)
