"""Runs as the store tells them: stream rows → ``RunRow``, and run listing.

The story of a run is the local reader's (``rankwise.api.RunInfo``): the same fold, the
same ``stream_state``/``run_state`` rules, the same precedence when streams disagree
(primary last, latest incarnation last, so their start, config and summary win). A
stream's state depends on *now*, so it is computed at read time, never stored.

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
from ..stream import records as R
from ..stream.fold import StreamFold, StreamState, run_state, stream_state
from .base import RunQuery, RunRow, StreamKey, StreamRow

SORT_KEYS = ("created", "updated", "name", "state", "steps")

_start_dec = msgspec.msgpack.Decoder(R.StreamStart)
_finish_dec = msgspec.msgpack.Decoder(R.Finish)

# The columns of ``streams`` a StreamRow is built from, in this order.
STREAM_COLS = (
    "s.label, s.incarnation, s.acked_seq, s.start, s.finish, s.first_time, s.last_time, "
    "s.last_step, s.points, s.dropped"
)


def stream_row(
    project: str, run_id: str, cols: Sequence[Any], fold: StreamFold | None = None
) -> StreamRow:
    """A StreamRow from ``STREAM_COLS`` (light) or, with its ``fold``, in full."""
    label, inc, acked, start, finish, first_t, last_t, last_step, points, dropped = cols
    return StreamRow(
        key=StreamKey(project, run_id, label, int(inc)),
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
    )


def _is_primary(s: StreamRow) -> bool:
    return bool(s.start.is_primary) if s.start is not None else False


def run_row(
    project: str,
    run_id: str,
    streams: list[StreamRow],
    crash_timeout: float,
    now: float | None = None,
) -> RunRow:
    """Fold stream rows into a run, settling every state for ``now``."""
    now = time.time() if now is None else now
    for s in streams:
        s.state = stream_state(
            StreamFold(start=s.start, finish=s.finish, last_time=s.last_time), now, crash_timeout
        )
    state, crashed = run_state(
        StreamState(s.key.label, s.key.incarnation, _is_primary(s), s.state) for s in streams
    )
    ordered = sorted(streams, key=lambda s: (_is_primary(s), s.key.incarnation, s.key.label))
    starts = [s.start for s in ordered if s.start is not None]
    primary = starts[-1] if starts else None
    config: dict[str, Any] = {}
    summary: dict[str, Any] = {}
    for s in ordered:
        config.update(s.config)
        summary.update(s.summary)
    created = [s.start.time if s.start else s.first_time for s in streams]
    seen = [s.last_time for s in streams if s.last_time is not None]
    return RunRow(
        project=project,
        run_id=run_id,
        name=(primary.name if primary else None) or run_id,
        group=primary.group if primary else None,
        job_type=primary.job_type if primary else None,
        tags=list(primary.tags) if primary else [],
        notes=primary.notes if primary else None,
        run_mode=primary.run_mode if primary else None,
        world_size=primary.world_size if primary else len(streams),
        num_nodes=primary.num_nodes if primary else 1,
        created=min((t for t in created if t is not None), default=None),
        updated=max(seen, default=None),
        steps=max((s.last_step for s in streams), default=-1) + 1,
        state=state,
        crashed=crashed,
        config=config,
        summary=summary,
        streams=sorted(streams, key=lambda s: (s.key.label, s.key.incarnation)),
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


def select(runs: Iterable[RunRow], q: RunQuery) -> tuple[list[RunRow], int]:
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
        if needle and needle not in r.name.lower() and needle not in r.run_id.lower():
            continue
        kept.append(r)
    kept.sort(key=lambda r: (r.project, r.run_id))  # ties come out in a stable order
    present = [r for r in kept if getattr(r, name) is not None]
    missing = [r for r in kept if getattr(r, name) is None]  # unknown times sort last
    present.sort(key=lambda r: getattr(r, name), reverse=desc)
    ordered = present + missing
    return ordered[q.offset : q.offset + q.limit], len(ordered)
