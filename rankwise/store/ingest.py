"""The write side shared by both stores: one stream's new records into one transaction.

``apply_stream`` runs inside a transaction that holds the stream's row lock (PostgreSQL
``SELECT ... FOR UPDATE``; SQLite ``BEGIN IMMEDIATE`` on its single writer). Within it:

1. read the stream's mark and folded state;
2. keep the records that continue the mark without a gap (``contiguous``);
3. fold them (``rankwise.stream.fold.StreamFold``, the local reader's rules), cut their
   metric values into per-metric numpy columns and store those, with the step-progress
   and system series, as one ``upload_blocks`` row (``rankwise.store.pending``); store
   their console lines and stalls (``rankwise.store.health``); media items, tables and
   histograms (``rankwise.store.media``);
4. move the mark (the ``upload_blocks`` rows, console lines and marks of all the streams
   of one ``apply_streams`` call are written together once each stream is applied,
   ``_Writes``: a statement per table, not per stream);
5. decide the alert events the records show (``alert_ingest``: the first non-finite
   value of a metric, ``run.alert()``).

Data, alert decisions and mark commit together or not at all, so a batch is applied
exactly once however often it is sent and by however many ingesters: a second ingester
of the same stream waits for the row lock and then finds the mark already past its
records. The compactor (``rankwise.store.compact``) later folds the stored rows into the
series' chunks (``append_series`` below) and the run's aggregate blocks, and deletes
them, in one transaction.
"""

from __future__ import annotations

import hashlib
import operator
from collections.abc import Iterable, Iterator, Sequence
from itertools import chain
from typing import Any

import msgspec
import numpy as np
import numpy.typing as npt

from ..budget import check_json_value
from ..stream import records as R
from ..stream import streamkey
from ..stream.fold import StreamFold
from . import health as rank_health
from . import media as rich
from . import step_sums
from .alert_ingest import Found, decide_found, found
from .blocks import merge_blocks
from .chunks import MERGE_BELOW, Points, decode, encode_many, split
from .fold_cache import decode_fold, encode_fold
from .pending import block_row, store_blocks
from .tx import Tx, delete_ids, insert_rows, marks

_enc = msgspec.msgpack.Encoder()


class StreamGone(LookupError):
    """The stream's row is gone: its run was purged (``rankwise.store.trash``) between
    the upload's checks and its transaction."""


class StreamConflict(ValueError):
    """An upload's record at the stream's mark differs from the one the store applied:
    another writer (a holder of the project's ingest token) got there first."""

    def __init__(self, mark: int) -> None:
        super().__init__(mark)
        self.mark = mark


class StreamKeyRefused(ValueError):
    """An upload of a stream bound to a secret (its first StreamStart's ``key_digest``,
    ``rankwise.stream.streamkey``) did not present that secret: nothing of it applies.
    Not an ``OSError``: the group commit takes those for "the store cannot write" and
    would fail every upload of the batch, not this one alone."""

    def __init__(self, mark: int, presented: bool) -> None:
        super().__init__(mark)
        self.mark = mark
        self.presented = presented


# What ``apply_streams`` is told of each stream's uploads: the secrets they presented
# (None: one presented none). ``TRUSTED``: the caller read the stream's own file
# (``rankwise ui``'s indexer, tests), so there is nothing to check.
Presented = tuple[str | None, ...]
TRUSTED: Presented | None = None


def check_key(
    fold: StreamFold, fresh: Sequence[R.AnyRecord], presented: Presented, mark: int
) -> None:
    """Refuse (``StreamKeyRefused``) an upload that does not present the secret the
    stream is bound to: the one its first StreamStart names (stored in ``fold``, or in
    ``fresh`` when this upload starts the stream)."""
    if fold.start is not None:
        want = fold.key_digest
    else:
        first = next((r for r in fresh if type(r) is R.StreamStart), None)
        want = first.key_digest if isinstance(first, R.StreamStart) else None
    if want is None:
        return  # an unbound stream (an older SDK, another writer): today's rules
    for secret in presented:
        if not streamkey.matches(secret, want):
            raise StreamKeyRefused(mark, secret is not None)


_CONFIG_KINDS = frozenset((R.StreamStart, R.ConfigUpdate, R.SummaryUpdate))


def kinds_of(records: Sequence[R.AnyRecord]) -> set[type]:
    return set(map(type, records))


