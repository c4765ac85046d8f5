"""Reads merge what is not yet compacted: a run's ``upload_blocks`` rows, in memory.

An acknowledged upload is one ``upload_blocks`` row until the compactor folds it into the
series' chunks and the run's aggregate blocks (``rankwise.store.compact``). A read never
writes to see it: it loads the run's pending rows inside its own snapshot (the same one
its chunk and aggregate reads see, so a row is either still pending there or already
folded, never both nor neither) and merges them with what is compacted:

* points (series, history, system lines, step progress, heatmap cells) are the stored
  chunks' followed by the pending ones, per (stream, metric), in seq order;
* cross-rank aggregates (band, last values) are the stored blocks ``Agg.merge``\\ d with
  the pending points' own (``PendingView.agg``), exactly as compaction would store them.

``BlockCache`` keeps, for the 16 runs read last, each stream's pending rows: those no
read has needed yet as stored bytes (about 0.8 KB an upload of 50 metrics), the others
decoded into segments (``_Seg``): the groups of a stream logged alike (a loop logs the
same dict every step) share one seq, step, time and weight column, and each kind's
values are one matrix with a row per series, so that taking in an upload costs a few
numpy calls whatever its number of metrics, and a series is a row of it. A read lists
the run's pending rows (``id, stream, seq_lo``, in id order): when the listing is the
last one plus new rows (the usual case), only those are fetched and appended; otherwise
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
        if where is None:  # each series' (kind, row of that kind's matrix)
            rows: dict[str, int] = {}
            where = {}
            for sid, _, kind in sig[0]:
                where[sid] = (kind, rows.get(kind, 0))
                rows[kind] = rows.get(kind, 0) + 1
        self.where = where

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


class BlockCache:
    """Each run's pending points as last read, per stream (see the module docstring);
    thread-safe."""

    def __init__(self, max_runs: int = MAX_RUNS) -> None:
        # Per run: the listing last read (id order) and the tails it gave.
        self._runs: OrderedDict[int, tuple[list[Any], dict[int, _Tail]]] = OrderedDict()
        self._lock = threading.Lock()
        self._max = max_runs

    def tails(self, tx: Tx, run: int) -> dict[int, _Tail]:
        """The run's pending points in ``tx``'s snapshot, per stream."""
        listed = tx.all(
            "SELECT id, stream, seq_lo FROM upload_blocks WHERE run = ? ORDER BY id", (run,)
        )
        if not listed:
            with self._lock:
                self._runs.pop(run, None)
            return {}
        with self._lock:
            last, held = self._runs.get(run, ([], {}))
        if listed == last:  # nothing stored or compacted since the last read
            return held
        plan: dict[int, tuple[_Tail, int, list[_Key]]] = {}
        fetch: list[int] = []
        if last and listed[: len(last)] == last:  # only new uploads: the usual case
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
        with self._lock:
            self._runs[run] = (listed, now)
            self._runs.move_to_end(run)
            while len(self._runs) > self._max:
                self._runs.popitem(last=False)
        return now


class PendingView:
    """One run's pending points as a read sees them (see the module docstring); a
    stream's rows are decoded when a read first needs one of its series."""

    def __init__(self, tails: dict[int, _Tail]) -> None:
        self._tails = tails
        self._index: tuple[set[int], dict[int, list[int]]] | None = None
        self._order = sorted(tails)

    @classmethod
    def of_run(cls, tx: Tx, run: int, cache: BlockCache | None = None) -> PendingView:
        return cls((cache or BlockCache(1)).tails(tx, run))

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

    def last(self, metric: int, upto: int | None) -> Agg:
        """The cross-rank aggregate of the metric's last pending step ``<= upto`` (any
        step when None) alone: empty when there is none."""
        got = self._aggregated(metric)
        if not got:
            return Agg.empty()
        step = np.concatenate([p.step for p in got])
        ok = step if upto is None else step[step <= upto]
        if not ok.shape[0]:
            return Agg.empty()
        at = np.flatnonzero(step == ok.max())
        return Agg.from_points(
            step[at],
            np.concatenate([p.fvalue() for p in got])[at],
            np.concatenate([p.weight for p in got])[at],
            np.concatenate([p.time for p in got])[at],
        )

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


EMPTY = PendingView({})
