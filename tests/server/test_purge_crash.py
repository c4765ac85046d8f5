"""A purge SIGKILLed midway leaves nothing half-deleted (``rankwise server`` in a
subprocess, SQLite and PostgreSQL), and a purge collects blobs on S3 (moto's server).

The server pauses inside a purge where ``RANKWISE_TEST_PURGE_PAUSE`` says
(``rankwise.store.trash``) and is SIGKILLed there:

* ``rows``: inside the row transaction, before its commit. After a restart the run is
  whole, its blobs all there.
* ``blobs``: after the rows are committed gone and the first blob is deleted. After a
  restart (its sweep rolls the purge journal forward) the run is gone, every blob only it
  named is gone, and every blob a remaining row names is still there.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from rankwise.store import open_store
from rankwise.store.blobs import LocalBlobStore
from rankwise.store.trash import MARK_ENV, PAUSE_ENV
from rankwise.stream import records as R
from rankwise.stream.wire import STREAM_CONTENT_TYPE
from tests.helpers.servers import ServerProcess, postgres_dsn, wait_until
from tests.helpers.streams import body, records

API = "/api/v1"
SHARED = b"an image both runs logged"
MINE = [b"a's first image", b"a's second image", b"a's third image"]


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _put_run(srv: ServerProcess, run: str, images: list[bytes]) -> None:
    recs = records(run=run, steps=3, finish=True)
    items = []
    for data in images:
        r = httpx.put(f"{srv.url}{API}/blobs/p/{_sha(data)}", content=data, headers=srv.headers)
        assert r.status_code in (200, 201), r.text
        items.append(R.MediaItem(kind="image", digest=_sha(data), size=len(data), format="png"))
    recs.insert(-1, R.Media(seq=0, time=1003.0, step=2, key="img", items=items))
    recs = [type(r)(**{**{f: getattr(r, f) for f in r.__struct_fields__}, "seq": i})
            for i, r in enumerate(recs)]  # fmt: skip
    r = httpx.post(
        f"{srv.url}{API}/ingest",
        params={"project": "p", "run": run, "label": "rank-0", "incarnation": 0},
        content=body(recs),
        headers={**srv.headers, "Content-Type": STREAM_CONTENT_TYPE},
    )
    assert r.status_code == 200, r.text


def _purge_in_background(srv: ServerProcess, run: str) -> threading.Thread:
    def go() -> None:
        try:
            httpx.post(
                f"{srv.url}{API}/projects/p/runs/delete",
                json={"runs": [run], "purge": True},
                headers=srv.headers,
                timeout=120,
            )
        except httpx.HTTPError:
            pass  # the server is killed under it

    t = threading.Thread(target=go, daemon=True)
    t.start()
    return t


def _dangling(url: str, blobs: LocalBlobStore) -> list[str]:
    """Digests a remaining row names that the blob store lacks (must be none)."""
    with open_store(url) as store:
        rows = store._read(  # type: ignore[attr-defined]
            lambda tx: tx.all(
                "SELECT b.digest FROM blob_kinds b JOIN runs r ON r.id = b.run "
                "WHERE r.project = 'p'"
            )
        )
    return [str(d) for (d,) in rows if not blobs.has("p", str(d))]


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'server.db'}"
    else:
        yield from postgres_dsn()


def test_sigkill_mid_purge_leaves_nothing_half_deleted(tmp_path: Path, db_url: str) -> None:
    blob_dir = tmp_path / "blobs"
    blobs = LocalBlobStore(blob_dir)
    mark = tmp_path / "paused"
    srv = ServerProcess.db(db_url, tmp_path / "server.log", "--blobs", str(blob_dir))
    srv.start()
    try:
        _put_run(srv, "a", [SHARED, *MINE])
        _put_run(srv, "b", [SHARED])
        srv.stop()

        # 1. Killed inside the row transaction: the purge never happened.
        srv.extra_env = {PAUSE_ENV: "rows", MARK_ENV: str(mark)}
        srv.start()
        _purge_in_background(srv, "a")
        wait_until(mark.exists, timeout=60)
        srv.kill()
        mark.unlink()
        srv.extra_env = {}
        srv.start()
        got = srv.get(f"{API}/projects/p/runs/a")
        assert got.status_code == 200, got.text
        assert got.json()["steps"] == 3
        assert all(blobs.has("p", _sha(d)) for d in [SHARED, *MINE])
        assert _dangling(db_url, blobs) == []
        srv.stop()

        # 2. Killed after the rows are gone and one blob is deleted: rolled forward.
        srv.extra_env = {PAUSE_ENV: "blobs", MARK_ENV: str(mark)}
        srv.start()
        _purge_in_background(srv, "a")
        wait_until(mark.exists, timeout=60)
        srv.kill()
        left = [d for d in MINE if blobs.has("p", _sha(d))]
        assert len(left) == len(MINE) - 1  # killed between two deletions
        with open_store(db_url) as store:
            assert store.run_gone("p", "a") == "purged"  # the rows were committed gone
            assert store.pending_purges() == 1  # the journal says what is left to do
        assert _dangling(db_url, blobs) == []  # and no row names a deleted blob
        srv.extra_env = {}
        srv.start()  # its sweep finishes the purge
        with open_store(db_url) as store:
            wait_until(lambda: store.pending_purges() == 0, timeout=30)
        assert not any(blobs.has("p", _sha(d)) for d in MINE)
        assert blobs.has("p", _sha(SHARED))  # b still names it
        assert srv.get(f"{API}/projects/p/runs/a").status_code == 404
        assert srv.get(f"{API}/projects/p/runs/b").json()["steps"] == 3
        assert _dangling(db_url, blobs) == []
        log = srv.get(f"{API}/audit").json()["entries"]
        assert [e["action"] for e in log] == ["purge", "purge"]  # both asked, audited
    finally:
        srv.stop()


def test_purge_collects_blobs_on_s3(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.helpers.blobs import moto_s3

    with moto_s3(monkeypatch) as endpoint:
        import boto3  # type: ignore[import-untyped]

        from rankwise.store.blobs import FsspecBlobStore

        boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket="rw-trash")
        url = f"sqlite:///{tmp_path / 'server.db'}"
        srv = ServerProcess.db(
            url,
            tmp_path / "server.log",
            "--blobs",
            "s3://rw-trash/blobs",
            "--blobs-endpoint",
            endpoint,
        )
        with srv:
            _put_run(srv, "a", [SHARED, *MINE])
            _put_run(srv, "b", [SHARED])
            s3 = FsspecBlobStore("s3://rw-trash/blobs", endpoint=endpoint)
            assert all(s3.has("p", _sha(d)) for d in [SHARED, *MINE])
            r = httpx.post(
                f"{srv.url}{API}/projects/p/runs/delete",
                json={"runs": ["a"], "purge": True},
                headers=srv.headers,
            )
            assert r.json()["count"] == 1
            assert not any(s3.has("p", _sha(d)) for d in MINE)
            assert s3.has("p", _sha(SHARED))
            assert srv.get(f"{API}/projects/p/runs/b").status_code == 200