def record_digest(rec: R.AnyRecord) -> bytes:
    """A digest of one record, the same for the same record however it arrives."""
    return hashlib.blake2b(_enc.encode(rec), digest_size=16).digest()


def contiguous(records: Sequence[R.AnyRecord], mark: int) -> list[R.AnyRecord]:
    """The records that continue ``mark`` without a gap, in seq order, each once.

    Records at or below the mark are already applied; a record after a gap is refused
    (the caller sees the mark stop short and resends from it).
    """
    seqs = list(map(_seq, records))
    if seqs and seqs[0] == mark + 1 and seqs == list(range(mark + 1, mark + 1 + len(seqs))):
        return list(records)  # the usual batch: exactly the next records, in order
    fresh = sorted((r for r in records if r.seq > mark), key=lambda r: r.seq)
    out: list[R.AnyRecord] = []
    want = mark + 1
    for rec in fresh:
        if rec.seq < want:
            continue  # a repeat within the batch
        if rec.seq != want:
            break
        out.append(rec)
        want += 1
    return out


def metric_names(records: Iterable[R.AnyRecord]) -> set[str]:
    names: set[str] = set()
    names.update(*[r.values for r in records if type(r) is R.Metrics])
    return names


def _kind(values: list[Any]) -> str:
    types = set(map(type, values))
    if types == {bool}:
        return "b"
    if types == {int}:
        return "i"
    return "f"


def _floats(table: list[list[Any]]) -> npt.NDArray[np.float64]:
    try:
        return np.array(table, np.float64)
    except OverflowError:  # an int beyond float range: chart it as ±inf
        return np.array(
            [[v if abs(v) < 1e308 else np.copysign(np.inf, v) for v in row] for row in table],
            np.float64,
        )


def _grid(picked: list[dict[str, Any]], k: int) -> npt.NDArray[np.float64]:
    """The values of same-keyed dicts as a (records, keys) float64 table."""
    try:  # one C-level pass over all the values
        flat = np.fromiter(chain.from_iterable(map(dict.values, picked)), np.float64)
        return flat.reshape(len(picked), k)
    except (TypeError, ValueError, OverflowError):  # what numpy makes of odd values
        return _floats(list(map(list, map(dict.values, picked))))


def _typed(column: list[Any], floats: npt.NDArray[np.float64]) -> tuple[str, npt.NDArray[Any]]:
    """Keep a column of ints (or bools) as such; anything mixed is float."""
    kind = _kind(column)
    if kind == "i":
        try:
            return kind, np.array(column, np.int64)
        except OverflowError:
            return "f", floats
    if kind == "b":
        return kind, np.array(column, np.bool_)
    return "f", floats


_values = operator.attrgetter("values")
_seq = operator.attrgetter("seq")
_step = operator.attrgetter("step")
_time = operator.attrgetter("time")
_weight = operator.attrgetter("weight")


def extract(records: Sequence[R.AnyRecord]) -> dict[str, Points]:
    """Per metric name, the points of the ``Metrics`` records, in seq order.

    Records are grouped by the keys they log (a training loop logs the same dict every
    step), so each group becomes one 2-D array in a single numpy call.
    """
    mets = [r for r in records if type(r) is R.Metrics]
    if not mets:
        return {}
    # C-level maps: per-record Python work is what bounds ingest of small log() calls.
    logged = list(map(_values, mets))
    shape_of = list(map(tuple, logged))
    shapes: dict[tuple[str, ...], list[int]] = {}
    if len(set(shape_of)) == 1:
        shapes[shape_of[0]] = list(range(len(mets)))
    else:
        for i, shape in enumerate(shape_of):
            shapes.setdefault(shape, []).append(i)
    m = len(mets)
    seq = np.fromiter(map(_seq, mets), np.int64, m)
    step = np.fromiter(map(_step, mets), np.int64, m)
    time = np.fromiter(map(_time, mets), np.float64, m)
    weight = np.array(list(map(_weight, mets)), np.float64)  # None becomes NaN
    parts: dict[str, list[tuple[npt.NDArray[np.intp] | None, str, npt.NDArray[Any]]]] = {}
    for keys, rows in shapes.items():
        whole = len(rows) == m
        picked = logged if whole else [logged[i] for i in rows]
        # Key-major: each column one contiguous row (one copy for all of them).
        columns = np.ascontiguousarray(_grid(picked, len(keys)).T)
        at = None if whole else np.array(rows, np.intp)
        table: list[list[Any]] | None = None
        for j, name in enumerate(keys):
            kind, col = "f", columns[j]
            if type(picked[0][name]) is not float:  # maybe an int or bool column
                if table is None:
                    table = list(map(list, map(dict.values, picked)))
                kind, col = _typed([row[j] for row in table], col)
            parts.setdefault(name, []).append((at, kind, col))
    out: dict[str, Points] = {}
    for name, got in parts.items():
        if len(got) == 1:
            at, kind, col = got[0]
        else:
            kinds = {k for _, k, _ in got}
            kind = kinds.pop() if len(kinds) == 1 else "f"
            idx = np.concatenate([a for a, _, _ in got if a is not None])
            col = np.concatenate([c if kind != "f" else c.astype(np.float64) for _, _, c in got])
            order = np.argsort(idx, kind="stable")
            at, col = idx[order], col[order]
        if at is None:
            out[name] = Points(seq, step, time, np.ascontiguousarray(col), weight, kind)
        else:
            out[name] = Points(seq[at], step[at], time[at], col, weight[at], kind)
    return out


