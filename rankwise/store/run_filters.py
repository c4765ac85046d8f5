"""Store methods for run filters (``rankwise.filters``): ``find_runs`` in SQL.

Runs are folded from their streams at read time, so the values filters read (effective
name and tags after edits, config, summary, the cross-rank summary) are kept in
``run_index`` (migration 14), one row per run, as JSON columns (SQLite's JSON1, JSONB on
PostgreSQL), with the folded run itself (``info``, migration 16). A row carries a stamp
of its streams (the sum of their marks and their number): ``find_runs`` first refreshes
the project's rows whose stamp moved or that an edit removed (compared in SQL; 200 runs
per transaction, their streams, edits and cross-rank values read in a query or two
each), then asks SQL for the page of runs that match, sorted and counted, with every
value a bound parameter.

``state`` is settled at read time (a silent run becomes crashed after the crash
timeout): a filter of the state folds the runs indexed as running (only) to check them,
and the order by ``state`` sorts the matches here. The page's runs come from their rows'
``info`` where every stream had ended by its own record (finished, failed, killed)
when it was made (such a run is what it was folded as: any change of its streams or an
edit makes its row stale); the others (running, crashed: states that depend on the time
and on who reads) are folded.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import msgspec

from .. import filters as F
from ..read.summary import complete_step
from ..stream.fold import LocalPids
from ..stream.records import END_STATES
from ..wire.runs import RunInfo
from .run_edits import apply_edits, edits_of_project
from .sqlbase import SQLBase
from .tx import Tx, marks

# ``query`` and ``runs`` import ``base``, which composes this module's Protocol: they
# are imported where used.

REFRESH_BATCH = 200  # runs refolded per write transaction
MAX_LIVE = 500  # runs indexed as running that a state filter passes to SQL by id
MAX_ROWS = 2**62  # the largest LIMIT / OFFSET sent to SQL


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


_info_enc = msgspec.msgpack.Encoder()
_info_dec = msgspec.msgpack.Decoder(RunInfo)


def _settled(blob: Any) -> RunInfo | None:
    """An index row's ``info`` when every stream of it had ended by its own record
    (finished, failed, killed); None otherwise: a running stream's state, or a crashed
    one's (silent past the crash timeout, a local pid gone), depends on when and by whom
    it is read (the time, ``crash_timeout``, ``local_pids``)."""
    if blob is None:
        return None
    info = _info_dec.decode(bytes(blob))
    if not info.streams or any(s.state not in END_STATES for s in info.streams):
        return None
    return info


@dataclass(frozen=True)
class _Order:
    """How ``_find`` sorts: ``expr`` the value (``sort_key_groups`` over it), ``terms``
    the same order in SQL (``filters.order_by_sql``); both None: by state. ``json``:
    ``expr`` is a JSON field's value."""

    expr: F.SQL | None
    terms: F.SQL | None
    json: bool
    desc: bool


