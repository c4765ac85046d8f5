"""The summary of a shared run, read back: each rank's own values and the cross-rank line's.

``run.summary[k] = v`` and the last logged values are kept *per stream*: when several
ranks set the same key, each rank's value is its own (``summary_ranks``), and the run's
``summary`` is the primary rank's (what a single-process run would show). The charts of
a shared run draw the cross-rank line instead (the mean, or the ``reduce`` that
``run.define_metric`` chose: ``CrossRankValue.value``), so ``summary_cross_rank`` gives,
per metric, that line's value at its last *complete* step: the last one every rank has
reached (every live rank while the run runs; see ``complete_step``), with the same rules
as ``rankwise.store.aggregate``:
NaN and ±Inf are left out of the mean, min and max but counted (``nan``, ``posinf``,
``neginf``), and the weighted mean is used only where every value there carried a
weight. A step whose every value was non-finite is still the last step: its mean, min and
max say NaN (or +Inf / -Inf where only that infinity was logged), never an older value.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from ..metric_defs import reduce_of
from ..wire.runs import CrossRankValue

if TYPE_CHECKING:
    from ..stream.columns import MetricColumns


class _Stream(Protocol):
    label: str
    incarnation: int
    state: str
    last_step: int


def complete_step(streams: Iterable[_Stream]) -> int | None:
    """The last step every rank has reached (of each label's latest incarnation that has
    logged a step). While any is running: the lowest last step of the running ones (a
    rank that ended early does not hold a live run back). Once none is running: the
    lowest last step of all, so the steps only some ranks reached (ranks that were
    killed, crashed or logged fewer steps) stay *partial*. None when every step is
    complete (nothing running and every rank at the same last step)."""
    latest: dict[str, _Stream] = {}
    for s in streams:
        if s.label not in latest or s.incarnation > latest[s.label].incarnation:
            latest[s.label] = s
    logged = [s for s in latest.values() if s.last_step >= 0]
    live = [s.last_step for s in logged if s.state == "running"]
    if live:
        return min(live)
    ends = [s.last_step for s in logged]
    if not ends or min(ends) == max(ends):
        return None
    return min(ends)


class CrossRankLast:
    """Folds ``(step, values, weight)`` points of every stream into each metric's
    cross-rank aggregate at its last step ``<= upto``."""

    def __init__(self, upto: int | None) -> None:
        self.upto = upto
        self._at: dict[str, tuple[int, list[tuple[float, float | None]]]] = {}

    def add(self, step: int, values: dict[str, Any], weight: float | None) -> None:
        if self.upto is not None and step > self.upto:
            return
        for key, v in values.items():
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                continue
            held = self._at.get(key)
            if held is None or step > held[0]:
                self._at[key] = (step, [(float(v), weight)])
            elif step == held[0]:
                held[1].append((float(v), weight))

    def add_columns(self, cols: MetricColumns) -> bool:
        """``add()`` of every ``Metrics`` record of one stream, from its columns
        (``rankwise.stream.columns``, every key read): per key only the rows at its last
        step ``<= upto`` are looked at. False, adding nothing, when a key holds bools
        beside numbers (``add()`` skips the bools value by value: read the records)."""
        if any("bool" in k and len(k) > 1 for k in cols.kinds.values()):
            return False
        step = cols.step
        upto = None if self.upto is None else step <= self.upto
        for key, present in cols.present.items():
            if cols.kinds.get(key) == {"bool"}:
                continue
            rows = present if upto is None else present & upto
            if not rows.any():
                continue
            at = int(step[rows].max())
            rows = rows & (step == at)
            ws = [None if w != w else w for w in cols.weight[rows].tolist()]
            pts = list(zip(cols.values[key][rows].tolist(), ws, strict=True))
            held = self._at.get(key)
            if held is None or at > held[0]:
                self._at[key] = (at, pts)
            elif at == held[0]:
                held[1].extend(pts)
        return True

    def add_tail(self, tail: MetricColumns, keys: Iterable[str]) -> bool:
        """``add_columns`` of a stream's last rows (``columns.tail``: every row from some
        step on, steps never going back) when they hold what it needs: for each of
        ``keys`` (every key the stream logged) a row at or below ``upto``, so that its
        last such step is among them, with all its rows. False, adding nothing, when one
        is missing (read the whole stream)."""
        upto = None if self.upto is None else tail.step <= self.upto
        for key in keys:
            present = tail.present.get(key)
            if present is None or not (present if upto is None else present & upto).any():
                return False
        return self.add_columns(tail)

    def result(self, defined: Mapping[str, Any] | None = None) -> dict[str, CrossRankValue]:
        """Each metric's value; ``defined`` (``RunInfo.defined_metrics``) sets each one's
        ``reduce``, the line ``value`` reads (``rankwise.metric_defs``)."""
        out: dict[str, CrossRankValue] = {}
        for key, (step, every) in sorted(self._at.items()):
            pts = [(v, w) for v, w in every if math.isfinite(v)]
            counts = {
                "nan": sum(1 for v, _ in every if v != v),
                "posinf": sum(1 for v, _ in every if v == math.inf),
                "neginf": sum(1 for v, _ in every if v == -math.inf),
            }
            if not pts:
                shown = nonfinite_value(counts["nan"], counts["posinf"], counts["neginf"])
                line = reduce_of(defined or {}, key)
                out[key] = CrossRankValue(step=step, n=0, mean=shown, wmean=shown, min=shown,
                                          max=shown, sum=shown, reduce=line, **counts)  # fmt: skip
                continue
            vals = [v for v, _ in pts]
            total = _fsum(vals)
            mean = total / len(vals)
            ws = [w for _, w in pts]
            wmean = mean
            if all(w is not None and math.isfinite(w) for w in ws):
                wtot = _fsum([w for w in ws if w is not None])
                if wtot > 0:
                    wmean = _fsum([v * (w or 0.0) for v, w in pts]) / wtot
            out[key] = CrossRankValue(
                step=step,
                n=len(vals),
                mean=mean,
                wmean=wmean,
                min=min(vals),
                max=max(vals),
                sum=total,
                reduce=reduce_of(defined or {}, key),
                **counts,
            )
        return out


def nonfinite_value(nan: int, posinf: int, neginf: int) -> float:
    """What a step with no finite value stands for (as ``Agg.nonfinite``): NaN where a
    NaN or both infinities were logged, else the one infinity."""
    if posinf and not (nan or neginf):
        return math.inf
    if neginf and not (nan or posinf):
        return -math.inf
    return math.nan


def environment(start: Any) -> dict[str, Any]:
    """What the primary rank recorded about where it ran (its ``StreamStart``)."""
    if start is None:
        return {}
    return {
        "command": list(start.argv),
        "python": start.python,
        "platform": start.platform,
        "launcher": start.launcher,
        "rankwise_version": start.rankwise_version,
        "host": start.host,
    }


def _fsum(values: list[float]) -> float:
    """``math.fsum``, or where the exact sum is past the largest float, the float sum
    (±Inf, or NaN for +Inf plus -Inf): what the store's aggregates hold for the same
    values, where ``fsum`` would raise."""
    try:
        return math.fsum(values)
    except (OverflowError, ValueError):
        return float(sum(values))
