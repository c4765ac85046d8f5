"""Runs as the store tells them: stream rows → ``RunInfo``, and run listing.

The story of a run is the local reader's: stream rows become ``StreamFacts`` and
``rankwise.read.fold.fold_run`` makes the run, the same function ``Api(dir=)`` uses, so
the two cannot drift. A stream's state depends on *now*, so it is computed at read time,
never stored.

Listing works in two passes so that a page costs what it shows: first every run of the
project from light columns (no config or summary decoded) to filter, sort and count, then
the full rows of the one page.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

import msgspec

from ..errors import UsageError
from ..read.fold import StreamFacts, fold_run
from ..stream import records as R
from ..stream.fold import LocalPids, StreamFold
from ..wire.runs import RunInfo
from .base import RunQuery

SORT_KEYS = ("created", "updated", "name", "state", "steps")

_start_dec = msgspec.msgpack.Decoder(R.StreamStart)
_finish_dec = msgspec.msgpack.Decoder(R.Finish)

# The columns of ``streams`` a stream's facts are read from, in this order.
STREAM_COLS = (
    "s.label, s.incarnation, s.acked_seq, s.start, s.finish, s.first_time, s.last_time, "
    "s.last_step, s.points, s.dropped"
)


def stream_facts(cols: Sequence[Any], fold: StreamFold | None = None) -> StreamFacts:
    """A stream's facts from ``STREAM_COLS`` (light: no config or summary) or, with its
    ``fold``, in full."""
    label, inc, acked, start, finish, first_t, last_t, last_step, points, dropped = cols
    return StreamFacts(
        label=label,
        incarnation=int(inc),
        start=fold.start if fold else (_start_dec.decode(start) if start else None),
        finish=fold.finish if fold else (_finish_dec.decode(finish) if finish else None),
        acked_seq=int(acked),
        first_time=first_t,
        last_time=last_t,
        last_step=int(last_step),
        points=int(points),
        dropped=int(dropped),
        config=dict(fold.config) if fold else {},
        summary=fold.summary if fold else {},
        metric_defs=dict(fold.metric_defs) if fold else {},
        stall=fold.stall if fold else None,
        first_nonfinite=dict(fold.first_nonfinite) if fold else {},
        provenance=dict(fold.provenance) if fold else {},
    )


def run_info(
    project: str,
    run_id: str,
    streams: list[StreamFacts],
    crash_timeout: float,
    now: float | None = None,
    full: bool = True,
    local_pids: LocalPids = False,
) -> RunInfo:
    """Fold a run's streams (``rankwise.read.fold``), settling every state for ``now``;
    ``local_pids`` as for ``rankwise.stream.fold.stream_state``."""
    now = time.time() if now is None else now
    return fold_run(
        project,
        run_id,
        streams,
        crash_timeout,
        now,
        with_rank_summaries=full,
        local_pids=local_pids,
    )


def check_sort(sort: str) -> tuple[str, bool]:
    desc = sort.startswith("-")
    name = sort[1:] if desc else sort
    if name not in SORT_KEYS:
        raise UsageError(
            f"cannot sort runs by {sort!r}: use one of {', '.join(SORT_KEYS)}, "
            "with a leading '-' for descending"
        )
    return name, desc


def select(runs: Iterable[RunInfo], q: RunQuery) -> tuple[list[RunInfo], int]:
    """Filter, sort and page ``runs`` by ``q``; returns the page and the total count."""
    name, desc = check_sort(q.sort)
    if q.limit < 0 or q.offset < 0:
        raise UsageError("limit and offset must be zero or more")
    states, tags = set(q.states), set(q.tags)
    needle = q.search.lower() if q.search else None
    kept = []
    for r in runs:
        if q.project is not None and r.project != q.project:
            continue
        if q.group is not None and r.group != q.group:
            continue
        if q.job_type is not None and r.job_type != q.job_type:
            continue
        if states and r.state not in states:
            continue
        if tags and not tags <= set(r.tags):
            continue
        if needle and needle not in r.name.lower() and needle not in r.id.lower():
            continue
        kept.append(r)
    kept.sort(key=lambda r: (r.project, r.id))  # ties come out in a stable order
    present = [r for r in kept if getattr(r, name) is not None]
    missing = [r for r in kept if getattr(r, name) is None]  # unknown times sort last
    present.sort(key=lambda r: getattr(r, name), reverse=desc)
    ordered = present + missing
    return ordered[q.offset : q.offset + q.limit], len(ordered)
