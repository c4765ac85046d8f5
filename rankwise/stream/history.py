"""A run's metric history as columns: the local reader's ``scan()`` and ``history_df()``.

Built on ``rankwise.stream.columns`` (one stream file's ``Metrics`` records as numpy
arrays). Rows follow ``RunInfo.history()``'s rules, so both paths give the same table:
a stream label's incarnations are one series; with ``keys`` a row is kept when it holds
at least one of them; rows are ordered by step, then time, ties in stream order (label,
incarnation) and then file order.

``fold_columns`` gives the ``StreamFold`` that folding the file's records one by one
gives, without making a record object per ``Metrics`` row.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .columns import MetricColumns, read_columns
from .fold import StreamFold
from .frames import scan


@dataclass
class StreamColumns:
    """One stream label's history as arrays of equal length: ``step`` (int64), ``time``
    (Unix seconds), ``weight`` (NaN where none was given) and ``values[key]`` (float64,
    NaN where a row lacks the key). ``cols["step"]``, ``cols["loss"]`` also work."""

    label: str
    step: np.ndarray
    time: np.ndarray
    weight: np.ndarray
    values: dict[str, np.ndarray]
    present: dict[str, np.ndarray]  # which rows hold each key (a NaN may be logged)
    kinds: dict[str, set[str]]  # the types logged under each key: "float", "int", "bool"
    place: dict[str, int]  # where in its first log() call's dict each key came

    def __len__(self) -> int:
        return len(self.step)

    def __getitem__(self, name: str) -> np.ndarray:
        if name in ("step", "time", "weight"):
            return getattr(self, name)  # type: ignore[no-any-return]
        return self.values[name]


def fold_columns(path: Path, keys: list[str] | None = None) -> tuple[StreamFold, MetricColumns]:
    """The stream's fold and its columns (``keys``: which value columns to keep; the
    first non-finite values are found in those, so every key's with ``keys=None``)."""
    cols = read_columns(path, keys)
    fold = StreamFold()
    if not cols.ascending:  # replays or disorder: the record-by-record rules decide
        fold.apply(scan(path.read_bytes()[: cols.damage.offset if cols.damage else None]).records)
        return fold, cols
    fold.apply(cols.others)
    n = len(cols)
    if n == 0:
        return fold, cols
    logged = [k for k, m in cols.present.items() if m.any()]
    # last_values is filled in the order keys were first logged, as dict.update does.
    fold.last_values = cols.last_values(sorted(logged, key=cols.first.__getitem__))
    fold.metric_keys = set(logged)
    fold.metrics_records += n
    fold.points += int(sum(int(np.count_nonzero(m)) for m in cols.present.values()))
    fold.last_step = max(fold.last_step, int(cols.step.max()))
    if fold.first_time is None or int(cols.seq[0]) < _first_other_seq(cols):
        fold.first_time = float(cols.time[0])
    latest = float(cols.time.max())
    if fold.last_time is None or latest > fold.last_time:
        fold.last_time = latest
    fold.last_seq = max(fold.last_seq, int(cols.seq[-1]))
    for key, col in cols.values.items():  # the keys read: every one when keys is None
        bad = np.flatnonzero(cols.present[key] & ~np.isfinite(col))
        if len(bad):  # the lowest (step, time), as the record-by-record fold keeps
            i = int(bad[np.lexsort((cols.time[bad], cols.step[bad]))[0]])
            fold.note_nonfinite(key, int(cols.step[i]), float(cols.time[i]), float(col[i]))
    cols._records = None  # the last values are read: let the file's bytes go
    return fold, cols


def _first_other_seq(cols: MetricColumns) -> int:
    return cols.others[0].seq if cols.others else 2**63 - 1


