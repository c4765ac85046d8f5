"""Store reads of rank health: console pages, system series, step progress and stalls.

Mixed into ``SQLStore`` (it uses the store's transactions and stream lookups); the
tables and series are written by ``rankwise.store.health``. Every read is one
snapshot. A run the store does not know answers ``None`` (the HTTP API's 404); a known
run without console lines or system samples answers empty.

Console pages are keyset- or offset-positioned ranges of an index, in time order (ties
by line id): ``(run, time)`` for the whole run, ``(stream, time)`` for one stream, so the
newest page, the page after a line, and the page at a time cost the same on a log of a
thousand lines or of millions. Counting (``total`` and ``offset``) scans index entries
and a text search scans lines; both are asked for only when wanted.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

import msgspec
import numpy as np

from ..errors import UsageError
from ..health import StreamSteps
from ..stream import records as R
from ..stream.fold import StreamFold
from ..wire.health import ConsoleLine, ConsolePage, StallEvent, SystemSeries
from ..wire.runs import RunInfo, StreamInfo
from . import health as T
from . import query
from . import runs as run_rows
from .chunks import decode_xy
from .pending_view import EMPTY, PendingView
from .sqlbase import SQLBase
from .tx import Tx, marks
from .types import ConsoleQuery

_start_dec = msgspec.msgpack.Decoder(R.StreamStart)
MAX_LIMIT = 10_000
_POSITIONS = ("offset", "after", "before", "at")


class _Stream:
    __slots__ = ("host", "id", "incarnation", "label", "node", "rank", "run")

    def __init__(self, sid: int, run: int, label: str, inc: int, start: bytes | None) -> None:
        st = _start_dec.decode(start) if start else None
        self.id, self.run, self.label, self.incarnation = sid, run, label, inc
        self.rank = st.rank if st else -1
        self.node = st.node_rank if st else -1
        self.host = st.host if st else ""


def _like(text: str) -> str:
    """``text`` as a LIKE pattern matching it anywhere (``\\`` escapes)."""
    return "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def check_console_query(q: ConsoleQuery) -> None:
    """Raises ``UsageError`` naming the fix for a query that cannot be answered."""
    given = [name for name in _POSITIONS if getattr(q, name) is not None]
    if len(given) > 1:
        raise UsageError(f"pass at most one of offset, after, before, at (got {', '.join(given)})")
    if not 1 <= q.limit <= MAX_LIMIT:
        raise UsageError(f"limit={q.limit} must be between 1 and {MAX_LIMIT}")
    if q.offset is not None and q.offset < 0:
        raise UsageError(f"offset={q.offset} must be zero or more")
    if q.stream not in (None, "stdout", "stderr"):
        raise UsageError(f"stream={q.stream!r} is not one of stdout, stderr")
    if q.since is not None and q.until is not None and q.since > q.until:
        raise UsageError(f"from={q.since} is above to={q.until}: pass from <= to")


class HealthReads(SQLBase):
    """Store methods for console lines, system series, step progress and stalls."""

    # -- lookups ---------------------------------------------------------------------------

    def _stream_meta(self, tx: Tx, project: str, run_id: str) -> dict[int, _Stream]:
        return {
            int(sid): _Stream(int(sid), int(run), label, int(inc), start)
            for sid, run, label, inc, start in tx.all(
                "SELECT s.id, s.run, s.label, s.incarnation, s.start FROM streams s "
                "JOIN runs r ON r.id = s.run "
                "WHERE r.project = ? AND r.run_id = ? AND s.acked_seq >= 0 "
                "ORDER BY s.label, s.incarnation",
                (project, run_id),
            )
        }

    # -- console ---------------------------------------------------------------------------

    def console(self, project: str, run_id: str, q: ConsoleQuery) -> ConsolePage | None:
        """A page of the run's console lines (see ``types.ConsoleQuery``)."""
        check_console_query(q)

        def read(tx: Tx) -> ConsolePage | None:
            meta = self._stream_meta(tx, project, run_id)
            if not meta:
                return None
            if self.dialect == "postgres":
                # Pages come in index order; a plan that sorts the whole run instead (what
                # statistics not yet analysed after a burst of lines suggest) is never right.
                tx.run("SET LOCAL enable_sort = off")
                tx.run("SET LOCAL enable_bitmapscan = off")
            run = next(iter(meta.values())).run
            sids = list(meta)
            # Pages scan (run, time) with the filters; counts use (stream, time) when the
            # streams are filtered (one stream: its own index for pages too).
            cond, params = ["run = ?"], [run]
            ccond, cparams = ["run = ?"], [run]
            if q.labels or q.nodes:
                labels, nodes = set(q.labels), set(q.nodes)
                sids = [s.id for s in meta.values() if s.label in labels or s.node in nodes]
                if not sids:
                    n = 0 if q.count else None
                    return ConsolePage(lines=[], total=n, offset=n)
                if len(sids) == 1:
                    cond, params = ["stream = ?"], [sids[0]]
                    ccond, cparams = cond[:], params[:]
                elif len(sids) < len(meta):
                    cond.append(f"stream IN ({marks(len(sids))})")
                    params += sids
                    ccond, cparams = [cond[-1]], sids[:]
            extra: list[str] = []
            args: list[Any] = []
            err = None if q.stream is None else T.STDERR if q.stream == "stderr" else T.STDOUT
            if err is not None:
                extra.append("err = ?")
                args.append(err)
            if q.since is not None:
                extra.append("time >= ?")
                args.append(q.since)
            if q.until is not None:
                extra.append("time <= ?")
                args.append(q.until)
            if q.q:
                op = "ILIKE" if self.dialect == "postgres" else "LIKE"
                extra.append(f"text {op} ? ESCAPE '\\'")
                args.append(_like(q.q))
            where = " AND ".join(cond + extra)
            params += args
            cwhere = " AND ".join(ccond + extra)
            cparams += args

            def count(more: str = "", more_args: Sequence[Any] = ()) -> int:
                row = tx.one(
                    f"SELECT COUNT(*) FROM console WHERE {cwhere}{more}", [*cparams, *more_args]
                )
                return int(row[0]) if row else 0

            def total_count() -> int:
                if q.q or q.since is not None or q.until is not None:
                    return count()
                # Without a search, the per-stream counters kept at ingest answer at once.
                sql = f"SELECT SUM(n) FROM console_counts WHERE stream IN ({marks(len(sids))})"
                more = [] if err is None else [err]
                row = tx.one(sql + (" AND err = ?" if more else ""), [*sids, *more])
                return int(row[0]) if row and row[0] is not None else 0

            cols = "SELECT id, stream, time, err, text FROM console WHERE "
            asc, desc = " ORDER BY time, id LIMIT ?", " ORDER BY time DESC, id DESC LIMIT ?"
            offset: int | None = None
            if q.offset is not None:
                rows = tx.all(cols + where + asc + " OFFSET ?", [*params, q.limit, q.offset])
                offset = q.offset
            elif q.at is not None:
                rows = tx.all(cols + where + " AND time >= ?" + asc, [*params, q.at, q.limit])
                if q.count:
                    offset = count(" AND time < ?", [q.at])
            elif q.after is not None or q.before is not None:
                pivot_id = q.after if q.after is not None else q.before
                got = tx.one("SELECT time FROM console WHERE id = ? AND run = ?", (pivot_id, run))
                if got is None:
                    raise UsageError(f"no console line {pivot_id} in run {run_id!r}")
                pivot = [float(got[0]), pivot_id]
                if q.after is not None:
                    rows = tx.all(
                        cols + where + " AND (time, id) > (?, ?)" + asc, [*params, *pivot, q.limit]
                    )
                    if q.count:
                        offset = count(" AND (time, id) <= (?, ?)", pivot)
                else:
                    rows = tx.all(
                        cols + where + " AND (time, id) < (?, ?)" + desc, [*params, *pivot, q.limit]
                    )[::-1]
                    if q.count:
                        offset = count(" AND (time, id) < (?, ?)", pivot) - len(rows)
            else:  # the newest lines: a live tail
                rows = tx.all(cols + where + desc, [*params, q.limit])[::-1]
            total: int | None = None
            tail = q.offset is None and q.at is None and q.after is None and q.before is None
            short = q.count and len(rows) < q.limit
            if short and tail:  # the tail query saw every match: nothing to count
                total = len(rows)
            elif short and q.offset is not None and (q.offset == 0 or rows):
                total = q.offset + len(rows)  # so did a last page
            elif q.count:
                total = total_count()
            if offset is None and total is not None and q.after is None and q.before is None:
                offset = total - len(rows)  # the tail
            lines = []
            for lid, sid, t, err, text in rows:
                s = meta[int(sid)]
                lines.append(
                    ConsoleLine(
                        id=int(lid),
                        label=s.label,
                        rank=s.rank,
                        node=s.node,
                        stream=T.STREAM_NAMES[int(err)],
                        time=float(t),
                        text=text,
                    )
                )
            return ConsolePage(lines=lines, total=total, offset=offset)

        result: ConsolePage | None = self._read(read)
        return result

    # -- system ----------------------------------------------------------------------------

    def _system_series_ids(
        self, tx: Tx, sids: Sequence[int], pending: PendingView = EMPTY
    ) -> list[tuple[int, int, str]]:
        """(stream id, metric id, key) of the system series of streams ``sids``, those
        with only pending points too."""
        out: list[tuple[int, int, str]] = []
        for a in range(0, len(sids), 500):
            part = list(sids[a : a + 500])
            out += [
                (int(sid), int(mid), name)
                for sid, mid, name in tx.all(
                    "SELECT x.stream, x.metric, k.name FROM series x "
                    "JOIN system_keys k ON k.id = -x.metric "
                    f"WHERE x.stream IN ({marks(len(part))}) AND x.metric < 0",
                    part,
                )
            ]
        wanted, have = set(sids), {(s, m) for s, m, _ in out}
        more = [(s, m) for s, m in pending.series() if m < 0 and s in wanted and (s, m) not in have]
        if more:
            ids = sorted({-m for _, m in more})
            names = {
                -int(i): str(n)
                for i, n in tx.all(
                    f"SELECT id, name FROM system_keys WHERE id IN ({marks(len(ids))})", ids
                )
            }
            out += [(s, m, names[m]) for s, m in more if m in names]
        return out

    def system_keys(self, project: str, run_id: str) -> list[str] | None:
        """The system keys the run's streams sampled (``node/cpu_percent``,
        ``gpu/0/util_percent``, ...), sorted; None for an unknown run."""

        def read(tx: Tx, pending: PendingView) -> list[str] | None:
            meta = self._stream_meta(tx, project, run_id)
            if not meta:
                return None
            return sorted({k for _, _, k in self._system_series_ids(tx, list(meta), pending)})

        result: list[str] | None = self._read_merged(project, run_id, read)
        return result

    def system_series(
        self,
        project: str,
        run_id: str,
        chart: str,
        *,
        lo: float | None = None,
        hi: float | None = None,
        max_points: int = 2000,
    ) -> list[SystemSeries] | None:
        """Every line of one system chart (``health.quantity``: ``gpu/util_percent``
        holds ``gpu/<i>/util_percent`` of every node), x = time, M4-downsampled to at most
        ``max_points`` per line. None for an unknown run."""
        if max_points < 1:
            raise UsageError(f"max_points={max_points} must be at least 1")

        def read(tx: Tx, pending: PendingView) -> list[SystemSeries] | None:
            meta = self._stream_meta(tx, project, run_id)
            if not meta:
                return None
            # One line per (label, stored key): a label's incarnations continue its line.
            lines: dict[tuple[str, str], tuple[int, list[int]]] = {}
            for sid, mid, key in self._system_series_ids(tx, list(meta), pending):
                if T.quantity(key)[0] == chart:
                    lines.setdefault((meta[sid].label, key), (mid, []))[1].append(sid)
            by_label = {s.label: s for s in meta.values()}  # the latest incarnation
            out = []
            for (label, key), (mid, sids) in lines.items():
                got = query.series_of(tx, label, sids, mid, "time", lo, hi, max_points, pending)
                s, gpu = by_label[label], T.quantity(key)[1]
                out.append(
                    SystemSeries(
                        key=key,
                        name=_line_name(key, s, gpu),
                        label=label,
                        rank=s.rank,
                        node=s.node,
                        host=s.host,
                        gpu=gpu,
                        x=got.x,
                        y=got.y,
                        downsampled=got.downsampled,
                    )
                )
            out.sort(key=lambda x: (x.node, x.gpu if x.gpu is not None else -1, x.rank, x.key))
            return out

        result: list[SystemSeries] | None = self._read_merged(project, run_id, read)
        return result

    # -- health ----------------------------------------------------------------------------

    def health_streams(
        self, project: str, run_id: str, window: float, now: float | None = None
    ) -> tuple[RunInfo, list[StreamSteps], float] | None:
        """What ``rankwise.health.assess`` needs of the run: its latest incarnation of
        each label with the step points that matter for a window of ``window`` seconds
        ending at ``now`` (the first, the last before the window, every one inside it),
        its state and open stall; with the run and the ``now`` to assess at (the time
        for a running run, else its last record's). None for an unknown run."""

        def read(tx: Tx, pending: PendingView) -> tuple[RunInfo, list[StreamSteps], float] | None:
            rows = tx.all(
                f"SELECT s.id, s.fold, {run_rows.STREAM_COLS} FROM streams s "
                "JOIN runs r ON r.id = s.run "
                "WHERE r.project = ? AND r.run_id = ? AND s.acked_seq >= 0 "
                "ORDER BY s.label, s.incarnation",
                (project, run_id),
            )
            if not rows:
                return None
            wall = time.time()
            ids: dict[tuple[str, int], int] = {}
            folds: dict[tuple[str, int], StreamFold] = {}
            facts = []
            for row in rows:
                fold = self._folds.decode(int(row[0]), row[1])
                key = (row[2], int(row[3]))  # label, incarnation
                ids[key] = int(row[0])
                folds[key] = fold
                facts.append(run_rows.stream_facts(row[2:], fold))
            run = run_rows.run_info(
                project, run_id, facts, self.crash_timeout, wall, local_pids=self.local_pids
            )
            at = now
            if at is None:
                seen = [s.last_seen for s in run.streams if s.last_seen is not None]
                at = wall if run.state == "running" else max(seen, default=wall)
            latest: dict[str, StreamInfo] = {}
            for s in run.streams:  # sorted by label then incarnation: the latest wins
                latest[s.label] = s
            out = []
            since: dict[int, float] = {}
            for s in latest.values():
                # Where the stream's window ends, as rankwise.health measures it.
                end = at if s.state == "running" else min(at, s.last_seen or at)
                since[ids[(s.label, s.incarnation)]] = end - window
            windows = _step_windows(tx, since, pending)
            for s in latest.values():
                key = (s.label, s.incarnation)
                out.append(
                    StreamSteps(
                        label=s.label,
                        points=windows[ids[key]],
                        rank=s.rank,
                        node=s.node,
                        host=s.host,
                        state=s.state,
                        last_seen=s.last_seen,
                        stall=folds[key].stall,
                    )
                )
            return run, out, at

        result: tuple[RunInfo, list[StreamSteps], float] | None = self._read_merged(
            project, run_id, read
        )
        return result

    def stalls(
        self, project: str, run_id: str, labels: Sequence[str] = (), limit: int = 100
    ) -> list[StallEvent] | None:
        """The watchdog's stall reports (and the clearing ones), newest first."""

        def read(tx: Tx, pending: PendingView) -> list[StallEvent] | None:
            meta = self._stream_meta(tx, project, run_id)
            if not meta:
                return None
            sids = [s.id for s in meta.values() if not labels or s.label in labels]
            if not sids:
                return []
            rows = tx.all(
                "SELECT stream, time, idle, cleared, location, stacks FROM stalls "
                f"WHERE stream IN ({marks(len(sids))}) ORDER BY time DESC, seq DESC LIMIT ?",
                [*sids, limit],
            )
            out = []
            progress: dict[int, list[tuple[int, float]]] = {}
            for sid, t, idle, cleared, where, stacks in rows:
                s = meta[int(sid)]
                began = float(t) - (0.0 if cleared else float(idle))
                if int(sid) not in progress:  # one read per stream, from its first stall on
                    first = min(float(r[1]) - float(r[2]) for r in rows if r[0] == sid)
                    progress[int(sid)] = _step_window(tx, int(sid), first, pending)
                out.append(
                    StallEvent(
                        label=s.label,
                        incarnation=s.incarnation,
                        rank=s.rank,
                        time=float(t),
                        idle_seconds=float(idle),
                        where=where,
                        cleared=bool(cleared),
                        stacks=json.loads(stacks),
                        step=_step_at(progress[int(sid)], began),
                    )
                )
            return out

        result: list[StallEvent] | None = self._read_merged(project, run_id, read)
        return result


