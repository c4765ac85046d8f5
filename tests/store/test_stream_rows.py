"""The stream rows of one ingest call are created (``stream_ids``) and read (and on
PostgreSQL locked, ``ingest._stream_rows``) a statement per many streams, not one per
stream: each stream still gets its own row, its own mark and its own run, whatever mix
of projects, runs, labels and incarnations one call brings, and however many statements
it takes."""

from __future__ import annotations

from pathlib import Path

import pytest

from rankwise.store import ingest, stream_ids
from rankwise.store.sql import SQLStore
from rankwise.store.stream_ids import ensure_stream_rows
from rankwise.store.types import ConsoleQuery
from rankwise.stream import records as R
from rankwise.stream.identity import StreamId
from tests.helpers.stores import open_sql_store, race


def _records(key: StreamId, n: int) -> list[R.AnyRecord]:
    recs: list[R.AnyRecord] = [
        R.StreamStart(0, 1.0, key.project, key.run_id, key.label, key.incarnation)
    ]
    for s in range(n):
        recs.append(R.Metrics(len(recs), 2.0 + s, s, {"loss": float(n * 100 + s)}))
    recs.append(R.Console(len(recs), 9.0, "stdout", [f"{key.run_id}/{key.label}/{n}"]))
    return recs


# The same run id in two projects, the same label in two runs and two incarnations.
KEYS = [
    StreamId(project, run, f"rank-{r}", inc)
    for project, run in (("p", "a"), ("p", "b"), ("q", "a"))
    for r in range(3)
    for inc in ((0, 1) if r == 1 else (0,))
]


@pytest.mark.parametrize("per_read", [500, 2])
def test_streams_created_and_read_together_keep_their_own_rows(
    store: SQLStore, monkeypatch: pytest.MonkeyPatch, per_read: int
) -> None:
    monkeypatch.setattr(ingest, "_ROWS_PER_READ", per_read)
    first = KEYS[::2]
    sizes = {key: i + 1 for i, key in enumerate(KEYS)}  # a different length per stream
    marks = store.ingest([(key, _records(key, sizes[key])) for key in first])
    assert marks == {key: sizes[key] + 1 for key in first}
    # A second call: the others are new, the first ones go on from their marks.
    more = {key: _records(key, sizes[key]) for key in KEYS}
    for key in first:
        more[key] = more[key] + [R.Metrics(sizes[key] + 2, 20.0, 99, {"loss": -1.0})]
    marks = store.ingest(list(more.items()))
    assert marks == {key: len(recs) - 1 for key, recs in more.items()}
    assert {key: store.acked(key) for key in KEYS} == marks
    ids = {key: store._ids(key) for key in KEYS}
    assert len({sid for sid, _ in ids.values()}) == len(KEYS)
    run_pk = {(k.project, k.run_id): run for k, (_, run) in ids.items()}
    assert len(set(run_pk.values())) == 3
    assert all(run_pk[(k.project, k.run_id)] == run for k, (_, run) in ids.items())
    for project, run in (("p", "a"), ("p", "b"), ("q", "a")):
        page = store.console(project, run, ConsoleQuery(limit=100))
        assert page is not None
        got = sorted(line.text for line in page.lines)
        mine = [k for k in KEYS if (k.project, k.run_id) == (project, run)]
        assert got == sorted(f"{run}/{k.label}/{sizes[k]}" for k in mine)
    # The ids handed out are the rows the database holds for each key.
    held = store._read(lambda tx: {key: _row_of(tx, key) for key in KEYS})
    assert held == {key: ids[key][0] for key in KEYS}


def _row_of(tx: object, key: StreamId) -> int:
    row = tx.one(  # type: ignore[attr-defined]
        "SELECT s.id FROM streams s JOIN runs r ON r.id = s.run WHERE r.project = ? "
        "AND r.run_id = ? AND s.label = ? AND s.incarnation = ?",
        (key.project, key.run_id, key.label, key.incarnation),
    )
    return int(row[0])


def test_a_stream_whose_row_is_gone_is_refused_alone(store: SQLStore) -> None:
    """Rows read together: a call naming a stream row that no longer exists (its run was
    purged in between) fails with ``StreamGone``, and nothing of the call is applied."""
    key, other = KEYS[0], KEYS[3]
    store.ingest([(key, _records(key, 2)), (other, _records(other, 2))])
    sid, run = store._ids(key)
    osid, orun = store._ids(other)
    mids = store._metrics({"loss"})
    store._write(lambda tx: tx.run("DELETE FROM streams WHERE id = ?", (sid,)))
    more = [R.Metrics(4, 5.0, 7, {"loss": 1.0})]
    with pytest.raises(ingest.StreamGone):
        store._write(
            lambda tx: ingest.apply_streams(tx, [(osid, orun, more), (sid, run, more)], mids)
        )
    assert store.acked(other) == 3


@pytest.mark.parametrize("per_read", [400, 2])
def test_new_streams_are_created_together_with_their_own_ids(
    store: SQLStore, monkeypatch: pytest.MonkeyPatch, per_read: int
) -> None:
    """A call's new streams are created a statement per run and a batch of stream
    inserts (``stream_ids``), not four statements each: every key gets a row of its own
    under its own run, existing rows are kept, and the ids read back are theirs."""
    monkeypatch.setattr(stream_ids, "_PER_READ", per_read)
    first = KEYS[1::3]
    created = store._write(lambda tx: ensure_stream_rows(tx, sorted(first)))
    again = store._write(lambda tx: ensure_stream_rows(tx, sorted(KEYS)))
    ids = dict(zip(sorted(KEYS), again, strict=True))
    assert dict(zip(sorted(first), created, strict=True)) == {k: ids[k] for k in first}
    assert len({sid for sid, _ in ids.values()}) == len(KEYS)
    rows = {
        (int(sid), int(run)): (str(project), str(run_id), str(label), int(inc))
        for sid, run, project, run_id, label, inc in store._read(
            lambda tx: tx.all(
                "SELECT s.id, s.run, r.project, r.run_id, s.label, s.incarnation "
                "FROM streams s JOIN runs r ON r.id = s.run"
            )
        )
    }
    assert len(rows) == len(KEYS)
    assert {ids[k]: (k.project, k.run_id, k.label, k.incarnation) for k in KEYS} == rows


def test_two_ingesters_creating_the_same_streams_at_once_agree(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest, store: SQLStore
) -> None:
    """A job's start reaches several server processes at once, some streams at two of
    them (a refused upload retried at the next): each creates what is missing, in one
    order, and both read the same ids; nothing deadlocks or is created twice."""
    keys = [StreamId("p", "start", f"rank-{r}", 0) for r in range(300)]
    other = open_sql_store(kind, tmp_path, request)
    got: dict[int, dict[StreamId, tuple[int, int]]] = {}
    try:

        def create(st: SQLStore, n: int) -> None:
            mine = keys[n * 100 :] if n else keys[:200]  # 100 of them at both
            st._ensure_streams(mine)
            got[n] = {k: st._ids(k) for k in mine}

        race(create, [store, other])
    finally:
        other.close()
    both = got[0].keys() & got[1].keys()
    assert len(both) == 100 and all(got[0][k] == got[1][k] for k in both)
    ids = {**got[0], **got[1]}
    assert len({sid for sid, _ in ids.values()}) == 300 and len({r for _, r in ids.values()}) == 1
    count = store._read(lambda tx: tx.one("SELECT COUNT(*) FROM streams"))
    assert count is not None and int(count[0]) == 300