class RunFilters(SQLBase):
    """Store methods for run filters; mixed into ``SQLStore``."""

    crash_timeout: float
    local_pids: LocalPids
    _run: Callable[..., RunInfo | None]
    _runs: Callable[..., dict[str, RunInfo]]

    # -- the index ---------------------------------------------------------------------

    def refresh_run_index(self, project: str) -> int:
        """Refold the project's runs whose ``run_index`` row is missing or stale;
        returns how many were."""

        def stale(tx: Tx) -> list[tuple[int, str, str]]:
            # Compared in SQL: a warm index sends back no rows.
            stamp = "CAST(SUM(s.acked_seq) AS TEXT) || ':' || CAST(COUNT(*) AS TEXT)"
            rows = tx.all(
                f"SELECT r.id, r.run_id, {stamp} FROM runs r "
                "JOIN streams s ON s.run = r.id LEFT JOIN run_index ri ON ri.run = r.id "
                f"WHERE r.project = ? AND s.acked_seq >= 0{self.live_runs_sql(tx)} "
                "GROUP BY r.id, r.run_id "
                f"HAVING MAX(ri.stamp) IS NULL OR MAX(ri.stamp) <> {stamp}",
                (project,),
            )
            return [(int(pk), str(rid), str(want)) for pk, rid, want in rows]

        todo: list[tuple[int, str, str]] = self._read(stale)
        j = "CAST(? AS JSONB)" if self.dialect == "postgres" else "?"
        sql = (
            "INSERT INTO run_index (run, project, run_id, stamp, name, grp, job_type, tags, "
            "created, updated, state, steps, config, summary, cross_rank, info) VALUES "
            f"(?, ?, ?, ?, ?, ?, ?, {j}, ?, ?, ?, ?, {j}, {j}, {j}, ?) "
            "ON CONFLICT (run) DO UPDATE SET stamp = excluded.stamp, "
            "name = excluded.name, grp = excluded.grp, job_type = excluded.job_type, "
            "tags = excluded.tags, created = excluded.created, updated = excluded.updated, "
            "state = excluded.state, steps = excluded.steps, config = excluded.config, "
            "summary = excluded.summary, cross_rank = excluded.cross_rank, info = excluded.info"
        )
        for a in range(0, len(todo), REFRESH_BATCH):
            part = todo[a : a + REFRESH_BATCH]

            def rows_of(tx: Tx, part: list[tuple[int, str, str]] = part) -> list[tuple[Any, ...]]:
                return self._index_rows(tx, project, part)

            # Folded in a read snapshot, written after: a write transaction of PostgreSQL
            # sees each statement's own snapshot, and a compaction by another server
            # between listing a run's pending uploads and reading them failed the fold
            # (KeyError in pending_view). A run that changes meanwhile has a newer stamp
            # than the one written, so the next refresh folds it again.
            rows = self._read(rows_of)

            def write(tx: Tx, rows: list[tuple[Any, ...]] = rows) -> None:
                tx.many(sql, rows)

            if rows:
                self._write(write)
        return len(todo)

    def _index_rows(
        self, tx: Tx, project: str, part: list[tuple[int, str, str]]
    ) -> list[tuple[Any, ...]]:
        """The ``run_index`` rows of ``part``'s runs, folded in ``tx`` (a read snapshot)."""
        from . import query

        now = time.time()
        rows = []
        infos = self._runs(tx, project, [r for _, r, _ in part], now, [p for p, _, _ in part])
        found_of = query.last_complete_of_runs(
            tx,
            {pk: complete_step(infos[rid].streams) for pk, rid, _ in part if rid in infos},
            self._pending_runs_of(tx, [pk for pk, _, _ in part]),  # merged, not folded
        )
        names = query.metric_names(tx, {mid for found in found_of.values() for mid in found})
        for pk, rid, stamp in part:
            info = infos.get(rid)
            if info is None:
                continue
            cross: dict[str, Any] = {}
            for mid, v in found_of[pk].items():
                cross[names[mid]] = {s: getattr(v, s, None) for s in F.CROSS_STATS}
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
                    _info_enc.encode(info),
                )
            )
        return rows

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
            terms: F.SQL | None = F.order_by_sql(None, dialect, how.desc, "ri.updated")
        elif how.field is not None and how.field.kind != "state":
            expr = F.order_sql(how.field, dialect)
            terms = F.order_by_sql(how.field, dialect, how.desc)
        else:
            expr = terms = None
        json_order = how.field is not None and how.field.kind in ("config", "summary", "cross")
        return self._find(
            project, node, _Order(expr, terms, json_order, how.desc), None, limit, offset
        )

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
        dialect: F.Dialect = "postgres" if self.dialect == "postgres" else "sqlite"
        how = _Order(
            F.SQL(column, []) if column else None,
            F.order_by_sql(None, dialect, desc, column) if column else None,
            False,
            desc,
        )
        needle = query.search.lower() if query.search else None
        return self._find(query.project, node, how, needle, query.limit, query.offset)

    def _find(
        self,
        project: str,
        node: F.Node | None,
        how: _Order,
        needle: str | None,
        limit: int,
        offset: int,
    ) -> tuple[list[RunInfo], int]:
        """The runs ``node`` picks, sorted by ``how`` (no expression: by state), with
        ``needle`` a substring of the name or id (case-insensitive), and their count.

        SQL sorts, pages and counts unless the order is the state, there is a ``needle``
        (Python's ``str.lower``, which SQL does not share) or more than ``MAX_LIVE`` runs
        indexed as running match: then every match comes back to be sorted here. A
        filter of the state checks the runs indexed as running (only) on their folded
        state first, and SQL takes those that pass by id."""
        self.refresh_run_index(project)
        by_state = "state" in F.fields_of(node)
        dialect: F.Dialect = "postgres" if self.dialect == "postgres" else "sqlite"
        # SQL's LIMIT and OFFSET are 64-bit: a larger one (an API caller's) means "all".
        limit, offset = min(limit, MAX_ROWS), min(offset, MAX_ROWS)

        def read(tx: Tx) -> tuple[list[RunInfo], int]:
            now = time.time()
            cond = F.to_sql(node, dialect)
            where = f"ri.project = ? AND {cond.text}"
            if self._trash(tx):  # a row a concurrent refresh wrote as the run was deleted
                where += " AND ri.run NOT IN (SELECT id FROM runs WHERE deleted_at IS NOT NULL)"
            params: list[Any] = [project, *cond.params]
            if how.terms is None or needle:
                return self._find_folding(tx, project, node, how, needle, limit, offset)
            if by_state:
                running = [
                    str(r[0])
                    for r in tx.all(
                        f"SELECT ri.run_id FROM run_index ri WHERE {where} "
                        "AND ri.state = 'running'",
                        params,
                    )
                ]
                if len(running) > MAX_LIVE:
                    return self._find_folding(tx, project, node, how, needle, limit, offset)
                live = self._light_runs(tx, project, now, running) if running else {}
                docs = self._docs(tx, project, running) if running else {}
                kept = [
                    rid
                    for rid in running
                    if rid in live and F.matches(node, {**docs[rid], "state": live[rid].state})
                ]
                ids = f" OR ri.run_id IN ({marks(len(kept))})" if kept else ""
                where += f" AND (ri.state <> 'running'{ids})"
                params += kept
            rows = tx.all(
                f"SELECT ri.run_id, COUNT(*) OVER () FROM run_index ri WHERE {where} "
                f"ORDER BY {how.terms.text} LIMIT ? OFFSET ?",
                [*params, *how.terms.params, limit, offset],
            )
            if rows:
                total = int(rows[0][1])
            elif offset:
                got = tx.one(f"SELECT COUNT(*) FROM run_index ri WHERE {where}", params)
                total = int(got[0]) if got else 0
            else:
                total = 0
            return self._page(tx, project, [str(r[0]) for r in rows], now), total

        return self._read(read)

    def _find_folding(
        self,
        tx: Tx,
        project: str,
        node: F.Node | None,
        how: _Order,
        needle: str | None,
        limit: int,
        offset: int,
    ) -> tuple[list[RunInfo], int]:
        """``_find`` sorting every match here: each run indexed as running is folded for
        its state."""
        now = time.time()
        by_state = "state" in F.fields_of(node)
        dialect: F.Dialect = "postgres" if self.dialect == "postgres" else "sqlite"
        expr = how.expr
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
        if self._trash(tx):  # a row a concurrent refresh wrote as the run was deleted
            sql += " AND ri.run NOT IN (SELECT id FROM runs WHERE deleted_at IS NOT NULL)"
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
            if how.json and isinstance(value, str) and self.dialect == "sqlite":
                value = _loads(value)  # order_sql's JSON text of a string
            kept.append((value, rid))
        ordered = F.sort_key_groups(kept, how.desc)
        return self._page(tx, project, ordered[offset : offset + limit], now), len(ordered)

    def _page(self, tx: Tx, project: str, run_ids: list[str], now: float) -> list[RunInfo]:
        """These runs, in this order: from their index rows (``info``) where every
        stream had ended by its own record when the row was made (such a run stays as
        it was folded: any change of its streams or an edit makes the row stale), else
        folded."""
        if not run_ids:
            return []
        got: dict[str, RunInfo | None] = {}
        for a in range(0, len(run_ids), 500):
            part = run_ids[a : a + 500]
            rows = tx.all(
                "SELECT ri.run_id, ri.info FROM run_index ri "
                f"WHERE ri.project = ? AND ri.run_id IN ({marks(len(part))})",
                (project, *part),
            )
            got.update((str(rid), _settled(info)) for rid, info in rows)
        folded = [rid for rid in run_ids if got.get(rid) is None]
        if folded:
            got.update(self._runs(tx, project, folded, now))
        return [info for rid in run_ids if (info := got.get(rid)) is not None]

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
