"""The per-run key cap's store reads (``rankwise.server.run_keys``): a job's start, every
rank's first upload at once in a check thread of its own, reads the run's keys from the
store once, not once per upload; the cap holds for the uploads that waited; a later
upload with keys not seen yet reads the store again, and sees other processes' keys."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import cast

import pytest

from rankwise.server.run_keys import RunKeys
from rankwise.store import open_store
from rankwise.store.base import Store
from rankwise.store.sql import SQLStore
from rankwise.stream import records as R
from rankwise.stream.identity import StreamId
from tests.helpers.streams import start


class CountedReads:
    """A real store whose ``metric_keys`` is counted and takes ``delay`` seconds more (a
    run with many uploads not yet compacted, under load)."""

    def __init__(self, store: SQLStore, delay: float) -> None:
        self.store, self.delay, self.reads = store, delay, 0
        self._lock = threading.Lock()

    def metric_keys(self, project: str, run_id: str) -> list[str]:
        with self._lock:
            self.reads += 1
        time.sleep(self.delay)
        return self.store.metric_keys(project, run_id)


@pytest.fixture
def sqlite(tmp_path: Path) -> Iterator[SQLStore]:
    st = cast(SQLStore, open_store(f"sqlite:///{tmp_path / 'db.sqlite'}"))
    st.migrate()
    yield st
    st.close()


def _at_once(n: int, admit: Callable[[int], bool]) -> list[bool]:
    """``admit(i)`` in ``n`` threads released together; their answers by ``i``."""
    go = threading.Barrier(n)
    out: list[bool] = [False] * n

    def one(i: int) -> None:
        go.wait()
        out[i] = admit(i)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return out


def test_the_first_uploads_of_a_run_read_its_keys_once(sqlite: SQLStore) -> None:
    counted = CountedReads(sqlite, delay=0.3)
    keys = RunKeys()
    same = {"loss", "lr", "grad_norm"}  # every rank logs the same keys
    got = _at_once(32, lambda i: keys.admit(cast(Store, counted), "p", "r", set(same)))
    assert all(got) and counted.reads == 1


def test_ranks_with_keys_of_their_own_take_the_read_they_waited_for(sqlite: SQLStore) -> None:
    counted = CountedReads(sqlite, delay=0.3)
    keys = RunKeys()
    got = _at_once(32, lambda i: keys.admit(cast(Store, counted), "p", "r", {f"rank{i}/loss"}))
    assert all(got)
    assert counted.reads <= 2, counted.reads  # was 32: every upload read on its own
    assert keys.admit(cast(Store, counted), "p", "r", {f"rank{i}/loss" for i in range(32)})
    assert counted.reads <= 2  # all 32 remembered


def test_the_cap_holds_for_the_uploads_that_waited(sqlite: SQLStore) -> None:
    counted = CountedReads(sqlite, delay=0.3)
    keys = RunKeys()
    got = _at_once(
        32, lambda i: keys.admit(cast(Store, counted), "p", "r", {f"rank{i}/loss"}, cap=10)
    )
    assert sum(got) == 10


def test_a_later_upload_with_new_keys_reads_the_store_again(sqlite: SQLStore) -> None:
    """Keys another process stored since the last read count against the cap."""
    counted = CountedReads(sqlite, delay=0.0)
    keys = RunKeys()
    assert keys.admit(cast(Store, counted), "p", "r", {"a"}, cap=3)
    assert keys.admit(cast(Store, counted), "p", "r", {"a"}, cap=3)
    assert counted.reads == 1
    key = StreamId("p", "r", "rank-1", 0)  # another process's upload, stored since
    sqlite.ingest(
        [(key, [start("p", "r", "rank-1"), R.Metrics(1, 1.0, 0, {"x": 1.0, "y": 2.0, "z": 3.0})])]
    )
    assert not keys.admit(cast(Store, counted), "p", "r", {"b"}, cap=3)  # x, y, z and b
    assert counted.reads == 2
    assert keys.admit(cast(Store, counted), "p", "r", {"x", "y"}, cap=3)
