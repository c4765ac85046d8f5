"""``run.name = ...``, ``run.tags = ...``, ``run.notes = ...`` on the live run.

Each assignment becomes one ``RunEdit`` record in the stream (``rankwise.edits`` merges
them by time with the edits made after the fact) and the run's own view of the field
changes at once. As every tracking call, it never raises for a run that is not
recording: a bad value is warned about once per field and skipped.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from .. import _log
from ..edits import check_value
from ..errors import UsageError
from ..stream import records as R

if TYPE_CHECKING:
    from .run import Run

LIVE_FIELDS = ("name", "tags", "notes")  # what W&B lets a live run change


def set_field(run: Run, field: str, value: Any) -> None:
    """Record ``field = value`` on ``run`` (see the module docstring)."""
    if field == "tags" and isinstance(value, tuple):
        value = list(value)
    try:
        clean = check_value(field, value)
    except UsageError as exc:
        _log.warn(f"run.{field} = {value!r:.60} was not recorded: {exc}")
        return
    start = run._start
    if field == "tags":
        run._start = msgspec.structs.replace(start, tags=list(clean))
    else:
        run._start = msgspec.structs.replace(start, **{field: clean})
    writer = run._writer
    if writer is None or run._closed:
        if run._recording:
            _log.warn(f"run.{field} was set after run {run.id!r} ended: not recorded")
        return
    writer.put_control(lambda seq, t: R.RunEdit(seq, t, field, clean))
