"""Deleting runs in both stores (``rankwise.store.trash``, migration 15): the trash hides a
run from lists and filters and keeps every row; restore brings it back; a purge removes
its rows, keeps a tombstone and collects the blobs nothing else references; an artifact
version a purged run logged survives while another run uses it, an alias names it or it
is the latest. Expected values come from the records written, never from the store.
"""

from __future__ import annotations

import hashlib
import io
from pathlib import Path

import msgspec
import pytest

from rankwise.store import trash
from rankwise.store.base import RunQuery
from rankwise.store.blobs import LocalBlobStore
from rankwise.store.sql import SQLStore
from rankwise.stream import records as R
from rankwise.stream.identity import StreamId
from rankwise.wire.artifacts import CommitRequest
from tests.helpers.rich import rich_stream

# Runs a and b share rank-0's media (the digests follow the label); rank-1's are a's only.
A = [StreamId("p", "a", "rank-0", 0), StreamId("p", "a", "rank-1", 0)]
B = [StreamId("p", "b", "rank-0", 0)]


def _digests(recs: list[R.AnyRecord]) -> set[str]:
    out: set[str] = set()
    for r in recs:
        if isinstance(r, R.Media):
            out |= {i.digest for i in r.items}
        elif isinstance(r, R.TableRec):
            out |= {r.digest, *r.blobs}
    return out


def _fill(store: SQLStore, blobs: LocalBlobStore) -> dict[str, set[str]]:
    """Ingest runs a and b, place a file for every blob they name; digests per run."""
    per_run: dict[str, set[str]] = {"a": set(), "b": set()}
    for i, key in enumerate(A + B):
        recs = rich_stream(key, i, 6)
        store.ingest([(key, recs)])
        per_run[key.run_id] |= _digests(recs)
    for d in per_run["a"] | per_run["b"]:
        path = blobs.root / "p" / d[:2] / d
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x")
    return per_run


def _ids(store: SQLStore) -> list[str]:
    rows, _ = store.list_runs(RunQuery(project="p", sort="name"))
    return sorted(r.id for r in rows)


def test_trash_hides_keeps_and_restores(store: SQLStore, tmp_path: Path) -> None:
    blobs = LocalBlobStore(tmp_path / "blobs")
    _fill(store, blobs)
    assert _ids(store) == ["a", "b"]
    assert store.delete_runs("p", ["a", "nope"], who="alice") == ["a"]
    assert _ids(store) == ["b"]
    assert [r.id for r in store.find_runs("p", {})[0]] == ["b"]
    assert [r.id for r in store.list_runs(RunQuery())[0]] == ["b"]  # all projects too
    assert store.get_run("p", "a") is None
    assert store.run_gone("p", "a") == "deleted" and store.run_gone("p", "b") is None
    trashed = store.trashed_runs("p", retention_days=30)
    assert [(t.id, t.deleted_by) for t in trashed] == [("a", "alice")]
    assert trashed[0].purge_after - trashed[0].deleted_at == 30 * 86400
    assert store.stored_points("p", "a")  # the rows are all still there
    assert store.alert_candidates(0.0) == [("p", "b")]  # alert rules skip the trash
    assert store.expired_runs(trashed[0].deleted_at + 1) == [("p", "a")]
    assert store.expired_runs(trashed[0].deleted_at - 1) == []
    assert store.delete_runs("p", ["a"], who="alice") == []  # already in the trash
    assert store.restore_runs("p", ["a", "b"], who="bob") == ["a"]
    assert _ids(store) == ["a", "b"] and store.get_run("p", "a") is not None
    assert store.alert_candidates(0.0) == [("p", "a"), ("p", "b")]
    assert [r.id for r in store.find_runs("p", {"tags": {"$exists": False}})[0]] == ["a", "b"]
    log = store.audit_log()
    assert [(e.action, e.who, e.target, e.count) for e in log] == [
        ("restore", "bob", "a", 1),
        ("delete", "alice", "", 0),
        ("delete", "alice", "a", 1),
    ]


