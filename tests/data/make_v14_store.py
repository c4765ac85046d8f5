"""Writes ``v14_store.sqlite``: a store at schema version 14 (before uploads were stored
whole and compacted later), made by rankwise at commit 93eb223, for
``tests/store/test_compaction.py``.

Run it with that version of rankwise on the path (``git worktree add /tmp/old 93eb223``,
then ``PYTHONPATH=/tmp/old python tests/data/make_v14_store.py && gzip -9n
tests/data/v14_store.sqlite``). The data are ``v14_records`` below, which the test
ingests again into a fresh store to compare; the streams are left open so the test can
go on logging.
"""

from __future__ import annotations

import gzip
import math
import shutil
import sqlite3
import sys
from pathlib import Path

from rankwise.stream import records as R

T0 = 1_700_000_000.0
RANKS, STEPS = 3, 1500  # past MERGE_BELOW: closed chunks and an open tail per series
GZ = Path(__file__).with_name("v14_store.sqlite.gz")


def unpack(path: Path) -> Path:
    """The committed file (``GZ``), unpacked to ``path`` for a test to open."""
    with gzip.open(GZ) as src, open(path, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return path


def v14_records(rank: int, first: int, last: int) -> list[R.AnyRecord]:
    """Rank ``rank``'s records ``first`` .. ``last - 1`` (seq 0 is its StreamStart)."""
    out: list[R.AnyRecord] = []
    for seq in range(first, last):
        if seq == 0:
            out.append(
                R.StreamStart(
                    seq=0, time=T0, project="p", run_id="old", label=f"rank-{rank}",
                    incarnation=0, rank=rank, world_size=RANKS, is_primary=rank == 0,
                    host="h", pid=rank,
                )
            )  # fmt: skip
            continue
        s = seq - 1
        values: dict[str, object] = {"loss": 1.0 / (s + 1) + rank, "n": s}
        if s % 7 == 0:
            values["sparse"] = math.nan if s % 49 == 0 else float(s * rank)
        out.append(R.Metrics(seq=seq, time=T0 + 1 + s, step=s, values=values,
                             weight=float(rank + 1)))  # fmt: skip
    return out


def main(path: Path) -> None:
    from rankwise.store import migrations as M
    from rankwise.store.sqlite import SQLiteStore
    from rankwise.stream.identity import StreamId

    assert M.LATEST == 14, f"made by schema version 14, not {M.LATEST}"
    path.unlink(missing_ok=True)
    with SQLiteStore(path) as st:
        st.migrate()
        for rank in range(RANKS):
            key = StreamId("p", "old", f"rank-{rank}", 0)
            for a in range(0, STEPS + 1, 100):  # uploads of 100 records, as a rank sends
                st.ingest([(key, v14_records(rank, a, min(a + 100, STEPS + 1)))])
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode = DELETE")  # one self-contained file
    conn.execute("VACUUM")
    conn.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).with_name("v14_store.sqlite"))
