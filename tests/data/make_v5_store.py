"""Writes ``v5_store.sqlite``: a store at schema version 5 (before the aggregates counted
NaN and ±Inf), made by rankwise at commit cdcd413, for ``tests/store/test_nonfinite_band.py``.

Run it with that version of rankwise on the path (``git worktree add /tmp/old cdcd413``,
then ``PYTHONPATH=/tmp/old python tests/data/make_v5_store.py && gzip -9
tests/data/v5_store.sqlite``). The data are ``v5_values`` below, which the test
recomputes; the streams are left open (seq 0..STEPS) so the test can go on logging.
"""

from __future__ import annotations

import math
import sqlite3
import sys
from pathlib import Path

T0 = 1_700_000_000.0
RANKS, STEPS = 3, 1100  # two aggregate blocks


def v5_values(rank: int, step: int) -> dict[str, float]:
    """rank 1's loss is NaN from step 1000 and +Inf at step 500; rank 2's is -Inf at 700."""
    loss = 1.0 / (step + 1) + rank
    if rank == 1 and step >= 1000:
        loss = math.nan
    if rank == 1 and step == 500:
        loss = math.inf
    if rank == 2 and step == 700:
        loss = -math.inf
    return {"loss": loss, "acc": float(step * (rank + 1))}


def main(path: Path) -> None:
    from rankwise.store import migrations as M
    from rankwise.store.sqlite import SQLiteStore
    from rankwise.stream import records as R
    from rankwise.stream.identity import StreamId

    assert M.LATEST == 5, f"made by schema version 5, not {M.LATEST}"
    path.unlink(missing_ok=True)
    with SQLiteStore(path) as st:
        st.migrate()
        for rank in range(RANKS):
            key = StreamId("p", "old", f"rank-{rank}", 0)
            recs: list[R.AnyRecord] = [
                R.StreamStart(seq=0, time=T0, project="p", run_id="old", label=key.label,
                              incarnation=0, rank=rank, world_size=RANKS,
                              is_primary=rank == 0, host="h", pid=rank)
            ]  # fmt: skip
            for s in range(STEPS):
                point = R.Metrics(
                    seq=len(recs), time=T0 + 1 + s, step=s, values=v5_values(rank, s),
                    weight=float(rank + 1),
                )  # fmt: skip
                recs.append(point)
            st.ingest([(key, recs)])
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode = DELETE")  # one self-contained file
    conn.execute("VACUUM")
    conn.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).with_name("v5_store.sqlite"))
