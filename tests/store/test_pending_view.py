"""The pending points a read merges (``rankwise.store.pending_view``), kept per process:
whatever was compacted in between, the kept view equals one read from nothing."""

from __future__ import annotations

import math
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from rankwise.store.pending_view import BlockCache, PendingView
from rankwise.store.sqlite import SQLiteStore
from rankwise.store.tx import Tx
from rankwise.stream import records as R
from rankwise.stream.identity import StreamId

T0 = 1_700_000_000.0


def _records(rank: int, first: int, last: int) -> list[R.AnyRecord]:
    out: list[R.AnyRecord] = []
    for seq in range(first, last):
        if seq == 0:
            start = R.StreamStart(0, T0, "p", "r", f"rank-{rank}", 0, rank=rank, world_size=2)
            out.append(start)
            continue
        values: dict[str, object] = {"loss": math.cos(seq * (rank + 2)), "n": seq}
        if seq % 4 == 0:
            values["sparse"] = float(seq)
        out.append(R.Metrics(seq, T0 + seq, seq, values))
    return out


def _flat(view: PendingView) -> dict[tuple[int, int], tuple[list[int], list[float]]]:
    out = {}
    for stream, metric in view.series():
        p = view.points(stream, metric)
        assert p is not None
        out[(stream, metric)] = (p.seq.tolist(), p.fvalue().tolist())
    return out


_op = st.one_of(
    st.tuples(st.just("ingest"), st.integers(0, 1), st.integers(1, 4)),
    st.tuples(st.just("drop"), st.integers(0, 1), st.integers(1, 3)),  # a stream's oldest rows
    st.tuples(st.just("read")),
)


@settings(max_examples=100, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])  # fmt: skip
@given(st.lists(_op, min_size=1, max_size=30))
@example([("ingest", 0, 4), ("read",), ("drop", 0, 2), ("read",), ("ingest", 0, 2), ("read",)])
@example([("ingest", 1, 3), ("read",), ("drop", 1, 3), ("ingest", 1, 1), ("read",)])
def test_a_kept_view_equals_a_fresh_one(ops: list[tuple[Any, ...]]) -> None:
    """Uploads arrive and a stream's oldest rows go (as a compaction of fewer than all a
    stream's rows leaves them on PostgreSQL); at every read the kept view is the fresh
    one, point for point."""
    path = Path(tempfile.mkdtemp()) / "s.db"
    with SQLiteStore(path) as store:
        store.migrate()
        sent = [0, 0]
        kept = BlockCache()
        for op in ops:
            if op[0] == "ingest":
                _, rank, n = op
                key = StreamId("p", "r", f"rank-{rank}", 0)
                for _ in range(n):  # one upload (one pending row) per record
                    store.ingest([(key, _records(rank, sent[rank], sent[rank] + 1))])
                    sent[rank] += 1
            elif op[0] == "drop":
                _, rank, k = op

                def drop(tx: Tx, rank: int = rank, k: int = k) -> None:
                    ids = tx.all(
                        "SELECT b.id FROM upload_blocks b JOIN streams s ON s.id = b.stream "
                        "WHERE s.label = ? ORDER BY b.seq_lo LIMIT ?",
                        (f"rank-{rank}", k),
                    )
                    tx.many("DELETE FROM upload_blocks WHERE id = ?", [(int(i),) for (i,) in ids])

                store._write(drop)
            else:

                def both(tx: Tx) -> tuple[Any, Any]:
                    row = tx.one("SELECT id FROM runs WHERE run_id = 'r'")
                    if row is None:
                        return {}, {}
                    run = int(row[0])
                    return _flat(PendingView.of_run(tx, run, kept)), _flat(
                        PendingView.of_run(tx, run, BlockCache())
                    )

                mine, fresh = store._read(both)
                assert mine == fresh
                for seqs, _ in fresh.values():
                    assert np.all(np.diff(seqs) > 0)  # in seq order, nothing twice


def test_the_last_step_across_ways_of_logging_sums_in_stream_order() -> None:
    """Four ranks log ``x`` at step 1, rank 1 with another key too (another way of
    logging, so its point lies in another segment): the pending cross-rank value adds
    the ranks' points in stream order, as the compacted run does, so the two agree to
    the last bit where the order changes the sum (1 + 1e16 - 1e16 + 3 is 4 in this
    order, 5 with rank 1's point last)."""
    path = Path(tempfile.mkdtemp()) / "s.db"
    with SQLiteStore(path) as store:
        store.migrate()
        for rank, x in enumerate((1.0, 1e16, -1e16, 3.0)):
            key = StreamId("p", "r", f"rank-{rank}", 0)
            values: dict[str, object] = {"x": x, **({"other": 0.0} if rank == 1 else {})}
            start = R.StreamStart(0, T0, "p", "r", key.label, 0, rank=rank, world_size=4)
            store.ingest([(key, [start, R.Metrics(1, T0 + 1, 1, values)])])
        pending = store.cross_rank_last("p", "r")["x"]
        waiting = store._read(lambda tx: tx.one("SELECT COUNT(*) FROM upload_blocks"))
        assert waiting == (4,)  # read from the pending rows: nothing compacted yet
        store.compact()
        folded = store.cross_rank_last("p", "r")["x"]
        assert (pending.sum, pending.mean, pending.n) == (folded.sum, folded.mean, folded.n)
        assert folded.sum == 4.0  # the order it was stored in