def test_purge_removes_rows_and_only_unshared_blobs(store: SQLStore, tmp_path: Path) -> None:
    blobs = LocalBlobStore(tmp_path / "blobs")
    per_run = _fill(store, blobs)
    only_a = per_run["a"] - per_run["b"]
    shared = per_run["a"] & per_run["b"]
    assert only_a and shared
    store.delete_runs("p", ["a"], who="alice")
    row = store._read(lambda tx: tx.one("SELECT id FROM runs WHERE run_id = 'a'"))
    assert row is not None
    (pk,) = row
    assert store.purge_runs("p", ["a"], who="alice", blobs=blobs) == ["a"]
    pending = "SELECT COUNT(*) FROM upload_blocks WHERE run = ?"  # nothing left to compact
    assert store._read(lambda tx: tx.one(pending, (pk,))) == (0,)
    assert store.run_gone("p", "a") == "purged"
    assert store.trashed_runs("p", 30) == [] and _ids(store) == ["b"]
    assert store.stored_points("p", "a") == {} and store.metric_keys("p", "a") == []
    assert store.media_keys("p", "a") in (None, [])
    assert not any(blobs.has("p", d) for d in only_a)
    assert all(blobs.has("p", d) for d in per_run["b"])
    assert store.pending_purges() == 0
    assert store.get_run("p", "b") is not None and store.stored_points("p", "b")
    assert store.audit_log()[0].action == "purge"
    assert store.purge_runs("p", ["a"], who="alice", blobs=blobs) == []  # once only
    # A trashed run's blobs count as referenced: purging b now keeps nothing of a's
    # (gone) and collects b's, which no other run names any more.
    store.purge_runs("p", ["b"], who="alice", blobs=blobs)
    assert not any(blobs.has("p", d) for d in per_run["a"] | per_run["b"])


def _commit(
    store: SQLStore, blobs: LocalBlobStore, name: str, body: bytes, run: str, **kw: object
) -> str:
    d = hashlib.sha256(body).hexdigest()
    blobs.put("p", d, io.BytesIO(body))
    req = {
        "type": "model",
        "client_id": hashlib.sha256(name.encode() + body).hexdigest()[:32],
        "manifest": {
            "entries": [
                {"path": "m.bin", "digest": d, "size": len(body), "chunks": [[d, len(body)]]}
            ]
        },
        "run_id": run,
        "label": "rank-0",
        **kw,
    }
    store.commit_artifact("p", name, msgspec.convert(req, CommitRequest))
    return d


def test_artifact_versions_survive_while_used_aliased_or_latest(
    store: SQLStore, tmp_path: Path
) -> None:
    blobs = LocalBlobStore(tmp_path / "blobs")
    _fill(store, blobs)
    gone = _commit(store, blobs, "m", b"v0 only a", "a")  # v0: nothing keeps it
    used = _commit(store, blobs, "m", b"v1 used by b", "a")  # v1: b uses it
    named = _commit(store, blobs, "m", b"v2 aliased", "a", aliases=["best"])  # v2
    latest = _commit(store, blobs, "m", b"v3 latest", "a")  # v3: the latest
    store.use_artifact("p", "m", "v1", "b")
    store.use_artifact("p", "m", "v0", "a")  # a's own use keeps nothing
    store.purge_runs("p", ["a"], who="admin", blobs=blobs)
    versions = store.artifact_versions("p", "m")
    assert versions is not None
    assert sorted(v.version for v in versions) == ["v1", "v2", "v3"]
    assert not blobs.has("p", gone)
    assert all(blobs.has("p", d) for d in (used, named, latest))
    assert store.pending_purges() == 0


@pytest.mark.parametrize("per_read", [400, 2])
def test_upload_states_answer_in_one_read_as_each_alone(
    store: SQLStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, per_read: int
) -> None:
    """A node's batch reads every part's run state and mark at once (one statement per
    run, ``per_read`` labels at a time): the same answers as ``run_gone`` and ``acked``
    give for each stream alone, in the order asked, for live, deleted and purged runs,
    a stream the run lacks, another incarnation of a label, a run that does not exist
    and a key asked twice."""
    monkeypatch.setattr(trash, "_LABELS_PER_READ", per_read)
    _fill(store, LocalBlobStore(tmp_path / "blobs"))
    store.ingest(
        [(StreamId("p", "c", "rank-0", 0), rich_stream(StreamId("p", "c", "rank-0", 0), 0, 3))]
    )
    store.delete_runs("p", ["a", "c"], who="alice")
    store.purge_runs("p", ["c"], who="alice", blobs=None)
    keys = [
        B[0], A[1], StreamId("p", "c", "rank-0", 0), StreamId("p", "b", "rank-9", 0),
        StreamId("p", "nope", "rank-0", 0), StreamId("p", "b", "rank-0", 1), A[0], B[0],
        StreamId("q", "b", "rank-0", 0),
    ]  # fmt: skip
    alone = [(store.run_gone(k.project, k.run_id), store.acked(k)) for k in keys]
    assert store.upload_states(keys) == alone
    assert [store.upload_state(k) for k in keys] == alone
    assert [gone for gone, _ in alone] == [
        None, "deleted", "purged", None, None, None, "deleted", None, None
    ]  # fmt: skip
    assert alone[0][1] == store.acked(B[0]) > 0 and alone[3][1] == alone[4][1] == -1
    assert alone[1][1] > 0 and alone[5][1] == alone[8][1] == -1
    assert store.upload_states([]) == []
