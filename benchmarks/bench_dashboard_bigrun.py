"""A big shared-mode run written straight into a store, for the dashboard's speed test.

64 ranks x 50 metrics x 100k steps is 320 million points: through ``Store.ingest`` (one
``Metrics`` record per rank and step) that takes the better part of an hour, so the bulk
of it goes in as numpy columns through the store's own write steps instead, bypassing
only the record-by-record decoding:

* ``Store.ingest`` writes each rank's ``StreamStart`` and its first ``Metrics`` record
  (step 0), which creates the run, stream, metric and series rows the usual way;
* steps 1 .. N-1 are appended per stream with ``ingest.append_series`` (the chunk
  writer, with its summaries) and folded into the per-step aggregates of all ranks with
  ``blocks.merge_blocks``; the stream row's mark and fold move as ``_apply_one`` would
  move them for those records;
* ``Store.ingest`` then writes each rank's ``Finish`` record, continuing from the mark.

So what the server reads is laid out exactly as if ingested record by record (same
chunks, summaries, aggregate blocks, marks). This leans on store internals on purpose; if
they change, this script fails loudly rather than producing a different layout.

    python benchmarks/bench_dashboard_bigrun.py DB_PATH [--ranks 64] [--metrics 50] [--steps 100000]
"""

from __future__ import annotations

import argparse
import socket
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from rankwise.store import open_store
from rankwise.store.blocks import merge_blocks
from rankwise.store.chunks import Points
from rankwise.store.fold_cache import decode_fold, encode_fold
from rankwise.store.ingest import append_series
from rankwise.stream import records as R
from rankwise.stream.identity import StreamId

PROJECT = "scale"
RUN = "big-64x50x100k"
T0 = 1_700_000_000.0
STEP_SECONDS = 0.05


def metric_names(n: int) -> list[str]:
    """Names spread over sections the way a real job's are."""
    fixed = ["train/loss", "train/lr", "train/grad_norm", "train/samples_per_s", "val/loss",
             "val/accuracy", "epoch"]  # fmt: skip
    out = fixed[:n]
    i = 0
    while len(out) < n:
        section = ("train", "val", "system")[i % 3]
        out.append(f"{section}/m{i:02d}")
        i += 1
    return out


