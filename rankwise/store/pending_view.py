"""Reads merge what is not yet compacted: a run's ``upload_blocks`` rows, in memory.

An acknowledged upload is one ``upload_blocks`` row until the compactor folds it into the
series' chunks and the run's aggregate blocks (``rankwise.store.compact``). A read never
writes to see it: it loads the run's pending rows inside its own snapshot (the same one
its chunk and aggregate reads see, so a row is either still pending there or already
folded, never both nor neither) and merges them with what is compacted:

* points (series, history, system lines, step progress, heatmap cells) are the stored
  chunks' followed by the pending ones, per (stream, metric), in seq order;
* cross-rank aggregates (band, last values) are the stored blocks ``Agg.merge``\\ d with
  the pending points' own (``PendingView.agg``, and ``lasts`` for every metric's last
  step at once), exactly as compaction would store them.

``BlockCache`` keeps, for the 16 runs read last, each stream's pending rows: those no
read has needed yet as stored bytes (about 0.8 KB an upload of 50 metrics), the others
decoded into segments (``_Seg``): the groups of a stream logged alike (a loop logs the
same dict every step) share one seq, step, time and weight column, and each kind's
values are one matrix with a row per series, so that taking in an upload costs a few
numpy calls whatever its number of metrics, and a series is a row of it. A read lists
the run's pending rows (``id, stream, seq_lo``, in id order); on SQLite, while the newest
row it last saw is still there and as many rows are up to it, only the rows after it
(``_added``: with one writer an id is one more than the largest when stored). When the
listing is the last one plus new rows (the usual case), only those are fetched and
appended, and nothing new is nothing to do: the run's ``PendingView`` is kept with what
it worked out (which series each stream holds). Otherwise
each stream's held rows are matched against the listing, the ones a compaction took are
cut off the front by seq, and a stream that does not line up (a read of an older
snapshot) is read anew. Rows never change once written, so what is kept is always what
the snapshot holds; rows are told apart by ``(seq_lo, id)``, so an id SQLite reuses
after a delete is not mistaken for the row it replaced.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

import numpy as np

from .aggregate import Agg
from .chunks import _DTYPE, Points
from .pending import block_groups
from .tx import Tx, marks

_Key = tuple[int, int]  # a pending row's (seq_lo, id): its place in the stream, and itself
MAX_RUNS = 16  # runs whose pending points one process keeps
# What a group of a block logged: each series' (id, aggregated, kind), and whether the
# records carried weights. Groups alike (a loop logs the same dict every step) share a
# ``_Seg``.
_Sig = tuple[tuple[tuple[int, bool, str], ...], bool]


def _where_of(sig: _Sig) -> dict[int, tuple[str, int]]:
    """Each series of ``sig``: (its kind, its row in that kind's value matrix)."""
    rows: dict[str, int] = {}
    where = {}
    for sid, _, kind in sig[0]:
        where[sid] = (kind, rows.get(kind, 0))
        rows[kind] = rows.get(kind, 0) + 1
    return where


class _Seg:
    """A stream's pending points of the groups logged alike (``_Sig``): the seq, step,
    time and weight columns once, and the values of each kind as one matrix with a row
    per series, so that appending rows costs a few numpy calls, not a few per series."""

    __slots__ = ("mats", "seq", "step", "time", "weight", "where")

    def __init__(
        self,
        sig: _Sig,
        cols: tuple[np.ndarray, ...],
        mats: dict[str, np.ndarray],
        where: dict[int, tuple[str, int]] | None = None,
    ) -> None:
        self.seq, self.step, self.time, self.weight = cols
        self.mats = mats
        self.where = _where_of(sig) if where is None else where

    @classmethod
    def of(cls, sig: _Sig, groups: list[Any]) -> _Seg:
        """The segment of ``groups`` (decoded block groups with this ``sig``)."""
        seq = np.frombuffer(b"".join([g[0] for g in groups]), np.int64)
        step = np.frombuffer(b"".join([g[1] for g in groups]), np.int64)
        time = np.frombuffer(b"".join([g[2] for g in groups]), np.float64)
        if sig[1]:
            weight = np.frombuffer(b"".join([g[3] for g in groups]), np.float64)
        else:
            weight = np.full(len(seq), np.nan)
        mats: dict[str, np.ndarray] = {}
        for kind in sorted({k for _, _, k in sig[0]}):
            idx = [i for i, (_, _, k) in enumerate(sig[0]) if k == kind]
            per: list[np.ndarray] = [
                np.frombuffer(b"".join([g[4][i][3] for i in idx]), _DTYPE[kind]).reshape(
                    len(idx), -1
                )
                for g in groups
            ]
            mats[kind] = per[0] if len(per) == 1 else np.concatenate(per, axis=1)
        return cls(sig, (seq, step, time, weight), mats)

    def then(self, sig: _Sig, other: _Seg) -> _Seg:
        """This segment followed by ``other`` (logged alike, later)."""
        cols = tuple(
            np.concatenate([getattr(self, c), getattr(other, c)])
            for c in ("seq", "step", "time", "weight")
        )
        mats = {k: np.concatenate([m, other.mats[k]], axis=1) for k, m in self.mats.items()}
        return _Seg(sig, cols, mats, self.where)

    def since(self, sig: _Sig, first: int) -> _Seg | None:
        """The points from seq ``first`` on (None: none)."""
        i = int(np.searchsorted(self.seq, first))
        if i >= len(self.seq):
            return None
        if not i:
            return self
        cols = (self.seq[i:], self.step[i:], self.time[i:], self.weight[i:])
        return _Seg(sig, cols, {k: m[:, i:] for k, m in self.mats.items()}, self.where)

    def points(self, sid: int) -> Points | None:
        got = self.where.get(sid)
        if got is None:
            return None
        kind, row = got
        return Points(self.seq, self.step, self.time, self.mats[kind][row], self.weight, kind)


class _Tail:
    """One stream's pending rows (``BlockCache``): the rows no read has needed yet as
    stored (``raw``), the others' points in segments (``_Seg``)."""

    __slots__ = ("_lock", "_memo", "agg", "keys", "raw", "segs")

    def __init__(
        self,
        keys: list[_Key],
        raw: tuple[bytes, ...],
        segs: dict[_Sig, _Seg],
        agg: frozenset[int],
    ) -> None:
        self.keys = keys  # the rows held, in seq order
        self.raw = raw  # the last of them, not decoded yet
        self.segs = segs
        self.agg = agg  # the metric ids that aggregate across ranks
        self._lock = threading.Lock()
        self._memo: dict[int, Points | None] = {}  # ``points`` of the segments as they are

    def decoded(self) -> dict[_Sig, _Seg]:
        """The segments, the raw rows decoded into them first."""
        with self._lock:
            if self.raw:
                batches: dict[_Sig, list[Any]] = {}
                for data in self.raw:
                    for g in block_groups(data):
                        sig = (tuple((e[0], e[1], e[2]) for e in g[4]), g[3] is not None)
                        batches.setdefault(sig, []).append(g)
                segs = dict(self.segs)
                agg = set(self.agg)
                for sig, groups in batches.items():
                    fresh = _Seg.of(sig, groups)
                    old = segs.get(sig)
                    segs[sig] = fresh if old is None else old.then(sig, fresh)
                    agg.update(sid for sid, aggregated, _ in sig[0] if aggregated)
                self.segs, self.agg, self.raw = segs, frozenset(agg), ()
                self._memo = {}
            return self.segs

    def metrics(self) -> set[int]:
        return {sid for seg in self.decoded().values() for sid in seg.where}

    def points(self, sid: int) -> Points | None:
        """The series' pending points in seq order (None: none)."""
        if not self.raw:
            memo = self._memo
            if sid in memo:
                return memo[sid]
        segs = self.decoded()
        memo = self._memo
        got = [p for seg in segs.values() if (p := seg.points(sid)) is not None]
        memo[sid] = out = self._joined(got)
        return out

    @staticmethod
    def _joined(got: list[Points]) -> Points | None:
        if len(got) <= 1:
            return got[0] if got else None
        joined = Points.concat(got)  # logged in more than one way: back in seq order
        order = np.argsort(joined.seq, kind="stable")
        return Points(
            joined.seq[order],
            joined.step[order],
            joined.time[order],
            joined.value[order],
            joined.weight[order],
            joined.kind,
        )

    def after(self, drop: int, rows: list[tuple[_Key, bytes]]) -> _Tail:
        """This tail less its first ``drop`` rows' points, plus ``rows`` (later ones)."""
        keys = self.keys[drop:]
        raw: tuple[bytes, ...] = ()
        segs: dict[_Sig, _Seg] = {}
        if drop and keys:  # rare: a compaction took some of the stream's rows, not all
            first = keys[0][0]  # a row's points have seqs from its seq_lo on
            for sig, seg in self.decoded().items():
                cut = seg.since(sig, first)
                if cut is not None:
                    segs[sig] = cut
        elif not drop:
            with self._lock:  # ``raw`` and ``segs`` change together (``decoded``)
                segs, raw = self.segs, self.raw
        new = tuple(d for _, d in rows)
        return _Tail(keys + [k for k, _ in rows], raw + new, segs, self.agg)


_EMPTY_TAIL = _Tail([], (), {}, frozenset())


def _dropped(held: list[_Key], wanted: list[_Key]) -> int:
    """How many of the ``held`` rows (a stream's, in seq order) to drop so that the rest
    begin ``wanted``: those compacted away since (all of them when the rest do not line
    up, as after a read of an older snapshot: the stream is then read anew)."""
    if not held or not wanted:
        return len(held)
    lo, hi = 0, len(held)
    while lo < hi:  # bisect for wanted[0]
        mid = (lo + hi) // 2
        if held[mid] < wanted[0]:
            lo = mid + 1
        else:
            hi = mid
    rest = len(held) - lo
    return lo if held[lo:] == wanted[:rest] else len(held)


def _by_stream(listed: list[Any]) -> dict[int, list[_Key]]:
    """(id, stream, seq_lo) rows as each stream's keys, in seq order."""
    out: dict[int, list[_Key]] = {}
    for i, stream, lo in listed:
        out.setdefault(int(stream), []).append((int(lo), int(i)))
    for keys in out.values():
        keys.sort()
    return out


def _listing(tx: Tx, run: int) -> list[Any]:
    """Every pending row of the run: (id, stream, seq_lo), in id order."""
    return tx.all("SELECT id, stream, seq_lo FROM upload_blocks WHERE run = ? ORDER BY id", (run,))


def _added(tx: Tx, run: int, last: list[Any]) -> list[Any] | None:
    """The rows stored since ``last`` (the run's listing as a read saw it), when that is
    all that changed; None when it cannot be told so cheaply (nothing seen yet, a
    database of several writers, or rows of ``last`` gone), the run is then listed whole.

    With one writer (SQLite) a row's id is one more than the table's largest when it is
    stored, so while the newest row of ``last`` is still there (the same stream and
    ``seq_lo``: a row, once deleted, never comes back) every row stored since has a larger
    id, and none of ``last`` is gone when as many rows as it held are there up to it. On
    PostgreSQL ids are taken before commit, so a row may appear below one seen before."""
    if not last or tx.for_update:  # ``for_update``: rows can be locked, several writers
        return None
    top, stream, lo = last[-1]
    kept = tx.one(
        "SELECT stream, seq_lo, (SELECT COUNT(*) FROM upload_blocks WHERE run = ? AND id <= ?)"
        " FROM upload_blocks WHERE id = ?",
        (run, top, top),
    )
    if kept is None or (int(kept[0]), int(kept[1]), int(kept[2])) != (stream, lo, len(last)):
        return None
    return tx.all(
        "SELECT id, stream, seq_lo FROM upload_blocks WHERE run = ? AND id > ? ORDER BY id",
        (run, top),
    )


class BlockCache:
    """Each run's pending points as last read, per stream (see the module docstring);
    thread-safe."""

    def __init__(self, max_runs: int = MAX_RUNS) -> None:
        # Per run: the listing last read (id order) and the view of the tails it gave
        # (one view while nothing changes: what it works out once, it keeps).
        self._runs: OrderedDict[int, tuple[list[Any], PendingView]] = OrderedDict()
        self._lock = threading.Lock()
        self._max = max_runs

    def view(self, tx: Tx, run: int) -> PendingView:
        """The run's pending points in ``tx``'s snapshot."""
        with self._lock:
            last, seen = self._runs.get(run, ([], EMPTY))
        fresh = _added(tx, run, last)
        if fresh is not None and not fresh:  # nothing stored or compacted since
            return seen
        listed = last + fresh if fresh is not None else _listing(tx, run)
        if not listed:
            with self._lock:
                self._runs.pop(run, None)
            return EMPTY
        if listed == last:  # nothing stored or compacted since the last read
            return seen
        held = seen._tails
        plan: dict[int, tuple[_Tail, int, list[_Key]]] = {}
        fetch: list[int] = []
        if last and (fresh or listed[: len(last)] == last):  # only new uploads: usual
            for stream, keys in _by_stream(listed[len(last) :]).items():
                tail = held.get(stream) or _EMPTY_TAIL
                if tail.keys and keys[0] <= tail.keys[-1]:
                    plan = {}  # not later than what is held: read it all as below
                    break
                plan[stream] = (tail, 0, keys)
            if plan:
                plan.update((s, (t, 0, [])) for s, t in held.items() if s not in plan)
        if not plan:
            for stream, keys in _by_stream(listed).items():
                tail = held.get(stream) or _EMPTY_TAIL
                drop = _dropped(tail.keys, keys)
                plan[stream] = (tail, drop, keys[len(tail.keys) - drop :])
        for _tail, _drop, new in plan.values():
            fetch += [i for _, i in new]
        data: dict[int, bytes] = {}
        for a in range(0, len(fetch), 500):
            part = fetch[a : a + 500]
            rows = tx.all(
                f"SELECT id, data FROM upload_blocks WHERE id IN ({marks(len(part))})", part
            )
            data.update((int(i), bytes(d)) for i, d in rows)
        now = {
            stream: tail.after(drop, [(k, data[k[1]]) for k in new]) if drop or new else tail
            for stream, (tail, drop, new) in plan.items()
        }
        view = PendingView(now)
        with self._lock:
            self._runs[run] = (listed, view)
            self._runs.move_to_end(run)
            while len(self._runs) > self._max:
                self._runs.popitem(last=False)
        return view


class PendingView:
    """One run's pending points as a read sees them (see the module docstring); a
    stream's rows are decoded when a read first needs one of its series."""

    def __init__(self, tails: dict[int, _Tail]) -> None:
        self._tails = tails
        self._index: tuple[set[int], dict[int, list[int]]] | None = None
        self._order = sorted(tails)

    @classmethod
    def of_run(cls, tx: Tx, run: int, cache: BlockCache | None = None) -> PendingView:
        return (cache or BlockCache(1)).view(tx, run)

    def __bool__(self) -> bool:
        return bool(self._tails)

    def _metrics(self) -> tuple[set[int], dict[int, list[int]]]:
        """(the metric ids that aggregate, each metric's streams): every row decoded."""
        if self._index is None:
            by_metric: dict[int, list[int]] = {}
            agg: set[int] = set()
            for stream in sorted(self._tails):
                tail = self._tails[stream]
                for m in tail.metrics():
                    by_metric.setdefault(m, []).append(stream)
                agg |= tail.agg
            self._index = agg, by_metric
        return self._index

    def series(self) -> list[tuple[int, int]]:
        """Every (stream, metric id) with pending points."""
        return sorted((s, m) for m, streams in self._metrics()[1].items() for s in streams)

    def logged(self, streams: set[int] | None = None) -> set[int]:
        """Ids of logged metrics (not health series) with pending points, of ``streams``
        (default every stream)."""
        agg, by_metric = self._metrics()
        return {
            m
            for m, have in by_metric.items()
            if m in agg and (streams is None or not streams.isdisjoint(have))
        }

    def points(self, stream: int, metric: int) -> Points | None:
        """The stream's pending points of one series, in seq order (None: none)."""
        tail = self._tails.get(stream)
        return None if tail is None else tail.points(metric)

    def count(self, stream: int, metric: int) -> int:
        p = self.points(stream, metric)
        return 0 if p is None else len(p)

    def xs(self, streams: list[int], metric: int, x: str) -> tuple[np.ndarray, np.ndarray]:
        """The pending points of ``streams``' series ``metric``: x (step or time, as
        floats) and value (as floats), the streams' one after the other."""
        got = [p for s in streams if (p := self.points(s, metric)) is not None]
        if not got:
            return np.zeros(0), np.zeros(0)
        xv = [p.step.astype(np.float64) if x == "step" else p.time for p in got]
        return np.concatenate(xv), np.concatenate([p.fvalue() for p in got])

    def _aggregated(self, metric: int) -> list[Points]:
        """Each stream's pending points of ``metric`` when it aggregates across ranks."""
        got = []
        for stream in self._order:
            tail = self._tails[stream]
            p = tail.points(metric)
            if p is not None and len(p) and metric in tail.agg:
                got.append(p)
        return got

    def lasts(self, upto: int | None) -> dict[int, Agg]:
        """Per metric that aggregates across ranks, the cross-rank aggregate of its last
        pending step ``<= upto`` (any step when None) alone; a metric with no such step is
        left out. Every metric at once: each segment's last step is found once for all
        the series logged in it, and the segments logged alike (a loop logs the same dict
        every step, on every rank) are read as one matrix, not series by series. The
        points of a step are taken in stream, then seq order, as a merged read of each
        stream's points gives them."""
        alike: dict[_Sig, _Lasts] = {}
        for stream in self._order:
            for sig, seg in self._tails[stream].decoded().items():
                if not any(aggregated for _, aggregated, _ in sig[0]):
                    continue
                step = seg.step
                ok = step if upto is None else step[step <= upto]
                if ok.shape[0]:
                    at = np.flatnonzero(step == ok.max())
                    alike.setdefault(sig, _Lasts()).add(stream, seg, at)
        found: dict[int, list[tuple[np.ndarray, ...]]] = {}
        for sig, got in alike.items():
            cols, mats = got.joined()
            where = _where_of(sig)
            for sid, aggregated, _ in sig[0]:
                if aggregated:
                    kind, row = where[sid]
                    found.setdefault(sid, []).append((*cols, mats[kind][row]))
        return {sid: _last_of(parts) for sid, parts in found.items()}

    def agg(self, metric: int) -> Agg:
        """The cross-rank aggregate of the metric's pending points, every stream of the
        run together (empty for a series that does not aggregate)."""
        got = self._aggregated(metric)
        if not got:
            return Agg.empty()
        return Agg.from_points(
            np.concatenate([p.step for p in got]),
            np.concatenate([p.fvalue() for p in got]),
            np.concatenate([p.weight for p in got]),
            np.concatenate([p.time for p in got]),
        )


class _Lasts:
    """The points at their last step of the segments logged alike (one ``_Sig``), stream
    after stream: joined into one column each, and one matrix per kind."""

    __slots__ = ("mats", "seq", "step", "stream", "time", "weight")

    def __init__(self) -> None:
        self.stream: list[np.ndarray] = []
        self.step: list[np.ndarray] = []
        self.seq: list[np.ndarray] = []
        self.weight: list[np.ndarray] = []
        self.time: list[np.ndarray] = []
        self.mats: dict[str, list[np.ndarray]] = {}

    def add(self, stream: int, seg: _Seg, at: np.ndarray) -> None:
        self.stream.append(np.full(len(at), stream))
        self.step.append(seg.step[at])
        self.seq.append(seg.seq[at])
        self.weight.append(seg.weight[at])
        self.time.append(seg.time[at])
        for kind, mat in seg.mats.items():
            self.mats.setdefault(kind, []).append(mat[:, at])

    def joined(self) -> tuple[tuple[np.ndarray, ...], dict[str, np.ndarray]]:
        """((stream, step, seq, weight, time), the value matrix of each kind)."""
        cols = tuple(
            np.concatenate(c) for c in (self.stream, self.step, self.seq, self.weight, self.time)
        )
        return cols, {k: np.concatenate(m, axis=1) for k, m in self.mats.items()}


def _last_of(parts: list[tuple[np.ndarray, ...]]) -> Agg:
    """The aggregate of the points at the latest step of ``parts`` (each: stream, step,
    seq, weight, time and value columns), in stream, then seq order."""
    if len(parts) == 1:
        stream, step, seq, weight, time, value = parts[0]
        order = None  # one part: in stream order already, each stream's in seq order
    else:
        stream, step, seq, weight, time, value = (
            np.concatenate([p[i] for p in parts]) for i in range(6)
        )
        order = np.lexsort((seq, stream))
    at = np.flatnonzero(step == step.max())
    if order is not None:
        at = order[np.isin(order, at)]
    return Agg.from_points(step[at], value[at].astype(np.float64), weight[at], time[at])


EMPTY = PendingView({})
