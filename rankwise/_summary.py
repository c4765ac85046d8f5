"""The summary of a shared run, read back: each rank's own values and the cross-rank line's.

``run.summary[k] = v`` and the last logged values are kept *per stream*: when several
ranks set the same key, each rank's value is its own (``summary_ranks``), and the run's
``summary`` is the primary rank's (what a single-process run would show). The charts of
a shared run draw the cross-rank line instead (the mean, or the ``reduce`` that
``run.define_metric`` chose: ``CrossRankValue.value``), so ``summary_cross_rank`` gives,
per metric, that line's value at its last *complete* step: the last one every live rank has
reached (see ``complete_step``), with the same rules as ``rankwise.store.aggregate``:
NaN and ±Inf are left out of the mean, min and max but counted (``nan``, ``posinf``,
``neginf``), and the weighted mean is used only where every value there carried a
weight. A step whose every value was non-finite is still the last step: its mean, min and
max say NaN (or +Inf / -Inf where only that infinity was logged), never an older value.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from .metric_defs import reduce_of
from .read.model import CrossRankValue


def complete_step(streams: Iterable[tuple[str, int]]) -> int | None:
    """The lowest last step among running streams (``(state, last_step)``) that have
    logged one; None when none is running, so every step is complete."""
    live = [step for state, step in streams if state == "running" and step >= 0]
    return min(live) if live else None


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
            mean = math.fsum(vals) / len(vals)
            ws = [w for _, w in pts]
            wmean = mean
            if all(w is not None and math.isfinite(w) for w in ws):
                wtot = math.fsum(w for w in ws if w is not None)
                if wtot > 0:
                    wmean = math.fsum(v * (w or 0.0) for v, w in pts) / wtot
            out[key] = CrossRankValue(
                step=step,
                n=len(vals),
                mean=mean,
                wmean=wmean,
                min=min(vals),
                max=max(vals),
                sum=math.fsum(vals),
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