def values(metric: int, rank: int, steps: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A plausible curve per metric: decay towards a floor, a rank offset, noise, spikes."""
    s = steps.astype(np.float64)
    scale = 1.0 + (metric % 7)
    curve = scale * np.exp(-s / (20_000.0 + 3_000.0 * (metric % 5))) + 0.1 * scale
    noise = rng.normal(0.0, 0.02 * scale, s.shape[0])
    y = curve * (1.0 + 0.01 * rank) + noise
    y[rng.integers(0, s.shape[0], 5)] += 2 * scale  # a few spikes M4 must keep
    return y


def _start(rank: int, ranks: int) -> R.StreamStart:
    return R.StreamStart(
        seq=0, time=T0, project=PROJECT, run_id=RUN, label=f"rank-{rank}", incarnation=0,
        name="64 ranks x 50 metrics x 100k steps", run_mode="shared", is_primary=rank == 0,
        rank=rank, world_size=ranks, local_rank=rank % 8, local_world_size=min(8, ranks),
        node_rank=rank // 8, num_nodes=max(1, ranks // 8), launcher="torchrun",
        host=f"node-{rank // 8:02d}", pid=10_000 + rank, tags=["scale"],
        config={"ranks": ranks, "note": "synthetic, for the dashboard speed test"},
    )  # fmt: skip


class _BulkWriter:
    """The store's ``Tx`` over a private SQLite connection; each call is one transaction."""

    for_update = ""

    def __init__(self, db: Path) -> None:
        self._c = sqlite3.connect(str(db), isolation_level=None)
        self._c.execute("PRAGMA journal_mode = OFF")
        self._c.execute("PRAGMA synchronous = OFF")

    def __call__(self, fn: Any) -> None:
        self._c.execute("BEGIN")
        fn(self)
        self._c.execute("COMMIT")

    def all(self, sql: str, params: Any = ()) -> list[Any]:
        return self._c.execute(sql, params).fetchall()

    def one(self, sql: str, params: Any = ()) -> Any:
        return self._c.execute(sql, params).fetchone()

    def run(self, sql: str, params: Any = ()) -> int:
        return self._c.execute(sql, params).rowcount

    def many(self, sql: str, rows: Any) -> None:
        self._c.executemany(sql, rows)

    def many_returning(self, sql: str, rows: Any) -> list[Any]:
        return [self._c.execute(sql, row).fetchone() for row in rows]

    def close(self) -> None:
        self._c.close()


def make_big_run(
    db: Path, ranks: int = 64, metrics: int = 50, steps: int = 100_000
) -> dict[str, Any]:
    """Write the run into the SQLite store at ``db``; returns what was written."""
    t_begin = time.perf_counter()
    store = open_store(db)
    store.migrate()
    names = metric_names(metrics)
    rng = np.random.default_rng(0)
    keys = [StreamId(PROJECT, RUN, f"rank-{r}", 0) for r in range(ranks)]
    # The usual path: start records and step 0 of every rank.
    first = []
    for r, key in enumerate(keys):
        v0 = {n: float(values(m, r, np.zeros(1, np.int64), rng)[0]) for m, n in enumerate(names)}
        first.append((key, [_start(r, ranks), R.Metrics(seq=1, time=T0, step=0, values=v0)]))
    store.ingest(first)
    mids = dict(store._read(lambda tx: tx.all("SELECT name, id FROM metrics")))  # type: ignore[attr-defined]
    mids = {n: int(mids[n]) for n in names}
    ids = {
        label: (int(sid), int(run))
        for sid, run, label in store._read(  # type: ignore[attr-defined]
            lambda tx: tx.all(
                "SELECT s.id, s.run, s.label FROM streams s JOIN runs r ON r.id = s.run "
                "WHERE r.project = ? AND r.run_id = ?",
                (PROJECT, RUN),
            )
        )
    }
    store.close()
    # The bulk goes through a connection of our own without a journal: a crash here only
    # loses a test's scratch database, and it halves the bytes written.
    bulk_tx = _BulkWriter(db)
    step = np.arange(1, steps, dtype=np.int64)
    seq = step + 1  # seq 1 was step 0
    n = step.shape[0]
    nan = np.full(n, np.nan)
    times = [T0 + step * STEP_SECONDS + r * 1e-3 for r in range(ranks)]
    last: dict[str, dict[str, float]] = {key.label: {} for key in keys}
    run_id = ids[keys[0].label][1]
    # Metric by metric, so that only one metric's columns of all ranks are in memory.
    for m, name in enumerate(names):
        mid = mids[name]
        cols = []
        for r, key in enumerate(keys):
            y = values(m, r, step, rng)
            cols.append(Points(seq, step, times[r], y, nan, "f"))
            last[key.label][name] = float(y[-1])

        def bulk(tx: Any, mid: int = mid, cols: list[Points] = cols) -> None:
            for key, p in zip(keys, cols):
                append_series(tx, ids[key.label][0], {mid: p})
            merge_blocks(tx, run_id, {mid: cols})

        bulk_tx(bulk)

    def folds(tx: Any) -> None:
        for r, key in enumerate(keys):
            sid = ids[key.label][0]
            row = tx.one("SELECT fold FROM streams WHERE id = ?", (sid,))
            fold = decode_fold(row[0])
            fold.last_seq = int(seq[-1])
            fold.last_time = float(times[r][-1])
            fold.last_step = int(step[-1])
            fold.metrics_records += n
            fold.points += n * len(names)
            fold.last_values.update(last[key.label])
            tx.run(
                "UPDATE streams SET acked_seq = ?, last_time = ?, last_step = ?, points = ?, "
                "fold = ? WHERE id = ?",
                (fold.last_seq, fold.last_time, fold.last_step, fold.points,
                 encode_fold(fold), sid),
            )  # fmt: skip

    bulk_tx(folds)
    bulk_tx.close()
    store = open_store(db)
    t_end = T0 + steps * STEP_SECONDS + 1
    store.ingest(
        [
            (
                key,
                [R.Finish(seq=int(seq[-1]) + 1, time=t_end, state="finished", last_step=steps - 1)],
            )
            for key in keys
        ]
    )
    store.close()
    return {
        "project": PROJECT, "run": RUN, "ranks": ranks, "metrics": metrics, "steps": steps,
        "points": ranks * metrics * steps, "seconds": time.perf_counter() - t_begin,
        "host": socket.gethostname(),
    }  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("db", type=Path)
    p.add_argument("--ranks", type=int, default=64)
    p.add_argument("--metrics", type=int, default=50)
    p.add_argument("--steps", type=int, default=100_000)
    a = p.parse_args()
    info = make_big_run(a.db, a.ranks, a.metrics, a.steps)
    print(info, file=sys.stderr)


if __name__ == "__main__":
    main()
