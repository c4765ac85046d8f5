"""An ended run's fold kept between reads (``rankwise.store.run_cache``) in both stores:
kept while none of its streams changes, folded again when one takes a record or a stream
joins, never kept while a stream runs; edits, the trash and a purge show at once.
Expected values come from the records written, never from the store.
"""

from __future__ import annotations

import time

from rankwise import edits as E
from rankwise.store.sql import SQLStore
from rankwise.stream import records as R
from rankwise.stream.identity import StreamId
from tests.helpers.streams import make_stream

R0 = StreamId("p", "r", "rank-0", 0)
R1 = StreamId("p", "r", "rank-1", 0)


def test_ended_run_is_kept_until_a_stream_changes(store: SQLStore) -> None:
    store.ingest([(R0, make_stream(R0, 5, world=2))])
    first = store.get_run("p", "r")
    assert first is not None and first.state == "finished" and first.steps == 5
    misses = store._run_cache.misses
    again = store.get_run("p", "r")
    assert store._run_cache.misses == misses, "a second read of an ended run folds again"
    assert again == first

    # A rank joins (a new stream): folded again, both ranks there.
    store.ingest([(R1, make_stream(R1, 8, rank=1, world=2))])
    both = store.get_run("p", "r")
    assert both is not None and [s.label for s in both.streams] == ["rank-0", "rank-1"]
    assert both.steps == 8

    # An edit shows on the kept fold's next read.
    store.edit_run("p", "r", [E.Edit(field="name", value="renamed", at=2e9, source="api")])
    named = store.get_run("p", "r")
    assert named is not None and named.name == "renamed" and named.steps == 8

    # The trash hides it, a restore brings it back, a purge removes it.
    assert store.delete_runs("p", ["r"], "tests") == ["r"]
    assert store.get_run("p", "r") is None
    assert store.restore_runs("p", ["r"], "tests") == ["r"]
    back = store.get_run("p", "r")
    assert back is not None and back.name == "renamed"
    assert store.purge_runs("p", ["r"], "tests", None) == ["r"]
    assert store.get_run("p", "r") is None


def test_a_running_run_is_folded_on_every_read(store: SQLStore) -> None:
    recs = make_stream(R0, 6, finish=None, t0=time.time() - 10)  # running: heard of lately
    store.ingest([(R0, recs[:4])])  # start + steps 0-2
    running = store.get_run("p", "r")
    assert running is not None and running.state == "running" and running.steps == 3
    misses = store._run_cache.misses
    assert store.get_run("p", "r") is not None
    assert store._run_cache.misses == misses + 1, "a running run's fold was kept"

    # More steps, then the finish: each read sees them.
    store.ingest([(R0, recs[4:])])
    later = store.get_run("p", "r")
    assert later is not None and later.steps == 6 and later.state == "running"
    store.ingest([(R0, [R.Finish(seq=len(recs), time=recs[-1].time + 1, state="failed")])])
    ended = store.get_run("p", "r")
    assert ended is not None and ended.state == "failed" and ended.steps == 6
