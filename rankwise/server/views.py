"""Store rows → the plain objects the API replies with (``schemas`` documents them).

States arrive settled: the store computes them at read time with the local reader's
rules (``rankwise.stream.fold``) and its own crash timeout.
"""

from __future__ import annotations

from typing import Any

from ..failures import StreamEnd, first_failure
from ..store.base import Band, RunRow, Series, StreamRow


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


def run_dict(
    run: RunRow, with_streams: bool = True, sync_server: str | None = None
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
        "state": run.state,
        "crashed": list(run.crashed),
        "world_size": run.world_size,
        "num_nodes": run.num_nodes,
        "created": run.created,
        "updated": run.updated,
        "duration": duration,
        "steps": run.steps,
        "n_streams": len(run.streams),
        "config": run.config,
        "summary": run.summary,
        "first_failure": _first_failure(run),
        "unsynced": _unsynced(run, sync_server),
    }
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


def _base_id(run: RunRow) -> str | None:
    starts = [s.start for s in run.streams if s.start is not None]
    primary = [st for st in starts if st.is_primary] or starts
    return primary[-1].base_id if primary else None


def series_dict(s: Series) -> dict[str, Any]:
    return {"label": s.label, "x": s.x, "y": s.y, "downsampled": s.downsampled}


def band_dict(b: Band) -> dict[str, Any]:
    return {
        "x": b.x,
        "n": b.n,
        "mean": b.mean,
        "wmean": b.wmean,
        "min": b.min,
        "max": b.max,
        "std": b.std,
        "downsampled": b.downsampled,
    }
