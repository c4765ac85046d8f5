"""The server under overload: 429 with Retry-After past ``--max-inflight``, honoured by
the uploader, and nothing lost or doubled.

Real ``rankwise server`` processes over SQLite; the ranks are real processes uploading
their stream files.
"""

from __future__ import annotations

import threading
import time
from email.utils import formatdate
from pathlib import Path

import pytest

import rankwise
from rankwise.sdk.retry import backoff_delay, retry_after
from rankwise.server.group_commit import GroupCommit
from rankwise.store.sqlite import SQLiteStore
from rankwise.stream.identity import StreamId
from tests.helpers.runs import assert_same_history, launch_ranks, wait_all
from tests.helpers.servers import ServerProcess
from tests.helpers.streams import records


def test_retry_after_is_read_as_seconds_or_a_date() -> None:
    assert retry_after("3") == 3.0
    assert retry_after(" 0.5 ") == 0.5
    assert retry_after(None) is None and retry_after("soon") is None
    later = retry_after(formatdate(time.time() + 30, usegmt=True))
    assert later is not None and 25 < later <= 30


@pytest.mark.parametrize("failures", [1, 5, 30])
def test_advice_is_a_floor_with_jitter_under_the_cap(failures: int) -> None:
    waits = [backoff_delay(failures, cap=30.0, advised=2.0) for _ in range(200)]
    assert all(2.0 <= w <= 3.0 for w in waits)
    assert len(set(waits)) > 100  # ranks told the same time spread out
    assert backoff_delay(failures, cap=1.5, advised=10.0) == 1.5


def test_clients_back_off_from_a_busy_server_and_everything_lands_once(tmp_path: Path) -> None:
    """One upload at a time (--max-inflight 1) for eight ranks posting every 20 ms: most
    posts collide and are told 429 + Retry-After; every row still arrives exactly once."""
    data = tmp_path / "data"
    data.mkdir()
    db = f"sqlite:///{tmp_path / 'server.db'}"
    ranks, steps = 8, 40
    with ServerProcess.db(db, tmp_path / "server.log", "--max-inflight", "1") as server:
        procs = launch_ranks(
            data, "busy", ranks, "--steps", str(steps), "--sleep", "0.02", server=server.url,
            RANKWISE_UPLOAD_INTERVAL="0.02", RANKWISE_UPLOAD_TIMEOUT="60",
            RANKWISE_FINISH_TIMEOUT="90",
        )  # fmt: skip
        outs = wait_all(procs, timeout=150)
        told = [err for _, err in outs if "server answered 429" in err]
        assert told, "no rank was ever told to back off: the limit did not bite"
        assert "Retry-After" in told[0]
        assert all("not uploaded" not in err for _, err in outs), outs
        local = rankwise.Api(dir=data).run("busy")
        remote = rankwise.Api(server=server.url).run("busy")
        assert_same_history(local, remote, db)
        assert len(remote.history()) == ranks * steps * 2
        assert remote.state == "finished" and len(remote.streams) == ranks


class _PoisonedStore(SQLiteStore):
    """A real SQLite store whose ingest fails whenever one given stream is in the call:
    a fault injected at the store boundary, to prove one bad upload fails alone."""

    poisoned = StreamId("p", "r", "rank-99", 0)

    def ingest(self, batches, secrets=None):
        if any(key == self.poisoned for key, _ in batches):
            raise ValueError("this upload cannot be applied")
        return super().ingest(batches, secrets)


def test_group_commit_applies_together_and_fails_alone(tmp_path: Path) -> None:
    store = _PoisonedStore(tmp_path / "g.db")
    store.migrate()
    group = GroupCommit(store)
    keys = [StreamId("p", "r", f"rank-{i}", 0) for i in range(12)] + [store.poisoned]
    results: dict[StreamId, object] = {}
    start = threading.Barrier(len(keys))

    def upload(key: StreamId) -> None:
        start.wait()
        try:
            results[key] = group.ingest(key, records(key.label, steps=4, finish=False))
        except ValueError as exc:
            results[key] = exc

    threads = [threading.Thread(target=upload, args=(k,)) for k in keys]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert isinstance(results.pop(store.poisoned), ValueError)
    assert results == {k: 4 for k in keys[:-1]}  # every other upload landed, once
    assert group.items == 12
    for key in keys[:-1]:
        assert store.acked(key) == 4
    store.close()


def test_a_forged_upload_fails_alone_in_its_batch(tmp_path: Path) -> None:
    """An upload without its stream's secret, in one batch with good uploads: only it is
    refused; the others land (the batch is retried upload by upload, as for any fault
    of one upload, not failed whole as when the store cannot write)."""
    from concurrent.futures import Future

    from rankwise.store.ingest import StreamKeyRefused
    from rankwise.stream import records as R
    from rankwise.stream import streamkey

    store = SQLiteStore(tmp_path / "k.db")
    store.migrate()
    group = GroupCommit(store)
    keys = [StreamId("p", "r", f"rank-{i}", 0) for i in range(4)]
    streams = {k: records(k.label, steps=4, finish=False) for k in keys}
    for recs in streams.values():
        first = recs[0]
        assert isinstance(first, R.StreamStart)
        first.key_digest = streamkey.digest("s")
    bound = keys[1]
    assert group.ingest(bound, streams[bound][:2], "s") == 1
    batch: list = [(k, streams[k], "s", Future()) for k in keys]
    batch.insert(2, (bound, streams[bound][2:], None, Future()))  # the forger's
    group._apply(batch)  # one batch, as the committer thread would take it
    outcomes = [f.exception() or f.result() for _, _, _, f in batch]
    assert isinstance(outcomes.pop(2), StreamKeyRefused)
    assert outcomes == [4, 4, 4, 4]
    store.close()
