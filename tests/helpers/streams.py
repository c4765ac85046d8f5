"""Stream bytes for tests, built from records exactly as the SDK writes them."""

from __future__ import annotations

import math
import socket
from typing import TYPE_CHECKING, Any

from rankwise.stream import records as R
from rankwise.stream.frames import MAGIC, encode_frame

if TYPE_CHECKING:
    from rankwise.stream.identity import StreamId


def start(project: str = "p", run: str = "r", label: str = "rank-0", **kw: object) -> R.StreamStart:
    rank = int(label.rsplit("-", 1)[-1]) if label[-1].isdigit() else 0
    fields: dict[str, object] = {
        "rank": rank,
        "world_size": 4,
        "is_primary": rank == 0,
        "host": "elsewhere",
        "pid": 0,
        "config": {"lr": 0.1},
    }
    fields.update(kw)
    return R.StreamStart(0, 1000.0, project, run, label, 0, **fields)


def value(rank: int, step: int) -> float:
    """A value that differs by rank and step, so aggregates are non-trivial."""
    return math.sin(0.7 * step + 1.3 * rank) + 0.01 * rank * step


def records(
    label: str = "rank-0",
    steps: int = 10,
    project: str = "p",
    run: str = "r",
    finish: bool = True,
    weight: float | None = None,
) -> list[R.AnyRecord]:
    """A whole stream: start, one metrics record per step, finish."""
    rank = int(label.rsplit("-", 1)[-1])
    out: list[R.AnyRecord] = [start(project, run, label)]
    for step in range(steps):
        out.append(R.Metrics(len(out), 1000.0 + step, step, {"loss": value(rank, step)}, weight))
    if finish:
        out.append(R.Finish(len(out), 1000.0 + steps, "finished", last_step=steps - 1))
    return out


def body(recs: list[R.AnyRecord], per_frame: int = 3) -> bytes:
    """``MAGIC`` + frames of ``per_frame`` records: an upload body or a stream file."""
    frames = [encode_frame(recs[i : i + per_frame]) for i in range(0, len(recs), per_frame)]
    return MAGIC + b"".join(frames)


# The store suites' stream: this host, a fixed start time.
HOST = socket.gethostname()
T0 = 1_700_000_000.0


def make_stream(
    key: StreamId,
    steps: int,
    *,
    rank: int = 0,
    world: int = 1,
    values: Any = None,
    weight: Any = None,
    finish: str | None = "finished",
    t0: float = T0,
    pid: int = 0,
    **start: Any,
) -> list[R.AnyRecord]:
    """StreamStart, one Metrics per step (``values(step) -> dict``), then maybe Finish."""
    values = values or (lambda s: {"loss": 1.0 / (s + 1) + rank, "step_count": s})
    recs: list[R.AnyRecord] = [
        R.StreamStart(
            seq=0, time=t0, project=key.project, run_id=key.run_id, label=key.label,
            incarnation=key.incarnation, rank=rank, world_size=world, is_primary=rank == 0,
            host=HOST, pid=pid, **start,
        )
    ]  # fmt: skip
    for s in range(steps):
        w = weight(s) if callable(weight) else weight
        recs.append(R.Metrics(seq=len(recs), time=t0 + 1 + s, step=s, values=values(s), weight=w))
    if finish:
        recs.append(R.Finish(seq=len(recs), time=t0 + 2 + steps, state=finish))
    return recs