def merge(
    label: str,
    parts: list[MetricColumns],
    keys: Sequence[str] | None,
    step_range: tuple[int, int] | None,
) -> StreamColumns:
    """One label's incarnations as one series, filtered and ordered (module docstring)."""
    names = _key_order(parts) if keys is None else list(dict.fromkeys(keys))
    step = np.concatenate([p.step for p in parts]) if parts else np.empty(0, np.int64)
    time = np.concatenate([p.time for p in parts]) if parts else np.empty(0)
    weight = np.concatenate([p.weight for p in parts]) if parts else np.empty(0)
    values, present = {}, {}
    for name in names:
        values[name] = np.concatenate([_column(p, name) for p in parts]) if parts else time[:0]
        present[name] = (
            np.concatenate([p.present.get(name, np.zeros(len(p), bool)) for p in parts])
            if parts
            else np.zeros(0, bool)
        )
    keep = np.ones(len(step), bool)
    if keys is not None:
        keep = np.zeros(len(step), bool)
        for mask in present.values():
            keep |= mask
    if step_range is not None:
        keep &= (step >= step_range[0]) & (step <= step_range[1])
    pick: np.ndarray | slice = slice(None)  # every row, in order: no copies
    if not keep.all() or not _in_order(step, time):
        order = np.flatnonzero(keep)
        if not _in_order(step[order], time[order]):
            order = order[np.lexsort((time[order], step[order]))]
        pick = order
    return StreamColumns(
        label,
        step[pick],
        time[pick],
        weight[pick],
        {k: v[pick] for k, v in values.items()},
        {k: m[pick] for k, m in present.items()},
        {k: set().union(*(p.kinds.get(k, set()) for p in parts)) for k in names},
        {k: min((p.first[k] for p in parts if k in p.first), default=(0, 0))[1] for k in names},
    )


def _in_order(step: np.ndarray, time: np.ndarray) -> bool:
    """Already sorted by step, then time (a stable sort would change nothing)."""
    ds, dt = np.diff(step), np.diff(time)
    return bool(np.all((ds > 0) | ((ds == 0) & (dt >= 0))))


def _column(part: MetricColumns, name: str) -> np.ndarray:
    col = part.values.get(name)
    return col if col is not None else np.full(len(part), np.nan)


def _key_order(parts: list[MetricColumns]) -> list[str]:
    seen: dict[str, None] = {}
    for part in parts:
        logged = [k for k, m in part.present.items() if m.any()]
        for k in sorted(logged, key=part.first.__getitem__):
            seen.setdefault(k, None)
    return list(seen)


@dataclass
class Table:
    """``history()``'s rows as columns, in its row order, named in the column order
    ``pandas.DataFrame(history())`` gives. The float64 columns are the rows of ``block``
    (named by ``block_names``), so a DataFrame takes them as one block, uncopied."""

    columns: list[str]
    arrays: dict[str, np.ndarray]
    block: np.ndarray
    block_names: list[str]

    def to_pandas(self, pd: Any) -> Any:
        df = pd.DataFrame(self.block.T, columns=self.block_names, copy=False)
        for i, name in enumerate(self.columns):
            if name not in self.block_names:
                df.insert(i, name, self.arrays[name])
        return df

    def to_polars(self, pl: Any) -> Any:
        return pl.DataFrame({c: self.arrays[c] for c in self.columns})


def frame_columns(series: list[StreamColumns]) -> Table | None:
    """``history()``'s table from ``scan()``'s series; None when a column needs Python
    objects (bools with gaps or mixed with numbers: build it from the rows instead).

    Value columns keep the type pandas gives the rows: int64 for ints in every row, bool
    for bools in every row, else float64 with NaN in the gaps.
    """
    lens = [len(s) for s in series]
    step = np.concatenate([s.step for s in series])
    time = np.concatenate([s.time for s in series])
    order = None if _in_order(step, time) else np.lexsort((time, step))
    weight = _ordered([s.weight for s in series], order)
    columns, masks = _frame_layout(series, weight, order)
    whole = _whole_types(masks, _kinds(series))
    if whole is None:
        return None
    block_names = [c for c in columns if c != "step" and c != "label" and c not in whole]
    block = np.empty((len(block_names), len(step)))
    codes = np.repeat(np.arange(len(series)), lens)
    labels = np.array([s.label for s in series], dtype=object)
    arrays: dict[str, np.ndarray] = {
        "step": step if order is None else step[order],
        "label": labels[codes if order is None else codes[order]],
    }
    _fill_values(arrays, series, order, weight, block, block_names, whole)
    return Table(columns, arrays, block, block_names)


