"""The end-to-end "exactly once" checks see a point stored twice.

``history()`` merges rows by (stream, seq), so a record applied twice reads back once:
a check that reads only the history proves "nothing missing", not "nothing doubled".
Here a mutant of the store's mark check (``ingest.contiguous``) re-applies the records at
or below a stream's mark through the store's own write path, and each strengthened
check (``tests/helpers/runs.assert_same_history``, ``tests/helpers/loadsim.verify``) must
fail on it while the history-only part of it still passes. Both stores.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import rankwise
from rankwise.server.app import create_app
from rankwise.store import ingest
from rankwise.store.sql import SQLStore
from rankwise.stream import records as R
from rankwise.stream.files import iter_stream_files, read_whole_frames
from rankwise.stream.frames import MAGIC, iter_frames
from rankwise.stream.identity import StreamId
from tests.helpers.runs import assert_same_history, assert_same_rows, assert_stored_once
from tests.helpers.servers import serve_in_thread


def _loadsim() -> Any:
    from tests.helpers import loadsim

    return loadsim


def _reapply_at_or_below_the_mark(monkeypatch: pytest.MonkeyPatch) -> None:
    """The mutant: records at or below the mark are applied again (each once per batch)."""

    def everything(records: Sequence[R.AnyRecord], mark: int) -> list[R.AnyRecord]:
        return sorted({r.seq: r for r in records}.values(), key=lambda r: r.seq)

    monkeypatch.setattr(ingest, "contiguous", everything)


def _stream_batches(data: Path) -> list[tuple[StreamId, list[R.AnyRecord]]]:
    """Every stream file under ``data``, as the records its frames hold."""
    out = []
    for found in iter_stream_files(data):
        buf = read_whole_frames(found.path, len(MAGIC), 1 << 30).data
        recs = [rec for a, b in iter_frames(buf) for rec in R.decode_payload(buf[a:b])]
        start = recs[0]
        assert isinstance(start, R.StreamStart)
        key = StreamId(start.project, start.run_id, start.label, start.incarnation)
        out.append((key, recs))
    return out


def test_assert_same_history_sees_a_record_applied_twice(
    store: SQLStore, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = rankwise.init(project="twice", id="r", dir=data_dir)
    for step in range(6):
        run.log({"loss": 1.0 / (step + 1), "acc": step * 0.1})
    run.finish()
    batches = _stream_batches(data_dir)
    assert len(batches) == 1
    store.ingest(batches)
    local = rankwise.Api(dir=data_dir).run("r", project="twice")
    with serve_in_thread(create_app(store)) as url:
        remote = rankwise.Api(server=url).run("r", project="twice")
        assert_same_history(local, remote, store)  # applied once: it passes
        store.ingest(batches)  # resent: the mark keeps it out
        assert_same_history(local, remote, store)

        _reapply_at_or_below_the_mark(monkeypatch)
        store.ingest(batches)  # resent again: the mutant applies every record twice
        assert_same_rows(local, remote)  # what the history shows: nothing doubled
        with pytest.raises(AssertionError, match="stored points per"):
            assert_same_history(local, remote, store)
        # The band on its own sees it too (one rank logged each step; it counts two).
        monkeypatch.setattr(SQLStore, "stored_points", lambda *a: _logged(local))
        with pytest.raises(AssertionError, match="band of 'acc'"):
            assert_stored_once(local, store)


def _logged(local: rankwise.RunInfo) -> dict[tuple[str, str], int]:
    out: dict[tuple[str, str], int] = {}
    for row in local.history():
        for k in row.keys() - {"step", "time", "label", "weight"}:
            out[(row["label"], k)] = out.get((row["label"], k), 0) + 1
    return out


def test_loadsim_verify_sees_a_record_applied_twice(
    store: SQLStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    loadsim = _loadsim()
    run_id, steps = "twice", {0: 4, 1: 4, 2: 3}
    batches = []
    for rank, n in steps.items():
        key = StreamId(loadsim.PROJECT, run_id, f"rank-{rank}", 0)
        start = R.StreamStart(0, time.time(), loadsim.PROJECT, run_id, key.label, 0,
                              rank=rank, world_size=-1, run_mode="shared")  # fmt: skip
        recs: list[R.AnyRecord] = [start]
        for step in range(n):
            values = {k: loadsim.value(rank, step, j) for j, k in enumerate(loadsim.KEYS)}
            recs.append(R.Metrics(step + 1, time.time(), step, values))
        batches.append((key, recs))
    store.ingest(batches)
    assert loadsim.history_problems(store, run_id, steps) == []
    assert loadsim.double_problems(store, run_id, steps) == []

    _reapply_at_or_below_the_mark(monkeypatch)
    store.ingest(batches[1:2])  # rank 1's records, applied a second time
    assert loadsim.history_problems(store, run_id, steps) == []  # blind to it
    doubles = loadsim.double_problems(store, run_id, steps)
    assert doubles[0].startswith("rank 1: 50 series hold other than 4 points"), doubles
    assert "(step 0: 4, want 3)" in doubles[1], doubles
    assert len(doubles) == 1 + len(loadsim.KEYS)  # every series of rank 1, every band
