"""Records of rank health for store and HTTP tests: console lines, system samples,
step progress and stalls, with times chosen so that expected values follow from them."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from rankwise.stream import records as R
from rankwise.stream.files import stream_filename, streams_dir
from rankwise.stream.frames import MAGIC, encode_frame
from rankwise.stream.identity import StreamId

T0 = 1_700_000_000.0
WORDS = ["loss", "NCCL WARN", "grad", "100%_done", "epoch"]


def start(key: StreamId, rank: int, node: int, t: float = T0, world: int = 4) -> R.StreamStart:
    return R.StreamStart(
        seq=0, time=t, project=key.project, run_id=key.run_id, label=key.label,
        incarnation=key.incarnation, rank=rank, world_size=world, node_rank=node,
        num_nodes=2, is_primary=rank == 0, host=f"node{node}", pid=0,
    )  # fmt: skip


def console_stream(
    key: StreamId, rank: int, node: int, n: int, rng: random.Random
) -> list[R.AnyRecord]:
    """StreamStart then Console records of random sizes; each line's time is unique."""
    recs: list[R.AnyRecord] = [start(key, rank, node)]
    i = 0
    while i < n:
        k = min(n - i, rng.randint(1, 40))
        stream = "stderr" if rng.random() < 0.3 else "stdout"
        lines = [f"[{key.label}] line {i + j} {stream} {rng.choice(WORDS)}" for j in range(k)]
        times = [T0 + 1 + (i + j) * 1.0 + rank * 0.25 for j in range(k)]
        recs.append(
            R.Console(seq=len(recs), time=times[-1], stream=stream, lines=lines, times=times)
        )
        i += k
    return recs


def expected_lines(
    streams: dict[StreamId, list[R.AnyRecord]],
) -> list[tuple[str, str, float, str]]:
    """(label, stdout/stderr, time, text) of every line, in time order."""
    out = []
    for key, recs in streams.items():
        for r in recs:
            if type(r) is R.Console:
                for line, t in zip(r.lines, r.times):
                    out.append((key.label, r.stream, t, line))
    out.sort(key=lambda x: x[2])  # times are unique across streams
    return out


def system_stream(
    key: StreamId, rank: int, node: int, n: int, node_sampler: bool
) -> list[R.AnyRecord]:
    """A sample every 10 s: proc/* always; node/* and two GPUs from the node's sampler."""
    recs: list[R.AnyRecord] = [start(key, rank, node)]
    for i in range(n):
        v: dict[str, Any] = {"proc/rss_bytes": 1000 * rank + i, "proc/cpu_percent": float(i % 7)}
        if node_sampler:
            v["node/cpu_percent"] = 10.0 * node + (i % 5)
            for g in range(2):
                v[f"gpu/{g}/util_percent"] = float(100 * node + 10 * g + (i % 3))
            if i:  # rates start with the second sample
                v["node/net_sent_bytes_per_s"] = float(i)
        recs.append(R.System(seq=len(recs), time=T0 + 10 * (i + 1), values=v))
        recs.append(R.Metrics(seq=len(recs), time=T0 + 10 * (i + 1), step=i, values={"loss": 1.0}))
    return recs


def steps_stream(
    key: StreamId, rank: int, times: list[float], stall: R.Stall | None = None, node: int = 0
) -> list[R.AnyRecord]:
    """Step ``i`` logged at ``times[i]`` (and once more 10 ms later), then maybe a stall,
    then a heartbeat 30 s after the last step."""
    recs: list[R.AnyRecord] = [start(key, rank, node, t=times[0] - 1)]
    for step, t in enumerate(times):
        recs.append(R.Metrics(seq=len(recs), time=t, step=step, values={"loss": 1.0}))
        recs.append(R.Metrics(seq=len(recs), time=t + 0.01, step=step, values={"acc": 1.0}))
    if stall is not None:
        recs.append(
            R.Stall(seq=len(recs), time=stall.time, idle_seconds=stall.idle_seconds,
                    where=stall.where, stacks=stall.stacks)
        )  # fmt: skip
    recs.append(R.Heartbeat(seq=len(recs), time=times[-1] + 30))
    return recs


def write_stream_file(root: Path, key: StreamId, recs: list[R.AnyRecord]) -> Path:
    """The records as the SDK writes them: a stream file under a data directory."""
    d = streams_dir(root, key.project, key.run_id)
    d.mkdir(parents=True, exist_ok=True)
    path = d / stream_filename(key.label, key.incarnation)
    frames = [encode_frame(recs[a : a + 50]) for a in range(0, len(recs), 50)]
    path.write_bytes(MAGIC + b"".join(frames))
    return path
