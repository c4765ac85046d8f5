"""The first non-finite value per rank: the rule, its fold at ingest on SQLite and
PostgreSQL, the local reader's columns, and migration 11 over older data (the torchrun
job is in test_hang_story.py)."""

from __future__ import annotations

import math
from pathlib import Path

import rankwise
from rankwise.divergence import StreamNonFinite, divergence, first_nonfinite
from rankwise.store import migrations as M
from rankwise.store.base import RunQuery
from rankwise.store.sql import SQLStore
from rankwise.stream import records as R
from rankwise.stream.fold import FirstNonFinite, StreamFold
from rankwise.stream.identity import StreamId
from tests.helpers.streams import start
from tests.helpers.telemetry import write_stream_file

NAN, INF = math.nan, math.inf


def metrics(rank: int, bad: dict[int, float], n: int = 12) -> list[R.AnyRecord]:
    """A stream whose ``loss`` is ``bad[step]`` at those steps; ``acc`` stays finite."""
    recs: list[R.AnyRecord] = [start(label=f"rank-{rank}", run="d")]
    for step in range(n):
        loss = bad.get(step, 1.0 / (step + 1))
        values = {"loss": loss, "acc": 0.5, "n": step}
        recs.append(
            R.Metrics(seq=step + 1, time=1000.0 + step + rank / 10, step=step, values=values)
        )
    return recs


# Rank 3 goes NaN at step 7; the others follow at 8 (rank 1 with -Inf first, at 9 NaN).
STREAMS = {
    0: {8: NAN, 9: NAN},
    1: {8: -INF, 9: NAN},
    2: {8: NAN},
    3: {7: NAN, 8: INF},
}
WANT = [("rank-3", 7, "NaN"), ("rank-0", 8, "NaN"), ("rank-1", 8, "-Inf"), ("rank-2", 8, "NaN")]
MESSAGE = "loss: rank 3 NaN at step 7; ranks 0–2 followed at 8"


def firsts(run: rankwise.RunInfo) -> list[tuple[str, int, str]]:
    return [(f.label, f.step, f.value) for f in run.first_nonfinite["loss"]]


def test_the_rule_orders_by_step_and_groups_the_followers() -> None:
    got = first_nonfinite(
        [
            StreamNonFinite("rank-0", 0, {"loss": FirstNonFinite(1234, 5.0, "NaN")}),
            StreamNonFinite("rank-1", 1, {"loss": FirstNonFinite(1235, 6.0, "NaN")}),
            StreamNonFinite("rank-2", 2, {"loss": FirstNonFinite(1235, 6.0, "+Inf")}),
            StreamNonFinite("rank-3", 3, {"loss": FirstNonFinite(1240, 9.0, "NaN")}),
            # an earlier incarnation of rank 3 went first: a label's earliest counts
            StreamNonFinite("rank-3", 3, {"loss": FirstNonFinite(1236, 7.0, "NaN")}),
        ]
    )
    (d,) = divergence(got)
    assert (
        d.message == "loss: rank 0 NaN at step 1,234; ranks 1, 2 followed at 1,235, rank 3 at 1,236"
    )
    assert [r.label for r in d.first] == ["rank-0"]


def test_a_fold_keeps_the_first_in_bulk_and_record_by_record() -> None:
    recs = metrics(3, STREAMS[3])
    bulk, each = StreamFold(), StreamFold()
    bulk.apply(recs)  # ascending: Metrics folded in bulk
    for rec in reversed(recs):  # disorder: record by record
        each.apply([rec])
    each.last_seq = -1
    each.apply(recs)
    assert bulk.first_nonfinite == {"loss": FirstNonFinite(7, 1007.3, "NaN")}
    assert each.first_nonfinite == bulk.first_nonfinite
    big = StreamFold()
    big.apply([R.Metrics(seq=0, time=1.0, step=0, values={"a": 1e308, "b": 1e308, "c": 10**400})])
    assert big.first_nonfinite == {}  # finite values whose sum overflows are not NaN


def test_the_store_keeps_the_first_at_ingest_and_the_files_agree(
    store: SQLStore, tmp_path: Path
) -> None:
    for rank, bad in STREAMS.items():
        recs = metrics(rank, bad)
        key = StreamId("p", "d", f"rank-{rank}", 0)
        for a in range(0, len(recs), 4):  # in batches, one re-sent
            store.ingest([(key, recs[a : a + 4])])
            store.ingest([(key, recs[max(0, a - 2) : a + 4])])
        write_stream_file(tmp_path, key, recs)
    run = store.get_run("p", "d")
    assert run is not None and firsts(run) == WANT
    assert [d.message for d in run.divergence] == [MESSAGE]
    assert "acc" not in run.first_nonfinite and "n" not in run.first_nonfinite
    (listed,), _ = store.list_runs(RunQuery(project="p"))
    assert firsts(listed) == WANT
    local = rankwise.Api(tmp_path).run("d", project="p")
    assert local.first_nonfinite == run.first_nonfinite


def test_migration_11_finds_the_first_in_older_data(tmp_path: Path) -> None:
    from rankwise.store.fold_cache import decode_fold, encode_fold
    from rankwise.store.sqlite import SQLiteStore

    with SQLiteStore(tmp_path / "old.db") as old:
        old.migrate(target=10)
        for rank, bad in STREAMS.items():
            old.ingest([(StreamId("p", "d", f"rank-{rank}", 0), metrics(rank, bad))])

        def forget(tx):
            for sid, blob in tx.all("SELECT id, fold FROM streams"):
                fold = decode_fold(blob)
                fold.first_nonfinite = {}  # as a version-10 ingest left it
                tx.run("UPDATE streams SET fold = ? WHERE id = ?", (encode_fold(fold), sid))

        old._write(forget)
        before = old.get_run("p", "d")
        assert before is not None and before.first_nonfinite == {}
        old.migrate()
        assert old.schema_version() == M.LATEST >= 11
        after = old.get_run("p", "d")
        assert after is not None and firsts(after) == WANT
