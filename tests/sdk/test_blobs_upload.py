"""Blobs first, exactly once: the SDK's uploader and ``rankwise sync`` against real servers.

Nothing is mocked: servers are uvicorn in a thread or ``rankwise server`` processes
(SIGKILLed and restarted for the outage), the S3 store talks to moto's real HTTP server on
a loopback port, PostgreSQL is a real database. The runs are stream files and blob files
laid out as the SDK writes them (``tests/helpers/blobs.py``).
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from rankwise.sdk.sync import sync
from rankwise.sdk.uploader import Uploader, stream_ref
from rankwise.server import ServerSettings, create_app
from rankwise.settings import Settings
from rankwise.store import open_store
from rankwise.store.blobs import LocalBlobStore
from rankwise.stream.identity import StreamId
from tests.helpers.blobs import BlobRun, blob_run, moto_s3, sha, stored_files
from tests.helpers.servers import (
    REPO,
    AppServer,
    ServerProcess,
    bearer,
    postgres_dsn,
    serve_in_thread,
)
from tests.helpers.wait import wait_until


@pytest.fixture
def server(app_server: AppServer) -> dict[str, Any]:
    return {"url": app_server.url, "store": app_server.store, "root": app_server.root}


def key(run: BlobRun, label: str = "rank-0") -> StreamId:
    return StreamId(run.project, run.run, label, 0)


def fetch(url: str, project: str, digest: str, token: str | None = None) -> httpx.Response:
    import os

    token = token or os.environ["RANKWISE_TOKEN"]
    return httpx.get(f"{url}/api/v1/blobs/{project}/{digest}", headers=bearer(token))


def assert_all_served(url: str, run: BlobRun, token: str | None = None) -> None:
    for digest, data in run.blobs.items():
        r = fetch(url, run.project, digest, token)
        assert r.status_code == 200 and r.content == data, digest


def test_sync_sends_blobs_first_and_twice_sends_no_blob_bytes(
    tmp_path: Path, server: dict[str, Any]
) -> None:
    run = blob_run(tmp_path / "data", "p", "r")
    report = sync(tmp_path / "data", server["url"], progress=False)
    assert not report.failed and report.streams == 1
    assert report.blob_bytes == sum(len(b) for b in run.blobs.values())
    assert server["store"].acked(key(run)) == run.last_seq
    assert sorted(p.name for p in stored_files(server["root"])) == sorted(run.blobs)
    assert_all_served(server["url"], run)
    again = sync(tmp_path / "data", server["url"], progress=False)
    assert again.blob_bytes == 0 and again.uploaded_bytes == 0 and not again.failed
    out = subprocess.run(
        [sys.executable, "-m", "rankwise.cli", "sync", str(tmp_path / "data"), "--server",
         server["url"], "--no-progress"],
        capture_output=True, text=True, cwd=REPO, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0 and "0 new bytes, 0 blob bytes" in out.stdout, out.stderr


def test_the_live_uploader_sends_blobs_before_records(
    tmp_path: Path, server: dict[str, Any]
) -> None:
    run = blob_run(tmp_path / "data", "p", "live", steps=4)
    settings = Settings.resolve({"upload_interval": 0.05, "upload_timeout": 20})
    up = Uploader(server["url"], run.stream, stream_ref(run.stream), settings)
    up.start()
    up.stop(time.monotonic() + 30)
    assert up.drained
    assert server["store"].acked(key(run)) == run.last_seq
    assert_all_served(server["url"], run)


def test_a_deleted_blob_file_warns_once_and_does_not_wedge_the_stream(
    tmp_path: Path, server: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    run = blob_run(tmp_path / "data", "p", "r")
    gone = sorted(run.blobs)[:3]
    for digest in gone:
        run.path(digest).unlink()
    report = sync(tmp_path / "data", server["url"], progress=False)
    assert not report.failed and report.blobs_lost == 3
    assert server["store"].acked(key(run)) == run.last_seq  # every record applied
    assert capsys.readouterr().err.count("cannot be uploaded") == 1
    for digest in gone:
        assert fetch(server["url"], "p", digest).status_code == 404
    kept = {d: b for d, b in run.blobs.items() if d not in gone}
    for digest, data in kept.items():
        assert fetch(server["url"], "p", digest).content == data


def test_two_uploaders_of_one_run_store_each_blob_once(
    tmp_path: Path, server: dict[str, Any]
) -> None:
    """Two ``sync`` at once over the same run (and two ranks sharing blobs): every record
    applied once, every blob stored once, whole."""
    shared = [b"the same picture on both ranks" * 100]
    r0 = blob_run(tmp_path / "data", "p", "r", label="rank-0", seed=1, shared=shared)
    r1 = blob_run(tmp_path / "data", "p", "r", label="rank-1", seed=2, shared=shared)
    errors: list[BaseException] = []

    def go() -> None:
        try:
            report = sync(tmp_path / "data", server["url"], progress=False)
            assert not report.failed
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=go) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors
    assert server["store"].acked(key(r0)) == r0.last_seq
    assert server["store"].acked(key(r1, "rank-1")) == r1.last_seq
    files = stored_files(server["root"])
    assert sorted(p.name for p in files) == sorted({*r0.blobs, *r1.blobs})
    for p in files:
        assert sha(p.read_bytes()) == p.name
    assert not list(server["root"].rglob(".tmp-*"))


@pytest.mark.slow
def test_server_sigkilled_mid_upload_loses_and_doubles_nothing(tmp_path: Path) -> None:
    run = blob_run(tmp_path / "data", "p", "big", steps=12, images_per_step=3,
                   image_bytes=1024 * 1024)  # fmt: skip
    blobs_dir = tmp_path / "server-blobs"
    db = f"sqlite:///{tmp_path / 'server.db'}"
    srv = ServerProcess.db(db, tmp_path / "server.log", "--blobs", str(blobs_dir))
    srv.start()
    sync_proc = subprocess.Popen(
        [sys.executable, "-m", "rankwise.cli", "sync", str(tmp_path / "data"), "--server",
         srv.url, "--no-progress", "--retry-for", "120"],
        env=srv.env(), cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        wait_until(lambda: len(stored_files(blobs_dir)) >= 4, timeout=60, every=0.01)
        srv.kill()  # mid-upload: some blobs stored, maybe one half-written
        held = len(stored_files(blobs_dir))
        assert held < len(run.blobs), "the upload finished before the kill: make it bigger"
        time.sleep(1.0)
        srv.start()
        out, _ = sync_proc.communicate(timeout=180)
        assert sync_proc.returncode == 0, out
    finally:
        if sync_proc.poll() is None:
            sync_proc.kill()
        srv.stop()
    files = stored_files(blobs_dir)
    assert sorted(p.name for p in files) == sorted(run.blobs)  # none lost, none twice
    for p in files:
        assert sha(p.read_bytes()) == p.name  # none half-written under its name
    with open_store(db) as store:
        assert store.acked(key(run)) == run.last_seq


@pytest.mark.slow
def test_s3_blob_store_against_motos_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with moto_s3(monkeypatch) as endpoint:
        import boto3  # type: ignore[import-untyped]

        s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
        s3.create_bucket(Bucket="rankwise-test")
        run = blob_run(tmp_path / "data", "p", "r")
        db = f"sqlite:///{tmp_path / 'server.db'}"
        where = ["--blobs", "s3://rankwise-test/team/blobs", "--blobs-endpoint", endpoint]
        srv = ServerProcess.db(db, tmp_path / "server.log", *where)
        with srv:
            report = sync(tmp_path / "data", srv.url, progress=False, token=srv.token)
            assert not report.failed and report.blob_bytes > 0
            assert_all_served(srv.url, run, srv.token)
            r = fetch(srv.url, "p", next(iter(run.blobs)), srv.token)
            assert r.headers["content-security-policy"].startswith("sandbox")
            assert fetch(srv.url, "p", sha(b"nothing"), srv.token).status_code == 404
            digest, data = next(iter(run.blobs.items()))
            r = httpx.get(f"{srv.url}/api/v1/blobs/p/{digest}",
                          headers={**srv.headers, "Range": "bytes=100-199"})  # fmt: skip
            assert r.status_code == 206 and r.content == data[100:200]
            again = sync(tmp_path / "data", srv.url, progress=False, token=srv.token)
            assert again.blob_bytes == 0
            # Tables on S3 are fetched once into a local content-addressed cache (DuckDB).
            from rankwise.store.blobs import FsspecBlobStore, fetch_local

            remote = FsspecBlobStore("s3://rankwise-test/team/blobs", endpoint)
            digest, data = next(iter(run.blobs.items()))
            local = fetch_local(remote, "p", digest, tmp_path / "cache")
            assert local is not None and local.read_bytes() == data
            assert fetch_local(remote, "p", digest, tmp_path / "cache") == local
        listed = s3.list_objects_v2(Bucket="rankwise-test", Prefix="team/blobs/p/")
        names = sorted(o["Key"].rsplit("/", 1)[1] for o in listed.get("Contents", []))
        assert names == sorted(run.blobs)  # namespaced by project under the prefix
        for digest, data in run.blobs.items():
            got = s3.get_object(Bucket="rankwise-test", Key=f"team/blobs/p/{digest[:2]}/{digest}")
            assert got["Body"].read() == data
        with open_store(db) as store:
            assert store.acked(key(run)) == run.last_seq


def test_postgres_server_with_a_local_blob_dir(tmp_path: Path) -> None:
    for dsn in postgres_dsn():
        run = blob_run(tmp_path / "data", "p", "r")
        blobs_dir = tmp_path / "pg-blobs"
        srv = ServerProcess.db(dsn, tmp_path / "server.log", "--blobs", str(blobs_dir))
        with srv:
            report = sync(tmp_path / "data", srv.url, progress=False, token=srv.token)
            assert not report.failed
            assert_all_served(srv.url, run, srv.token)
        assert sorted(p.name for p in stored_files(blobs_dir)) == sorted(run.blobs)
        with open_store(dsn) as store:
            assert store.acked(key(run)) == run.last_seq


def test_rankwise_ui_serves_blobs_from_the_run_folders(tmp_path: Path) -> None:
    run = blob_run(tmp_path / "data", "p", "r")
    srv = ServerProcess.ui(tmp_path / "data", tmp_path / "ui.log")
    with srv:
        for digest, data in run.blobs.items():
            r = httpx.get(f"{srv.url}/api/v1/blobs/p/{digest}")
            assert r.status_code == 200 and r.content == data
            assert r.headers["x-content-type-options"] == "nosniff"
        assert httpx.get(f"{srv.url}/api/v1/blobs/q/{digest}").status_code == 404
        r = httpx.put(f"{srv.url}/api/v1/blobs/p/{sha(b'x')}", content=b"x")
        assert r.status_code == 405  # read-only: it never writes into the run folders
    assert not (tmp_path / "data" / ".rankwise" / "blobs").exists()  # nothing copied


def test_a_409_missing_blobs_from_ingest_sends_them_and_resends(
    tmp_path: Path, server: dict[str, Any]
) -> None:
    """The server's own check at ingest: an uploader that believed the blobs were there
    (its blob store was replaced since it asked) is told which, sends them, resends."""
    from rankwise import _http
    from rankwise.sdk.uploader import StreamUpload

    run = blob_run(tmp_path / "data", "p", "r")
    with _http.make_client(server["url"]) as client:
        up = StreamUpload(client, run.stream, stream_ref(run.stream))
        up.blobs._known.update(run.blobs)  # as if `missing` had said the server holds them
        while up.pump():
            pass
        assert up.blobs.sent == len(run.blobs)
    assert server["store"].acked(key(run)) == run.last_seq
    assert_all_served(server["url"], run)


def test_a_blob_over_the_servers_cap_is_skipped_with_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = blob_run(tmp_path / "data", "p", "r", image_bytes=200_000)
    store = open_store(f"sqlite:///{tmp_path / 'server.db'}")
    store.migrate()
    blobs = LocalBlobStore(tmp_path / "server-blobs")
    settings = ServerSettings(static_dir=tmp_path / "none", blobs=blobs, max_blob_bytes=100_000)
    try:
        with serve_in_thread(create_app(store, settings)) as url:
            report = sync(tmp_path / "data", url, progress=False)
            assert not report.failed
            big = {d for d, b in run.blobs.items() if len(b) > 100_000}
            assert big and report.blobs_lost == len(big)
            assert store.acked(key(run)) == run.last_seq
            assert "cannot be uploaded" in capsys.readouterr().err
            for digest in run.blobs:
                r = fetch(url, "p", digest)
                assert r.status_code == (404 if digest in big else 200)
    finally:
        store.close()


@pytest.mark.slow
def test_server_workers_share_the_blob_store(tmp_path: Path) -> None:
    run = blob_run(tmp_path / "data", "p", "r")
    blobs_dir = tmp_path / "server-blobs"
    db = f"sqlite:///{tmp_path / 'server.db'}"
    srv = ServerProcess.db(db, tmp_path / "server.log", "--workers", "2", "--blobs",
                           str(blobs_dir), "--max-blob-mb", "1")  # fmt: skip
    with srv:
        report = sync(tmp_path / "data", srv.url, progress=False, token=srv.token)
        assert not report.failed and report.blob_bytes > 0
        assert_all_served(srv.url, run, srv.token)
        big = b"x" * (1024 * 1024 + 1)
        r = httpx.put(f"{srv.url}/api/v1/blobs/p/{sha(big)}", content=big, headers=srv.headers)
        assert r.status_code == 413  # --max-blob-mb reached the workers
    assert sorted(p.name for p in stored_files(blobs_dir)) == sorted(run.blobs)