def apply_streams(
    tx: Tx,
    items: Sequence[tuple[int, int, Sequence[R.AnyRecord]]],
    metric_ids: dict[str, int],
    system_ids: dict[str, int] | None = None,
    presented: Sequence[Presented | None] | None = None,
    direct: bool = False,
) -> list[int]:
    """Apply each ``(stream id, run id, records)``; returns the streams' new marks.

    Each stream's new points are stored as one ``upload_blocks`` row
    (``rankwise.store.pending``); the compactor folds them into series chunks and the
    run's aggregate blocks later (``rankwise.store.compact``).
    ``system_ids`` are the interned names of the records' system keys
    (``health.intern_system_keys``). ``presented``, per item, the secrets its uploads
    presented (``check_key``); None for an item, or for all, is ``TRUSTED``.
    """
    marks = []
    per_run: dict[int, dict[int, list[Points]]] = {}
    events: dict[int, list[Found]] = {}
    writes = _Writes()
    applied: set[int] = set()
    rows = _stream_rows(tx, [stream for stream, _, _ in items])
    for i, (stream, run, records) in enumerate(items):
        keys = presented[i] if presented is not None else TRUSTED
        if stream in applied:  # a stream twice: its second part reads the first's mark
            writes.write(tx)
            applied.clear()
        applied.add(stream)
        row = rows.pop(stream) if stream in rows else _stream_row(tx, stream)
        mark, points, seen = _apply_one(
            tx, stream, run, row, records, metric_ids, system_ids or {}, keys, direct, writes
        )
        marks.append(mark)
        if direct:
            into = per_run.setdefault(run, {})
            for mid, p in points.items():
                into.setdefault(mid, []).append(p)
        if seen:
            events.setdefault(run, []).extend(seen)
    writes.write(tx)
    for run in sorted(per_run):
        if per_run[run]:
            merge_blocks(tx, run, per_run[run])
    if events:  # after the blocks: every ingester takes its locks in the same order
        decide_found(tx, events)
    return marks


def apply_stream(
    tx: Tx,
    stream: int,
    run: int,
    records: Sequence[R.AnyRecord],
    metric_ids: dict[str, int],
    system_ids: dict[str, int] | None = None,
    presented: Presented | None = TRUSTED,
    direct: bool = False,
) -> int:
    """Apply the records newer than the stream's mark; returns the new mark."""
    return apply_streams(tx, [(stream, run, records)], metric_ids, system_ids, [presented], direct)[
        0
    ]


_STREAM_COLUMNS = (
    "acked_seq", "start", "finish", "first_time", "last_time", "last_step", "points",
    "dropped", "fold",
)  # fmt: skip


class _Writes:
    """What the streams of one ``apply_streams`` call write to tables they all share, kept
    and written together once each is applied (``write``): a statement per table and call
    rather than per stream. On SQLite every statement hands the GIL over and, with the
    server's other threads busy, may wait a switch interval to get it back: at a thousand
    ranks those waits were most of the writer's time."""

    def __init__(self) -> None:
        self.blocks: list[tuple[int, int, int, int, bytes]] = []
        self.streams: list[tuple[Any, ...]] = []  # _STREAM_COLUMNS' values, then the id
        self.console = rank_health.ConsoleRows()

    def write(self, tx: Tx) -> None:
        store_blocks(tx, self.blocks)
        self.console.write(tx)
        if self.streams:
            tx.update_rows("streams", ("id",), _STREAM_COLUMNS, self.streams)
        self.blocks, self.streams = [], []


