"""Each stream's decoded fold kept between reads (``rankwise.store.fold_cache``), in both
stores: a read of a running run decodes again only the streams whose rows changed, and
what it answers is always what decoding the row's bytes gives (a new record, a purged
run whose stream ids come back for another). Expected values come from the records
written, never from the store.
"""

from __future__ import annotations

import time

from rankwise.store.fold_cache import FoldCache, decode_fold, encode_fold
from rankwise.store.sql import SQLStore
from rankwise.stream import records as R
from rankwise.stream.fold import StreamFold
from rankwise.stream.identity import StreamId
from tests.helpers.streams import make_stream

RANKS = [StreamId("p", "r", f"rank-{i}", 0) for i in range(4)]


def _running(store: SQLStore, steps: int = 4) -> list[list[R.AnyRecord]]:
    recs = [
        make_stream(k, steps + 2, rank=i, world=len(RANKS), finish=None, t0=time.time() - 5)
        for i, k in enumerate(RANKS)
    ]
    store.ingest([(k, r[:-2]) for k, r in zip(RANKS, recs)])
    return recs


def test_a_read_decodes_again_only_the_streams_that_changed(store: SQLStore) -> None:
    recs = _running(store)
    first = store.get_run("p", "r")
    assert first is not None and first.state == "running" and first.steps == 4
    hits, misses = store._folds.hits, store._folds.misses
    assert store.get_run("p", "r") == first
    health = store.health_streams("p", "r", window=60.0)
    assert health is not None and [s.label for s in health[1]] == [k.label for k in RANKS]
    assert store._folds.misses == misses, "an unchanged stream's fold was decoded again"
    assert store._folds.hits == hits + 2 * len(RANKS)

    # Rank 2 takes its next steps: only its fold is decoded again, and the read shows them.
    store.ingest([(RANKS[2], recs[2][-2:])])
    misses = store._folds.misses
    later = store.get_run("p", "r")
    assert store._folds.misses == misses + 1
    assert later is not None and later.steps == 6
    by_label = {s.label: s for s in later.streams}
    assert by_label["rank-2"].last_step == 5 and by_label["rank-1"].last_step == 3


def test_a_stream_id_used_again_is_never_answered_from_the_old_fold(store: SQLStore) -> None:
    """A purged run's stream rows go; SQLite may give their ids to the next streams. A
    new run of the same shape (same label, as many records) must read as itself."""
    key, other = RANKS[0], StreamId("p", "r2", "rank-0", 0)
    store.ingest([(key, make_stream(key, 5, config={"lr": 0.1}))])
    old = store.get_run("p", "r")
    assert old is not None and old.config["lr"] == 0.1
    (sid,) = store._read(lambda tx: [int(r[0]) for r in tx.all("SELECT id FROM streams")])
    assert store.purge_runs("p", ["r"], "tests", None) == ["r"]
    store.ingest([(other, make_stream(other, 5, config={"lr": 0.2}))])
    new = store.get_run("p", "r2")
    assert new is not None and new.config["lr"] == 0.2
    if store.dialect == "sqlite":  # the case this is about: the id did come back
        assert store._read(lambda tx: [int(r[0]) for r in tx.all("SELECT id FROM streams")]) == [
            sid
        ]


def test_the_cache_answers_the_rows_bytes_and_stays_bounded() -> None:
    cache = FoldCache(size=2)
    a = StreamFold()
    a.last_step = 3
    b = StreamFold()
    b.last_step = 7
    blob_a, blob_b = encode_fold(a), encode_fold(b)
    assert cache.decode(1, blob_a).last_step == 3
    assert cache.decode(1, memoryview(bytearray(blob_a))).last_step == 3  # equal bytes
    assert (cache.hits, cache.misses) == (1, 1)
    assert cache.decode(1, blob_b).last_step == 7  # the same stream, new bytes
    assert cache.decode(1, None) == decode_fold(None)
    for sid in (2, 3, 4):
        cache.decode(sid, blob_a)
    assert len(cache._folds) == 2 and set(cache._folds) == {3, 4}  # the least recent went
