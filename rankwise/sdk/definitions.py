"""``run.define_metric()``: checked on every rank, recorded as a ``DefineMetric`` record.

Every rank checks its arguments (a bad ``reduce`` is a ``UsageError`` everywhere, not
only where it is recorded); a recording rank writes the definition through its writer,
so it lands in the stream in order with the values. As in W&B, a second definition of a
name updates the first: what it leaves out (``None``) keeps its earlier value. The run
keeps the latest definition of each name, whichever rank wrote it
(``rankwise.read.fold``), so calling it on every rank or on the primary alone is the
same.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import msgspec

from .. import _log
from ..errors import UsageError
from ..metric_defs import DEFAULT_REDUCE, GOALS, check_name, check_reduce
from ..stream import records as R

if TYPE_CHECKING:
    from .handle import RunHandle
    from .writer import StreamWriter

# The handle's slot holding the run's definitions so far, by name (what a later call
# with None keeps).
HELD = "metric_defs"


def _text(what: str, value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise UsageError(f"define_metric({what}={value!r}): give a string")


def define_metric(
    run: RunHandle,
    writer: StreamWriter | None,
    closed: bool,
    name: str,
    *,
    reduce: str | None = None,
    step_metric: str | None = None,
    summary: str | None = None,
    goal: str | None = None,
    hidden: bool | None = None,
) -> None:
    """Check and record one definition (``Run.define_metric``'s body)."""
    check_name(name)
    if reduce is not None:
        check_reduce(reduce)
    if goal is not None:  # as W&B: "min", "max", "minimize", "Maximize" ...
        short = goal[:3].lower() if isinstance(goal, str) else None
        if short not in ("min", "max"):
            raise UsageError(f"define_metric(goal={goal!r}): give 'minimize' or 'maximize'")
        goal = GOALS[0] if short == "min" else GOALS[1]
    step_metric = _text("step_metric", step_metric)
    summary = _text("summary", summary)
    if hidden is not None and not isinstance(hidden, bool):
        raise UsageError(f"define_metric(hidden={hidden!r}): give True or False")
    if writer is None:
        if closed and run.recording():
            _log.warn(f"define_metric({name!r}) after run {run.run_id!r} ended: not recorded")
        return  # a rank that does not record: checked, nothing to keep
    held: dict[str, R.DefineMetric] = run.slots.setdefault(HELD, {})
    old = held.get(name) or R.DefineMetric(0, 0.0, name, DEFAULT_REDUCE)
    new = R.DefineMetric(
        0,
        time.time(),
        name,
        reduce=reduce if reduce is not None else old.reduce,
        step_metric=step_metric if step_metric is not None else old.step_metric,
        summary=summary if summary is not None else old.summary,
        goal=goal if goal is not None else old.goal,
        hidden=hidden if hidden is not None else old.hidden,
    )
    held[name] = new
    if closed:
        if run.recording():
            _log.warn(f"define_metric({name!r}) after run {run.run_id!r} ended: not recorded")
        return

    def build(seq: int, t: float) -> R.Record:
        return msgspec.structs.replace(new, seq=seq, time=t)

    writer.put_control(build)
