"""Which rank went wrong first: the first non-finite value of each metric, per rank.

A NaN on one rank reaches every rank at the next collective (an all_reduce of the
gradients), so by the time a chart shows NaN everywhere the cause is hidden. Each stream
keeps, per metric, its first non-finite value (NaN, +Inf, -Inf) with its step and time
(``StreamFold.first_nonfinite``: set once, at ingest in the store and while folding in
the local reader). Across the streams of a run:

* ``first_nonfinite`` lists, per metric, each rank's first non-finite value, earliest
  first: by step (the training's own clock, the same on every rank), then time, then
  rank. Each label's earliest over its incarnations counts.
* ``divergence`` summarises each metric in one line: the rank (or ranks) at the lowest
  step went first; the others *followed*, grouped by step ("train/loss: rank 3 NaN at
  step 1,234; ranks 0–2 followed at 1,235").

Pure functions of per-stream facts: the local reader and the server use the same rule
(``read.fold.fold_run``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from .hang import ranks_text
from .stream.fold import FirstNonFinite


@dataclass
class RankNonFinite:
    """One rank's first non-finite value of a metric."""

    label: str
    rank: int
    step: int
    time: float
    value: str  # NaN, +Inf or -Inf


@dataclass
class Divergence:
    """One metric's divergence: who went non-finite first, and who followed when."""

    metric: str
    first: list[RankNonFinite]  # the rank(s) at the lowest step
    then: list[RankNonFinite] = field(default_factory=list)  # the others, in order
    message: str = ""


@dataclass(frozen=True)
class StreamNonFinite:
    """What the rule needs of one stream."""

    label: str
    rank: int
    first: dict[str, FirstNonFinite]


def _order(r: RankNonFinite) -> tuple[int, float, int, str]:
    return (r.step, r.time, r.rank, r.label)


def first_nonfinite(streams: Iterable[StreamNonFinite]) -> dict[str, list[RankNonFinite]]:
    """Per metric, each rank's first non-finite value, earliest first (module docstring)."""
    best: dict[str, dict[str, RankNonFinite]] = {}
    for s in streams:
        for metric, f in s.first.items():
            got = RankNonFinite(s.label, s.rank, f.step, f.time, f.value)
            held = best.setdefault(metric, {}).get(s.label)
            if held is None or _order(got) < _order(held):
                best[metric][s.label] = got
    return {m: sorted(per.values(), key=_order) for m, per in sorted(best.items())}


def _who(ranks: list[RankNonFinite]) -> str:
    if all(r.rank >= 0 for r in ranks):
        return ranks_text([r.rank for r in ranks])
    return ", ".join(r.label for r in ranks)


def _step(step: int) -> str:
    return f"{step:,}"


def divergence(first: dict[str, list[RankNonFinite]]) -> list[Divergence]:
    """Each metric's one-line summary, the metric that went first first."""
    out = []
    for metric, ranks in first.items():
        if not ranks:
            continue
        low = ranks[0].step
        lead = [r for r in ranks if r.step == low]
        then = [r for r in ranks if r.step != low]
        kinds = sorted({r.value for r in lead})
        message = f"{metric}: {_who(lead)} {'/'.join(kinds)} at step {_step(low)}"
        steps: dict[int, list[RankNonFinite]] = {}
        for r in then:
            steps.setdefault(r.step, []).append(r)
        parts = [f"{_who(rs)} at {_step(step)}" for step, rs in steps.items()]
        if parts:
            head = parts[0].rsplit(" at ", 1)
            parts[0] = f"{head[0]} followed at {head[1]}"
            message += "; " + ", ".join(parts)
        out.append(Divergence(metric=metric, first=lead, then=then, message=message))
    out.sort(key=lambda d: (d.first[0].step, d.first[0].time, d.metric))
    return out
