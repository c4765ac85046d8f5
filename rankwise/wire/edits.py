"""A run's edits as kept and sent (``GET .../runs/{run}/edits``; ``rankwise.edits``
checks and merges them)."""

from __future__ import annotations

from typing import Any

import msgspec


class Edit(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One change of one field of a run: its new whole value (tags: the whole list)."""

    field: str  # name, tags, notes, group or job_type
    value: Any  # str, list[str] (tags) or None (cleared)
    at: float  # Unix seconds
    source: str = "api"  # run (the live run), api, cli or ui
    who: str | None = None  # the token's name or id that made it, where known
