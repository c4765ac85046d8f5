"""The alert events found in the records themselves, decided in their ingest transaction.

Two events are facts of one stream's records and need nothing else:

* ``nonfinite``: the first NaN / +Inf / -Inf value of a metric (key: the metric), with
  the rank, step, time and value that showed it;
* ``alert``: each ``run.alert()`` record (key: stream and seq).

``found`` picks them out of a batch (one numpy test over every metric column at once,
then one per column only when some value is not finite); ``decide_found`` decides them with
``alerts.decide`` *after* the batch's aggregate blocks are locked, in key order, so two
ingesters never wait on each other's locks in opposite orders. The ingest of the
records and the decision commit together: a replayed upload decides nothing again.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..alerting import LEVELS
from ..stream import records as R
from .alerts import decide
from .chunks import Points
from .tx import Tx


@dataclass(frozen=True, order=True)
class Found:
    """One event a batch showed (ordered by its kind and key)."""

    kind: str
    key: str
    title: str = field(compare=False)
    text: str = field(compare=False)
    level: str = field(compare=False)
    time: float = field(compare=False)
    details: dict[str, Any] = field(compare=False, default_factory=dict)


def _spelled(v: float) -> str:
    return "NaN" if math.isnan(v) else ("+Inf" if v > 0 else "-Inf")


def found(
    start: R.StreamStart | None, records: list[R.AnyRecord], points: dict[str, Points]
) -> list[Found]:
    """The events of one stream's new records (``points``: its metric columns)."""
    label = start.label if start is not None else "?"
    rank = start.rank if start is not None else -1
    inc = start.incarnation if start is not None else 0
    who = f"rank {rank}" if rank >= 0 else label
    out: list[Found] = []
    floats = [p.value for p in points.values() if p.kind == "f"]  # ints, bools: finite
    if floats and np.isfinite(np.concatenate(floats)).all():
        floats = []  # the usual batch: every value finite, one test for all of them
    for name, p in points.items() if floats else ():
        if p.kind != "f":
            continue
        ok = np.isfinite(p.value)
        if ok.all():
            continue
        i = int(np.argmin(ok))
        value = float(p.value[i])
        step = int(p.step[i])
        out.append(
            Found(
                "nonfinite",
                name,
                f"{name} is {_spelled(value)} ({who}, step {step})",
                f"{name} first logged a non-finite value: {_spelled(value)} by {who} "
                f"({label}) at step {step}.",
                "ERROR",
                float(p.time[i]),
                {
                    "metric": name,
                    "label": label,
                    "rank": rank,
                    "step": step,
                    "value": _spelled(value),
                },
            )
        )
    for rec in records:
        if type(rec) is R.Alert:
            level = rec.level if rec.level in LEVELS else "INFO"
            out.append(
                Found(
                    "alert",
                    f"{label}#{inc}:{rec.seq}",
                    str(rec.title)[:300] or "alert",
                    str(rec.text)[:4000],
                    level,
                    rec.time,
                    {"label": label, "rank": rank},
                )
            )
    return out


def decide_found(tx: Tx, per_run: dict[int, list[Found]]) -> None:
    """Decide the events of each run (see the module docstring)."""
    for run in sorted(per_run):
        for f in sorted(per_run[run]):
            decide(tx, run, f.kind, f.key, f.title, f.text, f.level, f.details, f.time)