# Stream rows read (and on PostgreSQL locked) per statement by ``_stream_rows``.
_ROWS_PER_READ = 500


def _stream_rows(tx: Tx, streams: Sequence[int]) -> dict[int, tuple[Any, ...]]:
    """The ``(acked_seq, fold)`` of each of ``streams`` by id, a statement per
    ``_ROWS_PER_READ`` rather than one per stream (on PostgreSQL a round trip each, and
    the rows are locked in id order, as one at a time did: concurrent ingesters never
    wait in a cycle). A stream whose row is gone is left out."""
    ids = sorted(set(streams))
    out: dict[int, tuple[Any, ...]] = {}
    for a in range(0, len(ids), _ROWS_PER_READ):
        part = ids[a : a + _ROWS_PER_READ]
        where, params = tx.any_of("id", part)
        for sid, acked, fold in tx.all(
            f"SELECT id, acked_seq, fold FROM streams WHERE {where} ORDER BY id{tx.for_update}",
            params,
        ):
            out[int(sid)] = (acked, fold)
    return out


def _stream_row(tx: Tx, stream: int) -> tuple[Any, ...]:
    """One stream's ``(acked_seq, fold)``, read again after its earlier part's writes."""
    row = tx.one(f"SELECT acked_seq, fold FROM streams WHERE id = ?{tx.for_update}", (stream,))
    if row is None:
        raise StreamGone(f"stream row {stream} is gone: its run was purged")
    return row


def _apply_one(
    tx: Tx,
    stream: int,
    run: int,
    row: tuple[Any, ...],
    records: Sequence[R.AnyRecord],
    metric_ids: dict[str, int],
    system_ids: dict[str, int],
    presented: Presented | None,
    direct: bool,
    out: _Writes,
) -> tuple[int, dict[int, Points], list[Found]]:
    mark = int(row[0])
    fold = None
    fresh = contiguous(records, mark)
    if presented is not None:  # under the row lock: the bound secret cannot change
        fold = decode_fold(row[1])
        check_key(fold, fresh, presented, mark)
    # Only a batch that is not exactly "the next records" can hold the mark's record.
    plain = not records or (records[0].seq == mark + 1 and records[-1].seq == mark + len(records))
    anchor = [] if plain else [r for r in records if r.seq == mark]
    if anchor:  # a resend reaching back to the mark: it must be what was applied
        if fold is None:
            fold = decode_fold(row[1])
        if fold.tip and any(record_digest(r) != fold.tip for r in anchor):
            raise StreamConflict(mark)
    if not fresh:
        return mark, {}, []
    if fold is None:
        fold = decode_fold(row[1])
    top = fold.last_step
    console = fold.console_bytes
    fold.apply(fresh)
    kinds = kinds_of(fresh)
    if R.RunEdit in kinds:  # run.name = ... of the live run: the run's edit history
        from .run_edits import record_live_edits

        record_live_edits(tx, run, fresh)
    if not kinds.isdisjoint(_CONFIG_KINDS):
        # What every read of the run decodes: the whole stream's config and summary
        # within one record's budget, however many updates built them (413).
        check_json_value(fold.config, "this stream's config (all its updates together)")
        check_json_value(fold.user_summary, "this stream's summary (all its updates together)")
    fold.tip = record_digest(fresh[-1])
    by_name = extract(fresh)
    points = {metric_ids[k]: p for k, p in by_name.items()}
    seen = found(fold.start, fresh, by_name)  # alert events (``alert_ingest``)
    # Console lines, stalls, system samples and step progress; only metrics aggregate.
    health = rank_health.apply(tx, stream, run, fresh, top, system_ids, console, out.console)
    rich.apply(tx, stream, run, fresh)
    if direct and (points or health):
        append_series(tx, stream, {**points, **health} if health else points)
    elif points or health:  # one row for the whole upload; the compactor folds it later
        out.blocks.append(block_row(run, stream, (fresh[0].seq, fresh[-1].seq), points, health))
    start = fold.start
    if start is not None and start.config:
        start = msgspec.structs.replace(start, config={})  # listing never needs it
    new_mark = fresh[-1].seq
    out.streams.append(
        (
            new_mark,
            None if start is None else _enc.encode(start),
            None if fold.finish is None else _enc.encode(fold.finish),
            fold.first_time,
            fold.last_time,
            fold.last_step,
            fold.points,
            fold.dropped,
            encode_fold(fold),
            stream,
        ),
    )
    return new_mark, points, seen


