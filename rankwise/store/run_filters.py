"""Store methods for run filters (``rankwise.filters``): ``find_runs`` in SQL.

Runs are folded from their streams at read time, so the values filters read (effective
name and tags after edits, config, summary, the cross-rank summary) are kept in
``run_index`` (migration 12), one row per run, as JSON columns (SQLite's JSON1, JSONB on
PostgreSQL). A row carries a stamp of its streams (the sum of their marks and their
number): ``find_runs`` first refreshes the project's rows whose stamp moved or that an
edit removed, then asks SQL for the runs that match, with every value a bound parameter.

``state`` is settled at read time (a silent run becomes crashed after the crash
timeout), so it is checked on the folded runs after SQL narrowed them; so is the order
by ``state`` or ``updated_at``. Everything else is answered by the index.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from .. import filters as F
from ..read.summary import complete_step
from ..wire.runs import RunInfo
from .run_edits import apply_edits, edits_of_project
from .sqlbase import SQLBase
from .tx import Tx, marks

# ``query`` and ``runs`` import ``base``, which composes this module's Protocol: they
# are imported where used.

REFRESH_BATCH = 200  # runs refolded per write transaction


@lru_cache(maxsize=256)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def sqlite_regexp(pattern: Any, value: Any) -> bool | None:
    """SQLite's ``rw_regexp(pattern, value)``: Python's ``re.search``, as the local reader."""
    if not isinstance(pattern, str) or not isinstance(value, str):
        return None
    return _compiled(pattern).search(value) is not None


def _finite(value: Any) -> Any:
    """``value`` as JSON holds it: a non-finite float is null (missing, for filters)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def _dumps(value: Any) -> str:
    return json.dumps(_finite(value), allow_nan=False, default=str)


