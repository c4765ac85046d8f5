"""Store rows → the plain objects the API replies with (``schemas`` documents them).

States arrive settled: the store computes them at read time with the local reader's
rules (``rankwise.stream.fold``) and its own crash timeout.
"""

from __future__ import annotations

import math
from typing import Any

from .._summary import complete_step as _complete
from .._summary import environment
from ..failures import StreamEnd, first_failure
from ..store.base import Band, RunRow, Series, StreamRow
from ..stream import records as R


def _is_primary(s: StreamRow) -> bool:
    return bool(s.start.is_primary) if s.start is not None else False


def stream_dict(s: StreamRow) -> dict[str, Any]:
    start, fin = s.start, s.finish
    return {
        "label": s.key.label,
        "incarnation": s.key.incarnation,
        "rank": start.rank if start else -1,
        "local_rank": start.local_rank if start else -1,
        "node": start.node_rank if start else -1,
        "host": start.host if start else "",
        "pid": start.pid if start else 0,
        "is_primary": _is_primary(s),
        "state": s.state,
        "last_step": s.last_step,
        "points": s.points,
        "dropped": s.dropped,
        "started": start.time if start else s.first_time,
        "last_seen": s.last_time,
        "exit_code": fin.exit_code if fin else None,
        "signal": fin.signal if fin else None,
        "error_type": fin.error_type if fin else None,
        "error_message": fin.error_message if fin else None,
        "traceback": fin.traceback if fin else None,
        "acked_seq": s.acked_seq,
    }


def rank_summaries(run: RunRow) -> dict[str, dict[str, Any]]:
    """Each stream label's own summary (its last values, its user-set keys win); a
    label's later incarnations win over its earlier ones."""
    out: dict[str, dict[str, Any]] = {}
    for s in sorted(run.streams, key=lambda s: (s.key.label, s.key.incarnation)):
        out.setdefault(s.key.label, {}).update(s.summary)
    return out


def own_ranks(run: RunRow) -> dict[str, int]:
    """The run's own ranks and nodes (a worker-scope run of a 64-rank job may hold one
    stream), next to ``world_size`` and ``num_nodes``, which are the job's."""
    labels = {s.key.label for s in run.streams}
    nodes = {(s.start.node_rank, s.start.host) for s in run.streams if s.start is not None}
    return {"run_ranks": len(labels), "run_nodes": max(1, len(nodes))}


def run_dict(
    run: RunRow,
    with_streams: bool = True,
    cross_rank: dict[str, Any] | None = None,
    sync_server: str | None = None,
) -> dict[str, Any]:
    duration = None
    if run.created is not None and run.updated is not None:
        duration = max(0.0, run.updated - run.created)
    out: dict[str, Any] = {
        "project": run.project,
        "id": run.run_id,
        "name": run.name,
        "group": run.group,
        "job_type": run.job_type,
        "tags": list(run.tags),
        "notes": run.notes,
        "run_mode": run.run_mode,
        "base_id": _base_id(run),
        "environment": environment(_primary_start(run)),
        "state": run.state,
        "crashed": list(run.crashed),
        "world_size": run.world_size,
        "num_nodes": run.num_nodes,
        "created": run.created,
        "updated": run.updated,
        "duration": duration,
        "steps": run.steps,
        "n_streams": len(run.streams),
        **own_ranks(run),
        "config": run.config,
        "summary": run.summary,
        "first_failure": _first_failure(run),
        "unsynced": _unsynced(run, sync_server),
    }
    if cross_rank is not None:  # one run's reply: its summaries in full
        out["summary_ranks"] = rank_summaries(run)
        out["summary_cross_rank"] = cross_rank
    if with_streams:
        out["streams"] = [stream_dict(s) for s in run.streams]
    return out


def _first_failure(run: RunRow) -> dict[str, Any] | None:
    failure = first_failure(
        StreamEnd(
            label=s.key.label,
            incarnation=s.key.incarnation,
            rank=s.start.rank if s.start else -1,
            node=s.start.node_rank if s.start else -1,
            state=s.state,
            error_type=s.finish.error_type if s.finish else None,
            error_message=s.finish.error_message if s.finish else None,
            time=s.finish.time if s.finish else s.last_time,
            exit_code=s.finish.exit_code if s.finish else None,
            signal=s.finish.signal if s.finish else None,
        )
        for s in run.streams
    )
    return failure.to_dict() if failure else None


def _unsynced(run: RunRow, server: str | None) -> dict[str, Any] | None:
    """Crashed streams may hold records their process never uploaded (a surviving sibling
    uploads them when there is one, ``rankwise.sdk.orphans``): say where, and how to sync.
    ``server`` is this server's URL; None where the server reads the files itself."""
    if not run.crashed or server is None:
        return None
    crashed = [s for s in run.streams if s.key.label in run.crashed]
    hosts = sorted({s.start.host for s in crashed if s.start is not None and s.start.host})
    return {
        "streams": list(run.crashed),
        "hosts": hosts,
        "command": f"rankwise sync <data dir> --server {server}",
        "message": (
            "crashed streams may hold records not yet uploaded; on "
            f"{', '.join(hosts) or 'their node'}, run: rankwise sync <data dir> --server {server}"
        ),
    }


def _primary_start(run: RunRow) -> R.StreamStart | None:
    starts = [s.start for s in run.streams if s.start is not None]
    primary = [st for st in starts if st.is_primary] or starts
    return primary[-1] if primary else None


def _base_id(run: RunRow) -> str | None:
    start = _primary_start(run)
    return start.base_id if start else None


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


def json_summaries(run: dict[str, Any]) -> dict[str, Any]:
    """A run object for a JSON reply: its summaries' NaN and ±Inf spelled out."""
    for key in ("summary", "summary_ranks", "summary_cross_rank"):
        if key in run:
            run[key] = spell_nonfinite(run[key])
    return run


def series_dict(s: Series) -> dict[str, Any]:
    return {
        "label": s.label,
        "x": s.x,
        "y": s.y,
        "downsampled": s.downsampled,
        "nonfinite": nonfinite(s.x, s.y),
    }


def complete_step(run: RunRow) -> int | None:
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