_CHUNK_COLS = "n, step_lo, step_hi, t_lo, t_hi, kind, xs, ys, seqs, weights, head, subs"
_OPEN_COLS = "id, n, kind, xs, ys, seqs, weights"


def _tails(tx: Tx, stream: int, metrics: list[int]) -> dict[int, list[tuple[int, int]]]:
    """Per metric, its series' open tail: (chunk id, points) from ``open_chunk`` on."""
    out: dict[int, list[tuple[int, int]]] = {}
    for a in range(0, len(metrics), 500):
        part = metrics[a : a + 500]
        for metric, cid, n in tx.all(
            "SELECT c.metric, c.id, c.n FROM series s JOIN chunks c ON c.stream = s.stream "
            "AND c.metric = s.metric AND c.id >= s.open_chunk "
            f"WHERE s.stream = ? AND s.metric IN ({marks(len(part))}) ORDER BY c.id",
            (stream, *part),
        ):
            out.setdefault(int(metric), []).append((int(cid), int(n)))
    return out


def append_series(tx: Tx, stream: int, points: dict[int, Points]) -> None:
    """Append each metric's points to its series as a binary counter of small chunks.

    A series ends in an open *tail*: its chunks from ``series.open_chunk`` on, each
    smaller than ``MERGE_BELOW`` and each smaller than the one before. New points merge
    with the tail's newest chunks while those are no larger than what is being merged
    (then with the next, and so on), and the result replaces them. So a point is
    rewritten about log2(MERGE_BELOW) times before its chunk closes, instead of on every
    later batch as with one open chunk, and the tail holds at most ~11 chunks. The merged
    chunk keeps the id of the oldest chunk it replaces, so chunk ids still ascend in
    ``seq`` order.
    """
    known = {
        int(m): (int(n), o)
        for m, n, o in tx.all(
            "SELECT metric, points, open_chunk FROM series WHERE stream = ?", (stream,)
        )
    }
    tails = _tails(
        tx, stream, sorted(m for m, (_, o) in known.items() if o is not None and m in points)
    )
    merging, keeping = _merge_targets(tails, points)
    old = _open_chunks(tx, [cid for ids in merging.values() for cid in ids])
    plan = _plan(points, merging, old)
    updates, inserts, deletes = _chunk_rows(stream, plan)
    if deletes:  # before the inserts: SQLite may hand their ids out again, still ascending
        delete_ids(tx, "chunks", [d for (d,) in deletes])
    # Every new chunk in one go; ids come back in the order of ``inserts``.
    new_ids = [
        int(row[0])  # type: ignore[index]  # a plain INSERT always returns its row
        for row in tx.many_returning(
            f"INSERT INTO chunks (stream, metric, {_CHUNK_COLS}) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
            inserts,
        )
    ]
    _store_closed_sums(tx, stream, plan, new_ids)
    new_series, old_series = _series_rows(stream, plan, iter(new_ids), keeping, known, points)
    # A multi-row statement per table, not one a row (``_Writes``' reason).
    if updates:
        tx.update_rows("chunks", ("id",), _CHUNK_COLS.split(", "), updates)
    if old_series:
        tx.update_rows("series", ("stream", "metric"), ("points", "open_chunk"), old_series)
    if new_series:
        head = "INSERT INTO series (stream, metric, points, open_chunk) VALUES"
        insert_rows(tx, head, 4, new_series)


# One metric's part of an append: its id, the tail chunks merged (oldest first; the
# first one is rewritten in place, the others deleted) and the new chunks' points.
_Planned = tuple[int, list[int], list[Points]]


