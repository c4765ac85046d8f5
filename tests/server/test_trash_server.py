"""Deleting runs over HTTP (real uvicorn, the real app over SQLite and a blob directory):
who may, the trash and restore, a filter's dry run, purges collecting blobs, the audit
log, and uploads to a deleted run answered 410 Gone."""

from __future__ import annotations

import hashlib

import httpx
import pytest

from rankwise.stream import records as R
from rankwise.stream.wire import STREAM_CONTENT_TYPE
from tests.helpers.servers import AppServer, bearer
from tests.helpers.streams import body, records

API = "/api/v1"


def _blob(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _run(srv: AppServer, run: str, tags: list[str], images: list[bytes]) -> None:
    """A run whose one stream logs ``images`` (their blobs PUT first, as the SDK does)."""
    headers = bearer(srv.token)
    recs = records(run=run, steps=3, finish=False)
    recs[0] = R.StreamStart(0, 1000.0, "p", run, "rank-0", 0, config={"lr": 0.1}, tags=tags)
    items = []
    for data in images:
        d = _blob(data)
        r = httpx.put(f"{srv.url}{API}/blobs/p/{d}", content=data, headers=headers)
        assert r.status_code in (200, 201), r.text
        items.append(R.MediaItem(kind="image", digest=d, size=len(data), format="png"))
    recs.append(R.Media(seq=len(recs), time=1005.0, step=2, key="img", items=items))
    assert _upload(srv, run, recs).status_code == 200


def _upload(srv: AppServer, run: str, recs: list[R.AnyRecord]) -> httpx.Response:
    return httpx.post(
        f"{srv.url}{API}/ingest",
        params={"project": "p", "run": run, "label": "rank-0", "incarnation": 0},
        content=body(recs),
        headers={**bearer(srv.token), "Content-Type": STREAM_CONTENT_TYPE},
    )


def _ids(srv: AppServer) -> list[str]:
    r = httpx.get(f"{srv.url}{API}/projects/p/runs", headers=bearer(srv.token))
    if r.status_code == 404:  # a project whose runs are all deleted is no project
        return []
    return sorted(x["id"] for x in r.json()["runs"])


def _post(srv: AppServer, path: str, json: dict, token: str | None = None) -> httpx.Response:
    return httpx.post(f"{srv.url}{API}{path}", json=json, headers=bearer(token or srv.token))


def test_delete_restore_and_who_may(app_server: AppServer) -> None:
    srv = app_server
    for run in ("a", "b"):
        _run(srv, run, ["x"], [])
    store = srv.store
    writer = store.create_token("write", ["p"], "alice").value
    other = store.create_token("write", ["q"], "mallory").value
    ingest = store.create_token("ingest", ["p"], "job").value
    reader = store.create_token("read", ["p"], "viewer").value
    for token in (other, ingest, reader):
        r = _post(srv, "/projects/p/runs/delete", {"runs": ["a"]}, token)
        assert r.status_code == 403, r.text
    assert _ids(srv) == ["a", "b"]
    r = _post(srv, "/projects/p/runs/delete", {"runs": ["a", "nope"]}, writer)
    assert r.status_code == 200 and r.json() == {
        "runs": ["a"], "count": 1, "purged": False, "dry_run": False
    }  # fmt: skip
    assert _ids(srv) == ["b"]
    got = httpx.get(f"{srv.url}{API}/projects/p/runs/a", headers=bearer(srv.token))
    assert got.status_code == 404
    trash = httpx.get(f"{srv.url}{API}/projects/p/trash", headers=bearer(reader)).json()
    assert [(t["id"], t["deleted_by"]) for t in trash["runs"]] == [("a", "alice")]
    assert trash["retention_days"] == 30
    r = _post(srv, "/projects/p/runs/restore", {"runs": ["a"]}, reader)
    assert r.status_code == 403
    r = _post(srv, "/projects/p/runs/restore", {"runs": ["a"]}, writer)
    assert r.json() == {"restored": ["a"]} and _ids(srv) == ["a", "b"]
    # The audit log: admins only.
    assert httpx.get(f"{srv.url}{API}/audit", headers=bearer(writer)).status_code == 403
    log = httpx.get(f"{srv.url}{API}/audit", headers=bearer(srv.token)).json()["entries"]
    assert [(e["action"], e["who"], e["target"], e["count"]) for e in log] == [
        ("restore", "alice", "a", 1),
        ("delete", "alice", "a", 1),
    ]


def test_filter_dry_run_then_delete_then_purge_collects_blobs(app_server: AppServer) -> None:
    srv = app_server
    shared, mine = b"shared image", b"only a's image"
    _run(srv, "a", ["smoke"], [shared, mine])
    _run(srv, "b", ["smoke"], [shared])
    _run(srv, "c", ["keep"], [])
    pick = {"filters": {"tags": "smoke"}}
    r = _post(srv, "/projects/p/runs/delete", {**pick, "dry_run": True})
    assert r.json() == {"runs": ["a", "b"], "count": 2, "purged": False, "dry_run": True}
    assert _ids(srv) == ["a", "b", "c"]  # a dry run changes nothing
    bad = _post(srv, "/projects/p/runs/delete", {"runs": ["a"], **pick})
    assert bad.status_code == 422
    assert _post(srv, "/projects/p/runs/delete", {"runs": ["b"]}).json()["count"] == 1
    r = _post(srv, "/projects/p/runs/delete", {"runs": ["a"], "purge": True})
    assert r.json() == {"runs": ["a"], "count": 1, "purged": True, "dry_run": False}
    assert not (srv.root / "p" / _blob(mine)[:2] / _blob(mine)).exists()
    # b is in the trash and still names the shared image: it stays.
    assert (srv.root / "p" / _blob(shared)[:2] / _blob(shared)).is_file()
    r = _post(srv, "/projects/p/runs/delete", {"runs": ["b"], "purge": True})
    assert r.json()["count"] == 1
    assert not (srv.root / "p" / _blob(shared)[:2] / _blob(shared)).exists()
    assert _ids(srv) == ["c"]
    log = httpx.get(f"{srv.url}{API}/audit", headers=bearer(srv.token)).json()["entries"]
    assert [e["action"] for e in log] == ["purge", "purge", "delete"]


def test_uploads_to_a_deleted_run_are_410_gone(app_server: AppServer) -> None:
    srv = app_server
    recs = records(run="live", steps=20, finish=False)
    assert _upload(srv, "live", recs[:5]).status_code == 200
    _post(srv, "/projects/p/runs/delete", {"runs": ["live"]})
    r = _upload(srv, "live", recs[:10])
    assert r.status_code == 410
    err = r.json()["error"]
    assert "'live'" in err["message"] and "deleted" in err["message"] and err["deleted"] is True
    _post(srv, "/projects/p/runs/restore", {"runs": ["live"]})
    assert _upload(srv, "live", recs[:10]).status_code == 200  # restored: taken again
    _post(srv, "/projects/p/runs/delete", {"runs": ["live"], "purge": True})
    r = _upload(srv, "live", recs)
    assert r.status_code == 410 and "purged" in r.json()["error"]["message"]
    assert "live" not in _ids(srv)


@pytest.mark.parametrize("bad", [{}, {"runs": ["a"], "filters": {}}, {"filters": {"$x": 1}}])
def test_bad_delete_requests_are_422(app_server: AppServer, bad: dict) -> None:
    _run(app_server, "a", [], [])
    r = _post(app_server, "/projects/p/runs/delete", bad)
    assert r.status_code == 422, r.text
    assert _ids(app_server) == ["a"]


def test_the_sweep_purges_what_outlived_the_retention(app_server: AppServer) -> None:
    import time

    from rankwise.server.trash_sweep import sweep

    srv = app_server
    _run(srv, "old", [], [b"old run's image"])
    _run(srv, "kept", [], [])
    _post(srv, "/projects/p/runs/delete", {"runs": ["old", "kept"]})
    blobs = srv.app.state.blobs
    assert sweep(srv.store, blobs, retention_days=30) == 0  # nothing is 30 days old
    assert srv.store.run_gone("p", "old") == "deleted"
    _post(srv, "/projects/p/runs/restore", {"runs": ["kept"]})
    later = time.time() + 31 * 86400
    assert sweep(srv.store, blobs, retention_days=30, now=later) == 1
    assert srv.store.run_gone("p", "old") == "purged"
    assert not blobs.has("p", _blob(b"old run's image"))
    assert _ids(srv) == ["kept"]
    log = httpx.get(f"{srv.url}{API}/audit", headers=bearer(srv.token)).json()["entries"]
    assert (log[0]["action"], log[0]["who"], log[0]["target"]) == ("purge", "retention", "old")


def test_a_deleted_runs_page_says_it_is_in_the_trash(app_server: AppServer) -> None:
    _run(app_server, "a", [], [])
    _post(app_server, "/projects/p/runs/delete", {"runs": ["a"]})
    r = httpx.get(f"{app_server.url}{API}/projects/p/runs/a", headers=bearer(app_server.token))
    assert r.status_code == 404
    err = r.json()["error"]
    assert "in the trash" in err["message"] and err["deleted"] is True
    nope = httpx.get(f"{app_server.url}{API}/projects/p/runs/zz", headers=bearer(app_server.token))
    assert nope.status_code == 404 and "deleted" not in nope.json()["error"]
