"""Chart columns as the API replies them (``schemas`` documents them): a stream's series
and the cross-rank band, with NaN and ±Inf spelled out for JSON; and the run's complete
step, past which a band value is partial.

Runs themselves need no shaping: they are ``rankwise.read.model`` structs, encoded as
they are.
"""

from __future__ import annotations

import math
from typing import Any

from .._summary import complete_step as _complete
from ..read.model import RunInfo
from ..store.base import Band, Series

_SPELLED = {math.inf: "Infinity", -math.inf: "-Infinity"}


def nonfinite(xs: list[float], ys: list[float]) -> dict[str, list[Any]]:
    """Where ``ys`` holds NaN or ±Inf, spelled out: JSON turns them into ``null`` (as it
    does a missing value), so a chart could not tell a NaN loss from nothing logged."""
    at = [i for i, y in enumerate(ys) if y != y or y in _SPELLED]
    return {
        "x": [xs[i] for i in at],
        "value": ["NaN" if ys[i] != ys[i] else _SPELLED[ys[i]] for i in at],
    }


def spell_nonfinite(value: Any) -> Any:
    """``value`` with NaN and ±Inf as the strings "NaN", "Infinity", "-Infinity": how a
    JSON reply carries a summary's non-finite values (MessagePack keeps the floats)."""
    if isinstance(value, float) and (value != value or value in _SPELLED):
        return "NaN" if value != value else _SPELLED[value]
    if isinstance(value, dict):
        return {k: spell_nonfinite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [spell_nonfinite(v) for v in value]
    return value


def series_dict(s: Series) -> dict[str, Any]:
    return {
        "label": s.label,
        "x": s.x,
        "y": s.y,
        "downsampled": s.downsampled,
        "nonfinite": nonfinite(s.x, s.y),
    }


def complete_step(run: RunInfo) -> int | None:
    """The last step every live rank has reached: the lowest ``last_step`` among the
    run's running streams that have logged a step. None when no such stream is running
    (every step is then complete). A cross-rank value past it is *partial*: it averages
    only the ranks that got there first, so it is not the job's mean yet."""
    return _complete((s.state, s.last_step) for s in run.streams)


def band_dict(b: Band, complete: int | None = None) -> dict[str, Any]:
    partial = [False] * len(b.x) if complete is None else [s > complete for s in b.step]
    return {
        "step": b.step,
        "nw": b.nw,
        "partial": partial,
        "complete_step": complete,
        "x": b.x,
        "n": b.n,
        "mean": b.mean,
        "wmean": b.wmean,
        "min": b.min,
        "max": b.max,
        "std": b.std,
        "downsampled": b.downsampled,
        "nan": b.nan,
        "posinf": b.posinf,
        "neginf": b.neginf,
    }
