"""``SQLStore``: the ``Store`` protocol over any SQL database that speaks ``Tx``.

Both stores share this class and differ only in how they run a transaction
(``_write``/``_read``) and in the DDL of their migrations. Keeping one implementation of
the logic is what lets one test suite vouch for both.

Invariants:

* Rows that only name things (a run, a stream, a metric name) are created in their own
  small transactions before the data transaction, so that the ids cached here are always
  committed ones, and several ingesters only ever contend for them briefly. A stream row
  with mark -1 holds nothing and is invisible to every read.
* The data transaction of a stream is ``ingest.apply_stream``: mark, points and
  aggregates commit together, so ``ingest`` is exactly-once (see ``rankwise.store.base``).
* Reads run in one read transaction (a snapshot), so a page of runs or a series never
  mixes two states of the database.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from ..errors import UsageError
from ..stream import records as R
from ..stream.identity import StreamId
from ..wire.charts import Band, Series, XAxis
from ..wire.runs import CrossRankValue, RunInfo
from . import health as rank_health
from . import migrations as M
from . import query, runs
from .alerts import Alerts
from .artifacts import ArtifactWrites
from .base import RunQuery
from .compacting import Compacting, keeps_pending
from .fold_cache import FoldCache
from .health_reads import HealthReads
from .heatmap_reads import HeatmapReads
from .ingest import Presented, apply_stream, metric_names
from .media_reads import MediaReads
from .pending_view import PendingView
from .reports import Reports
from .run_cache import FINGERPRINT_SQL, Fingerprint, RunCache
from .run_edits import RunEdits, apply_edits, edits_of_project, edits_of_run, edits_ready
from .run_filters import RunFilters
from .saved_views import SavedViews
from .sqlbase import SQLBase
from .stream_ids import ensure_stream_rows
from .tokens import Tokens
from .trash import Trash
from .tx import Tx, marks, schema_in

_XS = ("step", "time")


def _check_axis(x: str, max_points: int) -> None:
    if x not in _XS:
        raise UsageError(f"x={x!r} is not an axis: use 'step' or 'time'")
    if max_points < 1:
        raise UsageError(f"max_points={max_points} must be at least 1")


class SQLStore(
    SavedViews,
    Reports,
    HealthReads,
    HeatmapReads,
    MediaReads,
    Tokens,
    ArtifactWrites,
    Alerts,
    RunEdits,
    RunFilters,
    Trash,
    Compacting,
    SQLBase,
):
    """Everything of ``Store`` but how transactions run (see the module docstring)."""

    dialect: str = ""

    def __init__(self, crash_timeout: float = 60.0) -> None:
        if not crash_timeout > 0:
            raise UsageError("crash_timeout must be a positive number of seconds")
        self.crash_timeout = float(crash_timeout)
        # Whether a stream's (host, pid) may be checked against this host's processes:
        # only for ``rankwise ui``'s index of local files (stream_state's ``local_pids``).
        self.local_pids = False
        self._stream_ids: dict[StreamId, tuple[int, int]] = {}
        self._metric_ids: dict[str, int] = {}
        self._system_ids: dict[str, int] = {}  # system key names (rank health)
        # Ingest appends to series directly (no ``upload_blocks``): only while the schema
        # is older than ``M.PENDING`` (a test's deliberately old store). Checked again
        # after a migration; once False it stays False.
        self._direct = True
        self._run_cache = RunCache()  # ended runs' folds (``run_cache``)
        self._folds = FoldCache()  # each stream's last decoded fold (``fold_cache``)

    # -- transactions: ``_write``/``_read`` (``SQLBase``) are provided by each store ---------

    def _lock_migrations(self, tx: Tx) -> None:
        """Keep two processes from migrating at once (SQLite's writer lock does it)."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> SQLStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- schema ----------------------------------------------------------------------------

    def schema_version(self) -> int:
        def get(tx: Tx) -> int:
            self._lock_migrations(tx)
            tx.run(M.VERSION_TABLE[self.dialect])
            return schema_in(tx)

        return self._write(get)

    def _pending_kept(self) -> bool:
        """Whether the schema keeps uploads whole (``upload_blocks``); see ``_direct``."""
        if self._direct:
            self._direct = not self._read(keeps_pending)
        return not self._direct

    def migrate(self, target: int | None = None) -> None:
        """Apply the migrations not yet applied (up to ``target``, default all)."""
        self._direct = True  # checked again at the next ingest
        M.check_version(self.schema_version())
        for mig in M.MIGRATIONS:
            if target is not None and mig.version > target:
                break

            def step(tx: Tx, mig: M.Migration = mig) -> None:
                self._lock_migrations(tx)
                if schema_in(tx) >= mig.version:
                    return  # another process got there first
                for stmt in M.statements(getattr(mig, self.dialect)):
                    tx.run(stmt)
                if mig.data is not None:
                    mig.data(tx)
                tx.run(
                    "INSERT INTO schema_version (version, name, applied) VALUES (?, ?, ?)",
                    (mig.version, mig.name, time.time()),
                )

            self._write(step)
        self._run_cache.clear()  # a data migration rewrites folds (acked_seq unchanged)

    # -- write -----------------------------------------------------------------------------

    def ingest(
        self,
        batches: Sequence[tuple[StreamId, Sequence[R.AnyRecord]]],
        secrets: Sequence[str | None] | None = None,
    ) -> dict[StreamId, int]:
        merged: dict[StreamId, list[R.AnyRecord]] = {}
        presented: dict[StreamId, list[str | None]] = {}
        for i, (key, recs) in enumerate(batches):
            merged.setdefault(key, []).extend(recs)
            if secrets is not None:
                presented.setdefault(key, []).append(secrets[i])
        out: dict[StreamId, int] = {}
        todo = []
        self._ensure_streams([k for k, recs in merged.items() if recs])
        for key, recs in merged.items():
            if not recs:
                out[key] = self.acked(key)
            else:
                todo.append((key, self._ids(key), recs))
        names: set[str] = set()
        for _, _, recs in todo:
            names |= metric_names(recs)
        mids = self._metrics(names)
        self._intern_system_keys([recs for _, _, recs in todo])
        keys = {k: tuple(v) for k, v in presented.items()} if secrets is not None else None
        if todo:
            self._pending_kept()
        out.update(self._apply(todo, mids, keys))
        if todo and not self._direct:
            self.start_compactor()
            self._stored_pending(sum(len(r.values) for _, _, recs in todo for r in recs
                                     if type(r) is R.Metrics))  # fmt: skip
        return out

    def _apply(
        self,
        todo: list[tuple[StreamId, tuple[int, int], list[R.AnyRecord]]],
        mids: dict[str, int],
        keys: dict[StreamId, Presented] | None = None,
    ) -> dict[StreamId, int]:
        """One transaction per stream (a store with one writer may batch them).
        ``keys``: the secrets each stream's uploads presented (None: trusted)."""
        out = {}
        for key, (sid, run), recs in todo:
            got = None if keys is None else keys[key]

            def one(
                tx: Tx,
                sid: int = sid,
                run: int = run,
                recs: list[R.AnyRecord] = recs,
                got: Presented | None = got,
            ) -> int:
                return apply_stream(tx, sid, run, recs, mids, self._system_ids, got, self._direct)

            out[key] = self._write(one)
        return out

    def _ids(self, key: StreamId) -> tuple[int, int]:
        """(stream id, run id) of ``key``, creating the rows (empty) when new."""
        got = self._stream_ids.get(key)
        if got is None:
            self._ensure_streams([key])
            got = self._stream_ids[key]
        return got

    def _ensure_streams(self, keys: Sequence[StreamId]) -> None:
        """Create the run and stream rows of the ``keys`` not seen yet, in one transaction
        (a thousand ranks starting at once are one write of a few statements, not a
        thousand: ``stream_ids``)."""
        new = sorted({k for k in keys if k not in self._stream_ids})
        if not new:
            return

        def ensure(tx: Tx) -> list[tuple[int, int]]:
            return ensure_stream_rows(tx, new)

        for key, ids in zip(new, self._write(ensure)):
            self._stream_ids[key] = ids

    def _metrics(self, names: set[str]) -> dict[str, int]:
        missing = sorted(n for n in names if n not in self._metric_ids)
        if missing:

            def intern(tx: Tx) -> list[tuple[Any, ...]]:
                # Sorted inserts: two ingesters adding the same names cannot deadlock.
                tx.many(
                    "INSERT INTO metrics (name) VALUES (?) ON CONFLICT DO NOTHING",
                    [(n,) for n in missing],
                )
                found: list[tuple[Any, ...]] = []
                for a in range(0, len(missing), 500):
                    part = missing[a : a + 500]
                    found += tx.all(
                        f"SELECT id, name FROM metrics WHERE name IN ({marks(len(part))})",
                        part,
                    )
                return found

            for mid, name in self._write(intern):
                self._metric_ids[name] = int(mid)
        return {n: self._metric_ids[n] for n in names}

    def _intern_system_keys(self, batches: Sequence[Sequence[R.AnyRecord]]) -> None:
        """Intern the system key names of a batch in their own small transaction, before
        the data transaction (as metric names are), so that cached ids are committed."""
        names: set[str] = set()
        for recs in batches:
            names |= rank_health.system_names(recs)
        missing = sorted(n for n in names if n not in self._system_ids)
        if missing:
            got = self._write(lambda tx: rank_health.intern_system_keys(tx, missing))
            self._system_ids.update(got)

    # -- reads -----------------------------------------------------------------------------

    def acked(self, key: StreamId) -> int:
        row = self._read(
            lambda tx: tx.one(
                "SELECT s.acked_seq FROM streams s JOIN runs r ON r.id = s.run "
                "WHERE r.project = ? AND r.run_id = ? AND s.label = ? AND s.incarnation = ?",
                (key.project, key.run_id, key.label, key.incarnation),
            )
        )
        return int(row[0]) if row else -1

    def projects(self) -> list[str]:
        rows = self._read(
            lambda tx: tx.all(
                "SELECT DISTINCT r.project FROM runs r JOIN streams s ON s.run = r.id "
                f"WHERE s.acked_seq >= 0{self.live_runs_sql(tx)} ORDER BY r.project"
            )
        )
        return [r[0] for r in rows]

    def list_runs(self, query: RunQuery) -> tuple[list[RunInfo], int]:
        runs.check_sort(query.sort)
        if query.project is not None and self._read(edits_ready):
            return self.list_runs_indexed(query)  # one project: its run index (run_filters)

        def read(tx: Tx) -> tuple[list[RunInfo], int]:
            sql = (
                f"SELECT r.project, r.run_id, {runs.STREAM_COLS} FROM streams s "
                f"JOIN runs r ON r.id = s.run WHERE s.acked_seq >= 0{self.live_runs_sql(tx)}"
            )
            params: list[Any] = []
            if query.project is not None:
                sql += " AND r.project = ?"
                params.append(query.project)
            grouped: dict[tuple[str, str], list[Any]] = {}
            for row in tx.all(sql, params):
                grouped.setdefault((row[0], row[1]), []).append(runs.stream_facts(row[2:]))
            now = time.time()
            edits = edits_of_project(tx, query.project)
            light = [
                apply_edits(
                    runs.run_info(
                        p, r, s, self.crash_timeout, now, full=False, local_pids=self.local_pids
                    ),
                    edits.get((p, r), []),
                )
                for (p, r), s in grouped.items()
            ]
            page, total = runs.select(light, query)
            return [self._run(tx, r.project, r.id, now) or r for r in page], total

        return self._read(read)

    def get_run(self, project: str, run_id: str) -> RunInfo | None:
        """The run, or None when unknown or deleted (in the trash: ``trashed_runs``)."""

        def read(tx: Tx) -> RunInfo | None:
            if self._trash(tx) and tx.one(
                "SELECT 1 FROM runs WHERE project = ? AND run_id = ? AND deleted_at IS NOT NULL",
                (project, run_id),
            ):
                return None
            return self._run(tx, project, run_id, time.time())

        return self._read(read)

    def _run(self, tx: Tx, project: str, run_id: str, now: float) -> RunInfo | None:
        # An ended run's fold is kept while none of its streams changes (``run_cache``):
        # a 1,024-rank run's page reads it for every chart's band.
        count, ids, seqs = tx.one(FINGERPRINT_SQL, (project, run_id)) or (0, 0, 0)
        if not count:
            return None
        mark: Fingerprint = (int(count), int(ids), int(seqs))
        info = self._run_cache.get(project, run_id, mark)
        if info is None:
            rows = tx.all(
                f"SELECT s.id, s.fold, {runs.STREAM_COLS} FROM streams s JOIN runs r "
                "ON r.id = s.run WHERE r.project = ? AND r.run_id = ? AND s.acked_seq >= 0",
                (project, run_id),
            )
            if not rows:
                return None
            folds = self._folds
            streams = [runs.stream_facts(r[2:], folds.decode(int(r[0]), r[1])) for r in rows]
            info = runs.run_info(
                project, run_id, streams, self.crash_timeout, now, local_pids=self.local_pids
            )
            if len(rows) == mark[0]:  # the same streams the fingerprint counted
                self._run_cache.put(project, run_id, mark, info)
        return apply_edits(info, edits_of_run(tx, project, run_id))

    def _runs(
        self,
        tx: Tx,
        project: str,
        run_ids: Sequence[str],
        now: float,
        pks: Sequence[int] | None = None,
    ) -> dict[str, RunInfo]:
        """``_run`` of many runs of a project in two queries (their streams, the
        project's edits), by run id; a run without streams is left out. ``pks``: the
        same runs' row ids, when the caller has them: their streams are then found by
        the streams' own index (whatever a planner estimates of a freshly filled table)."""
        keys: list[Any] = list(pks) if pks is not None else list(run_ids)
        column = "s.run" if pks is not None else "r.run_id"
        grouped: dict[str, list[Any]] = {}
        for a in range(0, len(keys), 500):
            part = keys[a : a + 500]
            rows = tx.all(
                f"SELECT r.run_id, s.id, s.fold, {runs.STREAM_COLS} FROM streams s "
                "JOIN runs r ON r.id = s.run WHERE r.project = ? AND s.acked_seq >= 0 "
                f"AND {column} IN ({marks(len(part))})",
                (project, *part),
            )
            for row in rows:
                facts = runs.stream_facts(row[3:], self._folds.decode(int(row[1]), row[2]))
                grouped.setdefault(str(row[0]), []).append(facts)
        edits = edits_of_project(tx, project) if grouped else {}
        return {
            rid: apply_edits(
                runs.run_info(
                    project, rid, streams, self.crash_timeout, now, local_pids=self.local_pids
                ),
                edits.get((project, rid), []),
            )
            for rid, streams in grouped.items()
        }

    def _streams(self, tx: Tx, project: str, run_id: str) -> list[tuple[int, int, str, int]]:
        """(stream id, run id, label, incarnation) of a run's non-empty streams."""
        return [
            (int(a), int(b), c, int(d))
            for a, b, c, d in tx.all(
                "SELECT s.id, s.run, s.label, s.incarnation FROM streams s "
                "JOIN runs r ON r.id = s.run "
                "WHERE r.project = ? AND r.run_id = ? AND s.acked_seq >= 0 "
                "ORDER BY s.label, s.incarnation",
                (project, run_id),
            )
        ]

    def _metric_id(self, tx: Tx, name: str) -> int | None:
        if name in self._metric_ids:
            return self._metric_ids[name]
        row = tx.one("SELECT id FROM metrics WHERE name = ?", (name,))
        return None if row is None else int(row[0])

    def metric_keys(self, project: str, run_id: str) -> list[str]:
        def read(tx: Tx, pending: PendingView) -> list[str]:
            names = [
                str(r[0])
                for r in tx.all(
                    "SELECT DISTINCT m.name FROM series x JOIN streams s ON s.id = x.stream "
                    "JOIN runs r ON r.id = s.run JOIN metrics m ON m.id = x.metric "
                    "WHERE r.project = ? AND r.run_id = ? ORDER BY m.name",
                    (project, run_id),
                )
            ]
            more = set(query.metric_names(tx, pending.logged()).values()) - set(names)
            return sorted([*names, *more]) if more else names

        return self._read_merged(project, run_id, read)

    def series(
        self,
        project: str,
        run_id: str,
        key: str,
        *,
        labels: Sequence[str] | None = None,
        x: XAxis = "step",
        lo: float | None = None,
        hi: float | None = None,
        max_points: int = 2000,
    ) -> list[Series]:
        _check_axis(x, max_points)

        def read(tx: Tx, pending: PendingView) -> list[Series]:
            metric = self._metric_id(tx, key)
            if metric is None:
                return []
            by_label: dict[str, list[int]] = {}
            for sid, _run, label, _inc in self._streams(tx, project, run_id):
                if labels is None or label in labels:
                    by_label.setdefault(label, []).append(sid)
            out = [
                query.series_of(tx, label, sids, metric, x, lo, hi, max_points, pending)
                for label, sids in by_label.items()
            ]
            return [s for s in out if s.x]

        return self._read_merged(project, run_id, read)

    def band(
        self,
        project: str,
        run_id: str,
        key: str,
        *,
        x: XAxis = "step",
        lo: float | None = None,
        hi: float | None = None,
        max_points: int = 2000,
    ) -> Band:
        _check_axis(x, max_points)

        def read(tx: Tx, pending: PendingView) -> Band:
            metric = self._metric_id(tx, key)
            run = tx.one("SELECT id FROM runs WHERE project = ? AND run_id = ?", (project, run_id))
            if metric is None or run is None:
                return Band([], [], [], [], [], [], [])
            mine = pending.agg(metric)
            return query.band_of(tx, int(run[0]), metric, x, lo, hi, max_points, mine)

        return self._read_merged(project, run_id, read)

    def cross_rank_last(
        self, project: str, run_id: str, upto: int | None = None
    ) -> dict[str, CrossRankValue]:
        def read(tx: Tx, pending: PendingView) -> dict[str, CrossRankValue]:
            run = tx.one("SELECT id FROM runs WHERE project = ? AND run_id = ?", (project, run_id))
            if run is None:
                return {}
            found = query.last_complete_of(tx, int(run[0]), upto, pending)
            return {name: found[i] for i, name in query.metric_names(tx, found).items()}

        return self._read_merged(project, run_id, read)

    def stored_points(self, project: str, run_id: str) -> dict[tuple[str, str], int]:
        """Per (label, metric key), how many points the run holds (a label's
        incarnations together): its chunks' counts, summed in SQL, and its pending
        uploads'. A point stored twice counts twice here,
        while ``history`` (one row per stream and seq) shows it once."""

        def read(tx: Tx, pending: PendingView) -> dict[tuple[str, str], int]:
            rows = tx.all(
                "SELECT s.label, m.name, SUM(c.n) FROM chunks c "
                "JOIN streams s ON s.id = c.stream JOIN runs r ON r.id = s.run "
                "JOIN metrics m ON m.id = c.metric "
                "WHERE r.project = ? AND r.run_id = ? AND s.acked_seq >= 0 "
                "GROUP BY s.label, m.name",
                (project, run_id),
            )
            out = {(str(label), str(name)): int(n) for label, name, n in rows}
            if pending:
                names = query.metric_names(tx, pending.logged())
                labels = {sid: label for sid, _, label, _ in self._streams(tx, project, run_id)}
                for sid, mid in pending.series():
                    if mid in names and sid in labels:
                        key = (labels[sid], names[mid])
                        out[key] = out.get(key, 0) + pending.count(sid, mid)
            return out

        return self._read_merged(project, run_id, read)

    def history(
        self,
        project: str,
        run_id: str,
        keys: Sequence[str] | None = None,
        label: str | None = None,
    ) -> list[dict[str, Any]]:
        if isinstance(keys, str):
            keys = [keys]

        def read(tx: Tx, pending: PendingView) -> list[dict[str, Any]]:
            streams = {
                sid: (lab, inc)
                for sid, _run, lab, inc in self._streams(tx, project, run_id)
                if label is None or lab == label
            }
            if not streams:
                return []
            rows = tx.all(
                "SELECT DISTINCT m.id, m.name FROM series x JOIN metrics m ON m.id = x.metric "
                f"WHERE x.stream IN ({marks(len(streams))})",
                list(streams),
            )
            named = {int(i): str(n) for i, n in rows}
            named.update(query.metric_names(tx, pending.logged(set(streams)) - set(named)))
            wanted = None if keys is None else set(keys)
            metrics = {i: n for i, n in named.items() if wanted is None or n in wanted}
            return query.history_of(tx, streams, metrics, pending)

        return self._read_merged(project, run_id, read)
