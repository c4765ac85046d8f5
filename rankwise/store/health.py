"""Rank health in the store: console lines, system samples, stalls and step progress.

Written by ``ingest.apply_streams`` inside the stream's data transaction, after the mark
check, so they are applied exactly once like metrics (migration 4 holds the tables):

* ``Console`` lines become rows of ``console`` (run, stream, time, stdout/stderr, text),
  one row per line, indexed by (run, time) and (stream, time): a page of a run's log, a
  rank's log, or the lines around a time costs an index range, whatever the log's size.
* ``System`` samples become series in the chunk machinery (``rankwise.store.chunks``),
  with x = time, so a system chart is M4-downsampled like any metric. Their names are
  interned in ``system_keys`` and stored as *negative* metric ids: no user metric (ids
  from 1) can collide with them, and ``metric_keys``/``history``/aggregates, which join
  or list the ``metrics`` table, never see them.
* Step progress (a stream's new highest steps and their times, what ``rankwise.health``
  computes rates and lags from) is the series of metric id ``STEPS`` (0), kept at most
  one point per ``STEP_RESOLUTION`` seconds per batch plus each batch's last, so a fast
  loop costs a few points a second while the current step is always exact.
* ``Stall`` records become rows of ``stalls`` (the stream's open stall is also in its
  folded state, ``StreamFold.stall``).

Text is stored as it came, except that NUL (which PostgreSQL text cannot hold) becomes
U+FFFD and a line longer than ``MAX_TEXT`` characters is cut, saying so: a record the
database would refuse would otherwise stop its stream's ingest for good.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import Any

import msgspec
import numpy as np

from ..stream import records as R
from .chunks import Points
from .tx import Tx, insert_rows, marks

STEPS = 0  # metric id of the step-progress series
STEP_RESOLUTION = 1.0  # seconds between kept step points within one batch
MAX_TEXT = 65536  # characters of one stored console line
# Bytes of console text (UTF-8, one more per line) stored per stream: past it the lines
# are dropped, after one line saying so, and the stream's other records still land, so
# neither a flood nor a chatty rank can fill the database or stop the stream's upload.
MAX_CONSOLE_BYTES = 256 * 1024 * 1024
CONSOLE_FULL = "[rankwise: this rank's console output passed {} bytes; later lines are not stored]"
STDOUT, STDERR = 0, 1
STREAM_NAMES = ("stdout", "stderr")

_json = msgspec.json.Encoder()
_step = operator.attrgetter("step")
_time = operator.attrgetter("time")
_GPU = re.compile(r"(^|/)gpu/([0-9]{1,6})/")  # an index past 6 digits names no GPU


def clean_text(text: str) -> str:
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    if len(text) > MAX_TEXT:
        text = f"{text[:MAX_TEXT]}… [{len(text) - MAX_TEXT} more characters not stored]"
    return text


# -- the dashboard's grouping of system keys ---------------------------------------------


def quantity(key: str) -> tuple[str, int | None]:
    """A system key's chart and GPU: ``gpu/3/util_percent`` → (``gpu/util_percent``, 3).

    One chart per quantity; its lines are the nodes (``node/*``), GPUs (``gpu/*``) or
    recording processes (``proc/*``) that sampled it.
    """
    m = _GPU.search(key)
    if m is None:
        return key, None
    return key[: m.start()] + m.group(1) + "gpu/" + key[m.end() :], int(m.group(2))


# -- write side ----------------------------------------------------------------------------


def system_names(records: Sequence[R.AnyRecord]) -> set[str]:
    if R.System not in set(map(type, records)):  # C-level: most batches have none
        return set()
    names: set[str] = set()
    names.update(*[r.values for r in records if type(r) is R.System])
    return {clean_text(n) for n in names}


def intern_system_keys(tx: Tx, names: Sequence[str]) -> dict[str, int]:
    """Ids of system key names, inserting the new ones (sorted: no deadlocks)."""
    tx.many(
        "INSERT INTO system_keys (name) VALUES (?) ON CONFLICT DO NOTHING",
        [(n,) for n in sorted(names)],
    )
    out: dict[str, int] = {}
    names = list(names)
    for a in range(0, len(names), 500):
        part = names[a : a + 500]
        for i, name in tx.all(
            f"SELECT id, name FROM system_keys WHERE name IN ({marks(len(part))})", part
        ):
            out[name] = int(i)
    return out


def apply(
    tx: Tx,
    stream: int,
    run: int,
    fresh: Sequence[R.AnyRecord],
    top: int,
    system_ids: dict[str, int],
    console_bytes: int = 0,
    console_out: ConsoleRows | None = None,
) -> dict[int, Points]:
    """Store the console lines and stalls of ``fresh`` (records past the mark, in seq
    order); returns the series points of its system samples and step progress, keyed by
    metric id, for the caller to append with the metrics. ``top`` is the stream's highest
    step before ``fresh``; ``console_bytes`` the console bytes (UTF-8) it received before
    (``StreamFold.console_bytes``), against ``MAX_CONSOLE_BYTES``. ``console_out``: where
    the console rows go, for the caller to write with other streams' (None: written now).
    """
    kinds = set(map(type, fresh))
    out: dict[int, Points] = {}
    if R.Metrics in kinds:
        steps = _step_points([r for r in fresh if type(r) is R.Metrics], top)
        if steps is not None:
            out[STEPS] = steps
    if R.System in kinds:
        out.update(_system_points([r for r in fresh if type(r) is R.System], system_ids))
    if R.Console in kinds:
        rows: list[tuple[Any, ...]] = []
        per_err = [0, 0]
        budget = MAX_CONSOLE_BYTES
        for rec in fresh:
            if type(rec) is R.Console:
                if console_bytes > budget:
                    break  # already over: the line saying so was stored then
                err = STDERR if rec.stream == "stderr" else STDOUT
                times = rec.times if len(rec.times) == len(rec.lines) else None
                kept = 0
                for i, line in enumerate(rec.lines):
                    t = times[i] if times is not None else rec.time
                    console_bytes += len(line.encode("utf-8", "surrogatepass")) + 1
                    if console_bytes > budget:
                        rows.append((run, stream, t, STDERR, CONSOLE_FULL.format(budget)))
                        per_err[STDERR] += 1
                        break
                    rows.append((run, stream, t, err, clean_text(line)))
                    kept += 1
                per_err[err] += kept
        into = ConsoleRows() if console_out is None else console_out
        into.lines += rows
        into.counts += [(stream, err, n) for err, n in enumerate(per_err) if n]
        if console_out is None:
            into.write(tx)
    if R.Stall in kinds:
        tx.many(
            "INSERT INTO stalls (stream, seq, time, idle, cleared, location, stacks) "
            "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            [
                (
                    stream,
                    r.seq,
                    r.time,
                    r.idle_seconds,
                    int(r.cleared),
                    clean_text(r.where),
                    _json.encode(r.stacks).decode(),  # JSON escapes NUL
                )
                for r in fresh
                if isinstance(r, R.Stall)
            ],
        )
    return out


# Lines per INSERT statement: one statement per 100 rows rather than 100 round trips,
# and short enough for the drivers' statement caches (psycopg caches up to 4 KB).
_ROWS = 100
_ONE = "(?, ?, ?, ?, ?)"
_INSERT = "INSERT INTO console (run, stream, time, err, text) VALUES "


def _insert_lines(tx: Tx, rows: list[tuple[Any, ...]]) -> None:
    whole = len(rows) - len(rows) % _ROWS
    if whole:
        many = _INSERT + ", ".join([_ONE] * _ROWS)
        flat = chain.from_iterable
        tx.many(many, [tuple(flat(rows[a : a + _ROWS])) for a in range(0, whole, _ROWS)])
    if whole < len(rows):  # the rest in one statement too
        rest = rows[whole:]
        tx.run(_INSERT + ", ".join([_ONE] * len(rest)), list(chain.from_iterable(rest)))


@dataclass
class ConsoleRows:
    """The console lines and per-stream line counts of one ingest call's streams, written
    together at its end (``write``): a statement per table and call, not per stream."""

    lines: list[tuple[Any, ...]] = field(default_factory=list)
    counts: list[tuple[int, int, int]] = field(default_factory=list)  # (stream, err, n)

    def write(self, tx: Tx) -> None:
        _insert_lines(tx, self.lines)
        # Each (stream, err) once per call (its streams are distinct): one upsert may not
        # touch a row twice on PostgreSQL.
        insert_rows(
            tx, "INSERT INTO console_counts (stream, err, n) VALUES", 3, self.counts,
            " ON CONFLICT (stream, err) DO UPDATE SET n = console_counts.n + excluded.n",
        )  # fmt: skip
        self.lines, self.counts = [], []


def _step_points(mets: list[R.Metrics], top: int) -> Points | None:
    """The new highest steps of ``mets`` (see the module docstring), thinned."""
    if len(mets) == 1:  # an upload a second of a loop logging once a second: no numpy pass
        m = mets[0]
        if m.step <= top:
            return None
        return Points(
            np.array([m.seq], np.int64),
            np.array([m.step], np.int64),
            np.array([m.time], np.float64),
            np.array([m.step], np.int64),
            np.array([np.nan]),
            "i",
        )
    step = np.fromiter(map(_step, mets), np.int64, len(mets))
    best = np.maximum.accumulate(np.r_[np.int64(top), step])
    new = step > best[:-1]
    if not new.any():
        return None
    at = np.flatnonzero(new)
    time = np.fromiter(map(_time, mets), np.float64, len(mets))[at]
    bucket = np.floor(time / STEP_RESOLUTION)
    keep = np.r_[True, bucket[1:] != bucket[:-1]]
    keep[-1] = True
    at, time = at[keep], time[keep]
    seq = np.array([mets[i].seq for i in at.tolist()], np.int64)
    s = step[at]
    return Points(seq, s, time, s.copy(), np.full(s.shape[0], np.nan), "i")


def _system_points(samples: list[R.System], ids: dict[str, int]) -> dict[int, Points]:
    cols: dict[str, tuple[list[int], list[float], list[float]]] = {}
    for rec in samples:
        for key, value in rec.values.items():
            seqs, times, values = cols.setdefault(key, ([], [], []))
            seqs.append(rec.seq)
            times.append(rec.time)
            values.append(float(value))
    out: dict[int, Points] = {}
    for key, (seqs, times, values) in cols.items():
        mid = ids.get(clean_text(key))
        if mid is None:
            continue  # interned before the transaction; absent only if a name was refused
        seq = np.array(seqs, np.int64)
        # x is time; step (which the chunk summaries need) is the sample's seq.
        out[-mid] = Points(
            seq,
            seq.copy(),
            np.array(times, np.float64),
            np.array(values, np.float64),
            np.full(len(seqs), np.nan),
            "f",
        )
    return out
