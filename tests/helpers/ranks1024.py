"""A 1,024-rank run for the dashboard's tests, written straight into a store.

128 nodes of 8 GPUs, a few metrics, a few hundred steps, with the troubles the
dashboard must make visible at that size: a straggler (rank 300's step time), a rank
whose loss drifts (137), a node whose GPUs run hot (node 5: ranks 40-47), a rank that
failed (700), two killed (900, 901) and one that never finished (1000: crashed once the
crash timeout passes, as its pid is no process here). Records go through
``Store.ingest`` in big batches, as an ingester would apply them, without 1,024
processes.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from rankwise.store import open_store
from rankwise.stream import records as R
from rankwise.stream.identity import StreamId

from .streams import T0

PROJECT, RUN = "scale", "ranks-1024"
RANKS, PER_NODE = 1024, 8
DRIFT, STRAGGLER, HOT_NODE = 137, 300, 5
FAILED, KILLED, CRASHED = 700, (900, 901), 1000


def values(rank: int, steps: int, seed: int = 0, drift: int = DRIFT) -> dict[str, np.ndarray]:
    """Each metric's values of ``rank`` over ``steps`` steps (``drift``: the rank whose
    loss drifts)."""
    rng = np.random.default_rng(seed * 10_000 + rank)
    s = np.arange(steps, dtype=np.float64)
    loss = 2.0 * np.exp(-s / (steps / 3)) + 0.3 + rng.normal(0, 0.01, steps)
    if rank == drift:
        loss += np.linspace(0, 1.0, steps) ** 2
    step_time = 0.25 + rng.normal(0, 0.005, steps)
    if rank == STRAGGLER:
        step_time += 0.15
    temp = 62 + 3 * np.sin(s / 20) + rng.normal(0, 0.3, steps)
    if rank // PER_NODE == HOT_NODE:
        temp += 18
    return {"train/loss": loss, "train/step_time": step_time, "system/gpu_temp": temp}


def _stream(rank: int, steps: int, ranks: int, drift: int) -> list[R.AnyRecord]:
    node = rank // PER_NODE
    vals = values(rank, steps, drift=drift)
    last = steps if rank not in (FAILED, *KILLED) else steps // 2
    recs: list[R.AnyRecord] = [
        R.StreamStart(
            seq=0, time=T0, project=PROJECT, run_id=RUN, label=f"rank-{rank}", incarnation=0,
            name="1,024 ranks", run_mode="shared", is_primary=rank == 0, rank=rank,
            world_size=ranks, local_rank=rank % PER_NODE, local_world_size=PER_NODE,
            node_rank=node, num_nodes=math.ceil(ranks / PER_NODE), launcher="torchrun",
            host=f"gpu-node-{node:03d}", pid=4_000_000 + rank,
        )
    ]  # fmt: skip
    for s in range(last):
        v = {k: float(a[s]) for k, a in vals.items()}
        recs.append(R.Metrics(seq=len(recs), time=T0 + 1 + s, step=s, values=v))
    if rank == FAILED:
        recs.append(R.Finish(seq=len(recs), time=T0 + 2 + last, state="failed", exit_code=1))
    elif rank in KILLED:
        recs.append(R.Finish(seq=len(recs), time=T0 + 2 + last, state="killed"))
    elif rank != CRASHED:
        recs.append(R.Finish(seq=len(recs), time=T0 + 2 + last, state="finished"))
    return recs


def make_1024_run(db: Path, steps: int = 120, ranks: int = RANKS, drift: int = DRIFT) -> None:
    """Write the run into the SQLite store at ``db`` (created and migrated); ``drift``
    moves the drifting loss to another rank."""
    with open_store(db) as store:
        store.migrate()
        batch: list[tuple[StreamId, list[R.AnyRecord]]] = []
        for r in range(ranks):
            batch.append((StreamId(PROJECT, RUN, f"rank-{r}", 0), _stream(r, steps, ranks, drift)))
            if len(batch) == 128:
                store.ingest(batch)
                batch = []
        if batch:
            store.ingest(batch)