def _fill_values(
    arrays: dict[str, np.ndarray],
    series: list[StreamColumns],
    order: np.ndarray | None,
    weight: np.ndarray,
    block: np.ndarray,
    block_names: list[str],
    whole: dict[str, type],
) -> None:
    """Put the float columns (``time``, ``weight``, the keys) into the rows of ``block``
    and every value column into ``arrays``; the int and bool ones in their own type."""
    for i, name in enumerate(block_names):
        if name == "weight":
            block[i] = weight
            arrays[name] = block[i]
        elif name == "time":
            arrays[name] = _ordered([s.time for s in series], order, out=block[i])
        else:
            parts = [s.values.get(name, np.full(len(s), np.nan)) for s in series]
            arrays[name] = _ordered(parts, order, out=block[i])
    for name, dtype in whole.items():
        parts = [s.values.get(name, np.full(len(s), np.nan)) for s in series]
        arrays[name] = _ordered(parts, order).astype(dtype)


def _ordered(
    parts: list[np.ndarray], order: np.ndarray | None, out: np.ndarray | None = None
) -> np.ndarray:
    """``parts`` end to end, in the table's row ``order`` (None: already in order)."""
    if order is None:
        return np.concatenate(parts, out=out)
    return np.take(np.concatenate(parts), order, out=out)


def _frame_layout(
    series: list[StreamColumns], weight: np.ndarray, order: np.ndarray | None
) -> tuple[list[str], dict[str, np.ndarray]]:
    """The table's columns, ``step``, ``time``, ``label`` and then each key in the order
    of its first row (a tie: the place in its first ``log()`` call), and each key's rows
    (a mask in row order) for the keys some row holds."""
    names = list(dict.fromkeys(k for s in series for k in s.values))
    first: dict[str, tuple[int, int, int]] = {}
    masks: dict[str, np.ndarray] = {}
    has_weight = ~np.isnan(weight)
    if has_weight.any():
        first["weight"] = (int(np.argmax(has_weight)), 0, 0)
    for name in names:
        mask = _ordered([s.present.get(name, np.zeros(len(s), bool)) for s in series], order)
        if mask.any():
            masks[name] = mask
            place = min((s.place[name] for s in series if name in s.place), default=0)
            first[name] = (int(np.argmax(mask)), 1, place)
    return ["step", "time", "label", *sorted(first, key=first.__getitem__)], masks


def _kinds(series: list[StreamColumns]) -> dict[str, set[str]]:
    """The types logged under each key, over every stream."""
    kinds: dict[str, set[str]] = {}
    for s in series:
        for k, kind in s.kinds.items():
            kinds.setdefault(k, set()).update(kind)
    return kinds


def _whole_types(
    masks: dict[str, np.ndarray], kinds: dict[str, set[str]]
) -> dict[str, type] | None:
    """The int or bool columns (that type in every row); None when a column needs
    Python objects, as pandas keeps them (True/False with gaps or with numbers)."""
    whole: dict[str, type] = {}
    for name, mask in masks.items():
        kind = kinds.get(name, {"float"})
        full = bool(mask.all())
        if kind == {"int"} and full:
            whole[name] = np.int64
        elif kind == {"bool"} and full:
            whole[name] = np.bool_
        elif "bool" in kind:
            return None
    return whole


def columns_from_rows(
    rows: list[dict[str, Any]], keys: Sequence[str] | None, step_range: tuple[int, int] | None
) -> dict[str, StreamColumns]:
    """``scan()``'s arrays from ``history()``-style rows (a reader without files)."""
    fixed = {"step", "time", "label", "weight"}
    by_label: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        if step_range is None or step_range[0] <= row["step"] <= step_range[1]:
            by_label.setdefault(row["label"], []).append(row)
    out: dict[str, StreamColumns] = {}
    for label, group in by_label.items():
        names = list(keys) if keys is not None else []
        if keys is None:
            names = list(dict.fromkeys(k for row in group for k in row if k not in fixed))
        values = {k: np.array([float(r.get(k, np.nan)) for r in group]) for k in names}
        present = {k: np.array([k in r for r in group], bool) for k in names}
        kinds = {
            k: {
                "bool" if type(r[k]) is bool else "int" if type(r[k]) is int else "float"
                for r in group
                if k in r
            }
            for k in names
        }
        out[label] = StreamColumns(
            label,
            np.array([r["step"] for r in group], np.int64),
            np.array([r["time"] for r in group], np.float64),
            np.array([r.get("weight", np.nan) for r in group], np.float64),
            values,
            present,
            kinds,
            {k: 0 for k in names},
        )
    return out