def _loads(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


class RunFilters(SQLBase):
    """Store methods for run filters; mixed into ``SQLStore``."""

    crash_timeout: float
    local_pids: bool
    _run: Callable[..., RunInfo | None]

    # -- the index ---------------------------------------------------------------------

    def refresh_run_index(self, project: str) -> int:
        """Refold the project's runs whose ``run_index`` row is missing or stale;
        returns how many were."""

        def stale(tx: Tx) -> list[tuple[int, str, str]]:
            rows = tx.all(
                "SELECT r.id, r.run_id, SUM(s.acked_seq), COUNT(*), MAX(ri.stamp) FROM runs r "
                "JOIN streams s ON s.run = r.id LEFT JOIN run_index ri ON ri.run = r.id "
                "WHERE r.project = ? AND s.acked_seq >= 0 GROUP BY r.id, r.run_id",
                (project,),
            )
            out = []
            for pk, rid, acked, n, stamp in rows:
                want = f"{int(acked)}:{int(n)}"
                if stamp != want:
                    out.append((int(pk), str(rid), want))
            return out

        todo: list[tuple[int, str, str]] = self._read(stale)
        for a in range(0, len(todo), REFRESH_BATCH):
            part = todo[a : a + REFRESH_BATCH]

            def index(tx: Tx, part: list[tuple[int, str, str]] = part) -> None:
                self._index_rows(tx, project, part)

            self._write(index)
        return len(todo)

    def _index_rows(self, tx: Tx, project: str, part: list[tuple[int, str, str]]) -> None:
        from . import query

        now = time.time()
        j = "CAST(? AS JSONB)" if self.dialect == "postgres" else "?"
        sql = (
            "INSERT INTO run_index (run, project, run_id, stamp, name, grp, job_type, tags, "
            "created, updated, state, steps, config, summary, cross_rank) VALUES "
            f"(?, ?, ?, ?, ?, ?, ?, {j}, ?, ?, ?, ?, {j}, {j}, {j}) "
            "ON CONFLICT (run) DO UPDATE SET stamp = excluded.stamp, "
            "name = excluded.name, grp = excluded.grp, job_type = excluded.job_type, "
            "tags = excluded.tags, created = excluded.created, updated = excluded.updated, "
            "state = excluded.state, steps = excluded.steps, config = excluded.config, "
            "summary = excluded.summary, cross_rank = excluded.cross_rank"
        )
        rows = []
        self._settle_in(tx, [pk for pk, _, _ in part])  # the cross-rank values read below
        for pk, rid, stamp in part:
            info = self._run(tx, project, rid, now)
            if info is None:
                continue
            found = query.last_complete_of(tx, pk, complete_step(info.streams))
            cross: dict[str, Any] = {}
            if found:
                names = tx.all(
                    f"SELECT id, name FROM metrics WHERE id IN ({marks(len(found))})",
                    list(found),
                )
                for mid, name in names:
                    v = found[int(mid)]
                    cross[name] = {s: getattr(v, s, None) for s in F.CROSS_STATS}
            rows.append(
                (
                    pk,
                    project,
                    rid,
                    stamp,
                    info.name,
                    info.group,
                    info.job_type,
                    _dumps(list(info.tags)),
                    info.created,
                    info.updated,
                    info.state,
                    int(info.steps),
                    _dumps(info.config),
                    _dumps(info.summary),
                    _dumps(cross),
                )
            )
        if rows:
            tx.many(sql, rows)

    # -- finding -------------------------------------------------------------------------

    def find_runs(
        self,
        project: str,
        filters: dict[str, Any] | None = None,
        order: str | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> tuple[list[RunInfo], int]:
        node = F.parse(filters)
        how = F.parse_order(order)
        if limit < 0 or offset < 0:
            from ..errors import UsageError

            raise UsageError("limit and offset must be zero or more")
        dialect: F.Dialect = "postgres" if self.dialect == "postgres" else "sqlite"
        if how.is_updated:
            expr: F.SQL | None = F.SQL("ri.updated", [])
        elif how.field is not None and how.field.kind != "state":
            expr = F.order_sql(how.field, dialect)
        else:
            expr = None
        json_order = how.field is not None and how.field.kind in ("config", "summary", "cross")
        return self._find(project, node, expr, json_order, how.desc, None, limit, offset)

    def list_runs_indexed(self, query: Any) -> tuple[list[RunInfo], int]:
        """``list_runs`` of one project (``RunQuery``) over the index: the runs table's
        page costs the page, not a fold of every run of the project."""
        from .runs import check_sort

        name, desc = check_sort(query.sort)
        if query.limit < 0 or query.offset < 0:
            from ..errors import UsageError

            raise UsageError("limit and offset must be zero or more")
        # Conditions made here, not parsed: a RunQuery's values are not a user's filter,
        # so the filter bounds (string lengths, number of clauses) do not apply.
        parts: list[F.Node] = []
        if query.group is not None:
            parts.append(F.Cond(F.Field("group"), "$eq", query.group))
        if query.job_type is not None:
            parts.append(F.Cond(F.Field("job_type"), "$eq", query.job_type))
        if query.states:
            parts.append(F.Cond(F.Field("state"), "$in", tuple(sorted(set(query.states)))))
        parts += [F.Cond(F.Field("tags"), "$eq", t) for t in sorted(set(query.tags))]
        node: F.Node | None = F.Logic("$and", tuple(parts)) if parts else None
        column = {"created": "ri.created", "updated": "ri.updated", "name": "ri.name",
                  "steps": "ri.steps"}.get(name)  # fmt: skip
        expr = F.SQL(column, []) if column else None
        needle = query.search.lower() if query.search else None
        return self._find(query.project, node, expr, False, desc, needle, query.limit, query.offset)

    def _find(
        self,
        project: str,
        node: F.Node | None,
        expr: F.SQL | None,
        json_order: bool,
        desc: bool,
        needle: str | None,
        limit: int,
        offset: int,
    ) -> tuple[list[RunInfo], int]:
        """The runs ``node`` picks, sorted by ``expr`` (None: by state), with ``needle``
        a substring of the name or id (case-insensitive), and their count."""
        self.refresh_run_index(project)
        by_state = "state" in F.fields_of(node)
        dialect: F.Dialect = "postgres" if self.dialect == "postgres" else "sqlite"

        def read(tx: Tx) -> tuple[list[RunInfo], int]:
            now = time.time()
            cond = F.to_sql(node, dialect)
            cols = ["ri.run_id", "ri.state"]
            params: list[Any] = []
            if expr is not None:
                cols.append(expr.text)
                params += expr.params
            else:
                cols.append("NULL")
            cols.append("ri.name")
            sql = f"SELECT {', '.join(cols)} FROM run_index ri WHERE ri.project = ? AND {cond.text}"
            rows = tx.all(sql, [*params, project, *cond.params])
            # A run indexed as running may have crashed since: fold those (only) now.
            running = [str(r[0]) for r in rows if r[1] == "running"]
            live = self._light_runs(tx, project, now, running) if running else {}
            docs = self._docs(tx, project, running) if running and by_state else {}
            kept: list[tuple[Any, str]] = []
            for row in sorted(rows, key=lambda r: str(r[0])):
                rid, state = str(row[0]), row[1]
                if needle and needle not in (row[3] or "").lower() and needle not in rid.lower():
                    continue
                if state == "running":
                    run = live.get(rid)
                    if run is None:
                        continue
                    state = run.state
                    if by_state and not F.matches(node, {**docs[rid], "state": state}):
                        continue
                value = row[2] if expr is not None else state
                if json_order and isinstance(value, str) and self.dialect == "sqlite":
                    value = _loads(value)  # order_sql's JSON text of a string
                kept.append((value, rid))
            ordered = F.sort_key_groups(kept, desc)
            page = ordered[offset : offset + limit]
            out = [self._run(tx, project, rid, now) for rid in page]
            return [r for r in out if r is not None], len(ordered)

        return self._read(read)

    def _docs(self, tx: Tx, project: str, run_ids: list[str]) -> dict[str, dict[str, Any]]:
        """The filter documents (``rankwise.filters.doc_of``, less the state) of these
        runs, from their index rows."""
        out: dict[str, dict[str, Any]] = {}
        for a in range(0, len(run_ids), 500):
            part = run_ids[a : a + 500]
            rows = tx.all(
                "SELECT ri.run_id, ri.tags, ri.grp, ri.job_type, ri.name, ri.created, "
                "ri.config, ri.summary, ri.cross_rank FROM run_index ri "
                f"WHERE ri.project = ? AND ri.run_id IN ({marks(len(part))})",
                (project, *part),
            )
            for rid, tags, grp, job, name, created, config, summary, cross in rows:
                out[str(rid)] = {
                    "tags": _loads(tags),
                    "group": grp,
                    "job_type": job,
                    "display_name": name,
                    "created_at": created,
                    "config": _loads(config),
                    "summary": _loads(summary),
                    "cross": _loads(cross),
                }
        return out

    def _light_runs(
        self, tx: Tx, project: str, now: float, run_ids: list[str]
    ) -> dict[str, RunInfo]:
        """These runs of the project folded light (state, times; no config), edited."""
        from . import runs

        grouped: dict[str, list[Any]] = {}
        for a in range(0, len(run_ids), 500):
            part = run_ids[a : a + 500]
            rows = tx.all(
                f"SELECT r.run_id, {runs.STREAM_COLS} FROM streams s "
                "JOIN runs r ON r.id = s.run WHERE s.acked_seq >= 0 AND r.project = ? "
                f"AND r.run_id IN ({marks(len(part))})",
                (project, *part),
            )
            for row in rows:
                grouped.setdefault(row[0], []).append(runs.stream_facts(row[1:]))
        edits = edits_of_project(tx, project)
        return {
            rid: apply_edits(
                runs.run_info(
                    project, rid, s, self.crash_timeout, now, full=False, local_pids=self.local_pids
                ),
                edits.get((project, rid), []),
            )
            for rid, s in grouped.items()
        }