def _merge_targets(
    tails: dict[int, list[tuple[int, int]]], points: dict[int, Points]
) -> tuple[dict[int, list[int]], dict[int, list[tuple[int, int]]]]:
    """Which of each tail's chunks the new points merge with (the newest ones, oldest
    first), and the tail chunks kept before them."""
    merging: dict[int, list[int]] = {}
    keeping: dict[int, list[tuple[int, int]]] = {}
    for metric, tail in tails.items():
        acc, take = len(points[metric]), []
        while tail and tail[-1][1] <= acc:
            cid, n = tail.pop()
            acc += n
            take.append(cid)
        merging[metric] = take[::-1]
        keeping[metric] = tail
    return merging, keeping


def _open_chunks(tx: Tx, wanted: list[int]) -> dict[int, Points]:
    """The points of the chunks ``wanted``, by chunk id."""
    old: dict[int, Points] = {}
    for a in range(0, len(wanted), 500):
        part = wanted[a : a + 500]
        for cid, n, kind, xs, ys, seqs, weights in tx.all(
            f"SELECT {_OPEN_COLS} FROM chunks WHERE id IN ({marks(len(part))})", part
        ):
            old[int(cid)] = decode(int(n), kind, xs, ys, seqs, weights)
    return old


def _plan(
    points: dict[int, Points], merging: dict[int, list[int]], old: dict[int, Points]
) -> list[_Planned]:
    """Per metric, in id order: the merged chunks and the new points split into chunks."""
    plan: list[_Planned] = []
    for metric in sorted(points):
        merged = merging.get(metric, [])
        pts = points[metric]
        if merged:
            pts = Points.concat([*(old[cid] for cid in merged), pts])
        plan.append((metric, merged, split(pts)))
    return plan


def _chunk_rows(
    stream: int, plan: list[_Planned]
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], list[tuple[int]]]:
    """The encoded chunks as rows: (updates of the first merged chunk, inserts, deletes
    of the other merged ones)."""
    encoded = iter(encode_many([piece for _, _, pieces in plan for piece in pieces]))
    updates: list[tuple[Any, ...]] = []
    inserts: list[tuple[Any, ...]] = []
    deletes: list[tuple[int]] = []
    for metric, merged, pieces in plan:
        deletes.extend((cid,) for cid in merged[1:])
        for i in range(len(pieces)):
            c = next(encoded)
            cols = (c.n, c.step_lo, c.step_hi, c.t_lo, c.t_hi, c.kind, c.xs, c.ys, c.seqs,
                    c.weights, c.head, c.subs)  # fmt: skip
            if i == 0 and merged:
                updates.append((*cols, merged[0]))
            else:
                inserts.append((stream, metric, *cols))
    return updates, inserts, deletes


def _store_closed_sums(tx: Tx, stream: int, plan: list[_Planned], new_ids: list[int]) -> None:
    """The ``chunk_sums`` rows of the chunks this append closed (``rankwise.store.step_sums``:
    a closed chunk is never rewritten, so its row is written once)."""
    ids = iter(new_ids)
    rows: list[tuple[int, int, Points]] = []
    for metric, merged, pieces in plan:
        for i, piece in enumerate(pieces):
            cid = merged[0] if i == 0 and merged else next(ids)
            if step_sums.wanted(metric, piece):
                rows.append((cid, metric, piece))
    step_sums.store_sums(tx, stream, rows)


def _series_rows(
    stream: int,
    plan: list[_Planned],
    ids: Iterator[int],
    keeping: dict[int, list[tuple[int, int]]],
    known: dict[int, tuple[int, Any]],
    points: dict[int, Points],
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """(new series rows, updates of known ones): each series' point count and the first
    chunk of its open tail (None: every chunk closed). ``ids``: the inserted chunks'."""
    new_series: list[tuple[Any, ...]] = []
    old_series: list[tuple[Any, ...]] = []
    for metric, merged, pieces in plan:
        last_id = merged[0] if merged else None
        for i in range(len(pieces)):
            if not (i == 0 and merged):
                last_id = next(ids)
        kept = keeping.get(metric)
        if kept:  # the new chunk joins an older tail: the tail still starts there
            new_open: int | None = kept[0][0]
        else:
            new_open = last_id if len(pieces[-1]) < MERGE_BELOW else None
        total = len(points[metric]) + known.get(metric, (0, None))[0]
        if metric in known:
            old_series.append((total, new_open, stream, metric))
        else:
            new_series.append((stream, metric, total, new_open))
    return new_series, old_series
