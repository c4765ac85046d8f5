"""``run.alert(title, text, level, wait_duration)``: W&B's signature, an ``Alert`` record.

The record goes through the writer like any other, so it lands in the stream in order
with the values and reaches a server with them; the server delivers it to the project's
alert destinations (``rankwise.alerting``), once per record. Training is never stopped
by it: bad arguments are coerced where the meaning is plain (a number as text, an
unknown level as INFO) and warned about once per kind of mistake; nothing raises.
``wait_duration`` (seconds or a ``timedelta``; default 60 s, as W&B's) is the least time
between two alerts of one title from this process: a call inside it is dropped quietly.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from .. import _log
from ..stream import records as R

if TYPE_CHECKING:
    from .writer import StreamWriter

LEVELS = ("INFO", "WARN", "ERROR")
DEFAULT_WAIT = 60.0


class Alerts:
    """One run's ``alert()`` calls: the per-title wait, and the warnings given."""

    def __init__(self) -> None:
        self._last: dict[str, float] = {}
        self._warn = _log.Once()

    def alert(
        self,
        writer: StreamWriter | None,
        closed: bool,
        title: Any,
        text: Any = "",
        level: Any = None,
        wait_duration: Any = None,
    ) -> bool:
        """Record one alert; True when it was written (False: dropped, see above)."""
        if not isinstance(title, str) or not title.strip():
            self._warn(
                "title", f"run.alert(title={title!r}): give the alert a non-empty string title"
            )
            title = str(title).strip() if title is not None else ""
            if not title:
                return False
        if not isinstance(text, str):
            self._warn("text", "run.alert(text=...): give a string; the value was converted")
            text = "" if text is None else str(text)
        lvl = getattr(level, "value", level) or "INFO"
        if not isinstance(lvl, str) or lvl.upper() not in LEVELS:
            self._warn(
                "level", f"run.alert(level={level!r}): use 'INFO', 'WARN' or 'ERROR'; sent as INFO"
            )
            lvl = "INFO"
        lvl = lvl.upper()
        wait = self._seconds(wait_duration)
        now = time.monotonic()
        last = self._last.get(title)
        if last is not None and now - last < wait:
            return False
        self._last[title] = now
        if writer is None:
            return False  # a process that records nothing (run_mode / rank_scope)
        if closed:
            self._warn("closed", f"run.alert({title!r}) after the run ended: not recorded")
            return False
        writer.put_control(lambda seq, t: R.Alert(seq, t, title, text, lvl, wait))
        return True

    def _seconds(self, wait: Any) -> float:
        if wait is None:
            return DEFAULT_WAIT
        try:
            value = wait.total_seconds() if hasattr(wait, "total_seconds") else float(wait)
        except (TypeError, ValueError, OverflowError):
            value = -1.0
        if not value >= 0 or value == float("inf"):
            self._warn(
                "wait",
                f"run.alert(wait_duration={wait!r}): give seconds (a number "
                f">= 0) or a timedelta; {DEFAULT_WAIT:g} s used",
            )
            return DEFAULT_WAIT
        return float(value)