def _line_name(key: str, s: _Stream, gpu: int | None) -> str:
    if key.startswith("proc/"):
        who = f"rank {s.rank}" if s.rank >= 0 else s.label
    else:
        who = f"node {s.node}" if s.node >= 0 else s.label
    return who if gpu is None else f"{who} · gpu {gpu}"


def _step_at(points: list[tuple[int, float]], t: float) -> int | None:
    """The highest step logged at or before ``t`` (None: none yet, or no progress kept)."""
    steps = [step for step, when in points if when <= t]
    return max(steps) if steps else None


def _step_window(
    tx: Tx, sid: int, since: float, pending: PendingView = EMPTY
) -> list[tuple[int, float]]:
    """A stream's step points: the first, the last before ``since``, all from ``since``
    (the pending ones after the stored ones: they are the stream's latest)."""
    return _step_windows(tx, {sid: since}, pending)[sid]


def _step_windows(
    tx: Tx, since: dict[int, float], pending: PendingView = EMPTY
) -> dict[int, list[tuple[int, float]]]:
    """``_step_window`` of many streams (stream id -> its ``since``): a query for their
    chunks' time ranges and one for the chunks wanted, per 500 streams or chunks."""
    sids = sorted(since)
    meta: dict[int, list[tuple[int, float, float]]] = {}
    for a in range(0, len(sids), 500):
        part = sids[a : a + 500]
        for sid, cid, t_lo, t_hi in tx.all(
            "SELECT stream, id, t_lo, t_hi FROM chunks "
            f"WHERE stream IN ({marks(len(part))}) AND metric = ? ORDER BY stream, id",
            [*part, T.STEPS],
        ):
            meta.setdefault(int(sid), []).append((int(cid), float(t_lo), float(t_hi)))
    ids: list[int] = []
    for sid, rows in meta.items():
        wanted = {rows[0][0]}
        before = None
        for cid, t_lo, t_hi in rows:
            if t_hi >= since[sid]:
                wanted.add(cid)
            if t_lo < since[sid]:
                before = cid  # chunks are in seq order; the last that starts before
        if before is not None:
            wanted.add(before)
        ids += wanted
    ids.sort()
    cols: dict[int, tuple[list[np.ndarray], list[np.ndarray]]] = {}
    for a in range(0, len(ids), 500):
        part = ids[a : a + 500]
        for sid, n, xs, ys, kind in tx.all(
            f"SELECT stream, n, xs, ys, kind FROM chunks WHERE id IN ({marks(len(part))}) "
            "ORDER BY id",
            part,
        ):
            step, t, _ = decode_xy(int(n), xs, ys, kind)
            got = cols.setdefault(int(sid), ([], []))
            got[0].append(step)
            got[1].append(t)
    out: dict[int, list[tuple[int, float]]] = {}
    for sid in sids:
        steps, times = cols.get(sid, ([], []))
        late = pending.points(sid, T.STEPS)
        if late is not None:
            steps.append(late.step)
            times.append(late.time)
        if not steps:
            out[sid] = []
            continue
        step, t = np.concatenate(steps), np.concatenate(times)
        inside = np.flatnonzero(t >= since[sid])
        early = np.flatnonzero(t < since[sid])
        keep = sorted({0, *early[-1:].tolist(), *inside.tolist()})
        out[sid] = list(zip(step[keep].tolist(), t[keep].tolist()))
    return out
