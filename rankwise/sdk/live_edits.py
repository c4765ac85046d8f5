"""``run.name = ...``, ``run.tags = ...``, ``run.notes = ...`` on the live run.

Each assignment becomes one ``RunEdit`` record in the stream (``rankwise.edits`` merges
them by time with the edits made after the fact) and the run's own view of the field
changes at once. As every tracking call, it never raises for a run that is not
recording: a bad value is warned about once per field and skipped.
"""

from __future__ import annotations

from typing import Any

import msgspec

from .. import _log
from ..edits import check_value
from ..errors import UsageError
from ..stream import records as R

LIVE_FIELDS = ("name", "tags", "notes")  # what W&B lets a live run change


def checked(field: str, value: Any) -> tuple[bool, Any]:
    """``(True, the value as recorded)``, or ``(False, None)`` after a warning for a value
    that cannot be recorded (never raises: a tracking call)."""
    if field == "tags" and isinstance(value, tuple):
        value = list(value)
    try:
        return True, check_value(field, value)
    except UsageError as exc:
        _log.warn(f"run.{field} = {value!r:.60} was not recorded: {exc}")
        return False, None


def edited_start(start: R.StreamStart, field: str, clean: Any) -> R.StreamStart:
    """The run's own view of its start record with ``field`` changed."""
    if field == "tags":
        return msgspec.structs.replace(start, tags=list(clean))
    return msgspec.structs.replace(start, **{field: clean})
