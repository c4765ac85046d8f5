"""Stream bytes for tests, built from records exactly as the SDK writes them."""

from __future__ import annotations

import math

from rankwise.stream import records as R
from rankwise.stream.frames import MAGIC, encode_frame


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
