"""The artifact server, for real: uvicorn, SQLite and PostgreSQL, a local blob directory
and moto's S3 server, driven over HTTP by ``RemoteArtifacts`` and raw requests.

Files are cut into 1 MiB chunks here (the manifest says how a file is chunked; the server
only concatenates chunks), so multi-chunk files stay small and quick.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import os
import pickle
import shutil
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from rankwise.artifacts.manifest import CHUNK_BYTES, Entry, Manifest, hash_file
from rankwise.artifacts.remote import RemoteArtifacts
from rankwise.errors import ArtifactNotFoundError, ServerError, UsageError
from rankwise.server import ServerSettings, create_app
from rankwise.store.blobs import BlobStore, FsspecBlobStore, LocalBlobStore
from rankwise.store.sql import SQLStore
from rankwise.wire.artifacts import CommitRequest
from tests.helpers.blobs import moto_s3
from tests.helpers.servers import (
    REPO,
    ServerProcess,
    bearer,
    postgres_dsn,
    serve_in_thread,
    subprocess_env,
)
from tests.helpers.stores import open_sql_store
from tests.helpers.wait import wait_until

MiB = 1024 * 1024
CHUNK = MiB


class Crash(BaseException):
    """The client process dying mid-upload (not an error anything retries)."""


class Counter:
    """ASGI wrapper counting the chunk PUTs a server received; ``fail_puts`` answers the
    next n PUTs with 503 (a server hiccup the client must retry through)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.state = app.state
        self.puts: list[str] = []
        self.fail_puts = 0
        self.delay = 0.0  # seconds each PUT waits before it is handled
        self.inflight = 0  # PUTs being handled (one may finish after its client died)
        self._lock = threading.Lock()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "PUT":
            with self._lock:
                self.puts.append(scope["path"].rsplit("/", 1)[-1])
                fail, self.fail_puts = self.fail_puts > 0, max(0, self.fail_puts - 1)
            if fail:
                await send({"type": "http.response.start", "status": 503, "headers": []})
                await send({"type": "http.response.body", "body": b""})
                return
            with self._lock:
                self.inflight += 1
            try:
                if self.delay:
                    await asyncio.sleep(self.delay)
                await self.app(scope, receive, send)
            finally:
                with self._lock:
                    self.inflight -= 1
            return
        await self.app(scope, receive, send)


@dataclass
class Srv:
    url: str
    store: SQLStore
    blobs: BlobStore
    counter: Counter
    tokens: dict[str, str] = field(default_factory=dict)

    def client(self, who: str = "ingest", project: str = "p", **kw: Any) -> RemoteArtifacts:
        return RemoteArtifacts(self.url, project, self.tokens[who], backoff=0.01, **kw)

    def req(self, method: str, path: str, who: str = "admin", **kw: Any) -> httpx.Response:
        headers = bearer(self.tokens[who]) if who else {}
        return httpx.request(method, self.url + path, headers=headers, timeout=30, **kw)


@pytest.fixture(params=["sqlite-local", "postgres-s3"])
def srv(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Srv]:
    kind, where = request.param.split("-")
    yield from _serve(kind, where, tmp_path, request, monkeypatch)


@pytest.fixture
def local_srv(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Srv]:
    yield from _serve("sqlite", "local", tmp_path, request, monkeypatch)


def _serve(
    kind: str,
    where: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    **settings: Any,
) -> Iterator[Srv]:
    store = open_sql_store(kind, tmp_path, request)
    store.migrate()
    try:
        if where == "local":
            yield from _with_blobs(store, LocalBlobStore(tmp_path / "blobs"), tmp_path, settings)
            return
        with moto_s3(monkeypatch) as endpoint:
            import boto3  # type: ignore[import-untyped]

            s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
            s3.create_bucket(Bucket="rankwise-art")
            blobs = FsspecBlobStore("s3://rankwise-art/team/blobs", endpoint)
            yield from _with_blobs(store, blobs, tmp_path, settings)
    finally:
        store.close()


def _with_blobs(
    store: SQLStore, blobs: BlobStore, tmp_path: Path, settings: dict[str, Any]
) -> Iterator[Srv]:
    conf = ServerSettings(
        static_dir=tmp_path / "no-static", blobs=blobs, token_cache_ttl=0, **settings
    )
    counter = Counter(create_app(store, conf))
    tokens = {
        "admin": store.create_token("admin", None, "t").value,
        "ingest": store.create_token("ingest", ["p"], "ranks").value,
        "read": store.create_token("read", ["p"], "dash").value,
        "ingest_q": store.create_token("ingest", ["q"], "other").value,
    }
    with serve_in_thread(counter, token_env=False) as url:
        yield Srv(url, store, blobs, counter, tokens)


# -- staging, as the SDK's local store keeps files: <root>/<sha[:2]>/<sha> ---------------


def stage(root: Path, path: str, data: bytes) -> Entry:
    src = root / "src" / uuid.uuid4().hex
    src.parent.mkdir(parents=True, exist_ok=True)
    src.write_bytes(data)
    entry = hash_file(src, CHUNK)
    entry.path = path
    dest = root / "files" / entry.digest[:2] / entry.digest
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(src, dest)
    return entry


def commit_req(*entries: Entry, **kw: Any) -> CommitRequest:
    kw.setdefault("client_id", uuid.uuid4().hex)
    kw.setdefault("type", "model")
    return CommitRequest(manifest=Manifest(entries=sorted(entries, key=lambda e: e.path)), **kw)


def raw_commit(path: str, paths: list[str], data: bytes = b"x") -> dict[str, Any]:
    d = hashlib.sha256(data).hexdigest()
    entries = [
        {"path": p, "digest": d, "size": len(data), "chunks": [[d, len(data)]]} for p in paths
    ]
    return {"type": "model", "client_id": uuid.uuid4().hex, "manifest": {"entries": entries}}


# -- the round trip ---------------------------------------------------------------------


def test_publish_a_multi_chunk_file_and_read_it_back(srv: Srv, tmp_path: Path) -> None:
    big = os.urandom(3 * CHUNK + 12345)
    model = stage(tmp_path, "weights/model.bin", big)
    notes = stage(tmp_path, "notes.txt", b"accuracy 0.98\n")
    ref = Entry(path="data/train.csv", ref="s3://bucket/train.csv")
    assert len(model.chunks) == 4
    req = commit_req(model, notes, ref, aliases=["best"], run_id="r1", label="rank-0",
                     metadata={"acc": 0.98}, description="trained")  # fmt: skip
    with srv.client() as c:
        info = c.publish("mnist", req, tmp_path / "files")
        assert (info.version, info.aliases) == ("v0", ["latest", "best"])
        assert info.size == len(big) + 14 and info.file_count == 3
        assert c.sent_chunks == 5 and c.sent_bytes == len(big) + 14
        assert sorted(srv.counter.puts) == sorted({ch.digest for ch in model.chunks + notes.chunks})
        # An ingest token fetches what it uses: lineage, then the bytes (digest known).
        used = c.use("mnist", "best", run_id="r2", label="rank-1")
        assert used.manifest is not None and [e.path for e in used.manifest.entries] == [
            "data/train.csv",
            "notes.txt",
            "weights/model.bin",
        ]
        got = c.download_file("mnist", "v0", model.path, tmp_path / "out" / "m.bin", model.digest)
        assert got.read_bytes() == big
        with pytest.raises(ServerError, match="refused"):
            c.get("mnist")  # an ingest token reads nothing but files
    with srv.client("read") as reader:
        got = reader.download_file("mnist", "latest", "notes.txt", tmp_path / "out" / "n.txt")
        assert got.read_bytes() == b"accuracy 0.98\n"
        one = reader.get("mnist", "v0")
        assert one.metadata == {"acc": 0.98} and one.description == "trained"
        assert [(u.run_id, u.label) for u in one.used_by] == [("r2", "rank-1")]
        assert [s.name for s in reader.list(type="model")] == ["mnist"] and not reader.list("data")
        runs = reader.run_artifacts("r2")
        assert [v.version for v in runs.used] == ["v0"] and not runs.logged
        assert [v.version for v in reader.run_artifacts("r1").logged] == ["v0"]
        with pytest.raises(ArtifactNotFoundError):
            reader.get("mnist", "v9")
    r = srv.req("GET", "/api/v1/artifacts/p/mnist/v0/files/weights/model.bin", "read")
    assert r.status_code == 200 and r.content == big
    assert r.headers["etag"] == f'"{model.digest}"'
    assert r.headers["content-length"] == str(len(big))


def test_identical_content_makes_no_version_and_sends_nothing(srv: Srv, tmp_path: Path) -> None:
    a = stage(tmp_path, "m.bin", os.urandom(2 * CHUNK))
    with srv.client() as c:
        assert c.publish("m", commit_req(a), tmp_path / "files").version == "v0"
        sent = c.sent_bytes
        again = c.publish("m", commit_req(a, aliases=["prod"]), tmp_path / "files")
        assert again.version == "v0" and c.sent_bytes == sent  # 0 bytes, no new version
        assert again.aliases == ["latest", "prod"]  # the aliases moved onto the latest
        b = stage(tmp_path, "m.bin", os.urandom(100))
        assert c.publish("m", commit_req(b), tmp_path / "files").version == "v1"
        # Back to the first content: not the latest's, so a new version.
        assert c.publish("m", commit_req(a), tmp_path / "files").version == "v2"
    assert len(srv.counter.puts) == 3


def test_aliases_move_and_latest_is_always_the_newest(srv: Srv, tmp_path: Path) -> None:
    with srv.client() as c:
        for i, aliases in enumerate((["best", "candidate"], [], ["best"])):
            e = stage(tmp_path, "m.bin", f"v{i}".encode())
            info = c.publish("m", commit_req(e, aliases=aliases), tmp_path / "files")
            assert info.version == f"v{i}"
    with srv.client("read") as reader:
        versions = {v.version: v.aliases for v in reader.versions("m")}
        assert versions == {"v2": ["latest", "best"], "v1": [], "v0": ["candidate"]}
        assert list(versions) == ["v2", "v1", "v0"]  # newest first
        assert reader.get("m", "candidate").version == "v0"
    e = stage(tmp_path, "m.bin", b"another")
    with srv.client() as c:
        for bad in ("v3", "a b", "../x"):
            with pytest.raises(UsageError):
                c.publish("m", commit_req(e, aliases=[bad]), tmp_path / "files")
    assert len(srv.store.artifact_versions("p", "m") or []) == 3  # the refusals stored nothing


def test_client_id_makes_a_retried_commit_return_the_first_version(
    srv: Srv, tmp_path: Path
) -> None:
    e = stage(tmp_path, "m.bin", b"weights")
    req = commit_req(e)
    body = msgspec.json.encode(req)
    with srv.client() as c:
        c.publish("m", req, tmp_path / "files")
        c.publish("m", commit_req(stage(tmp_path, "m.bin", b"newer")), tmp_path / "files")
    r = srv.req("POST", "/api/v1/artifacts/p/m/versions", "ingest", content=body)
    assert r.status_code == 200 and r.json()["version"] == "v0"  # not a new v2
    r = srv.req("POST", "/api/v1/artifacts/p/other/versions", "ingest", content=body)
    assert r.status_code == 409 and "client_id" in r.json()["error"]["message"]
    r = srv.req("POST", "/api/v1/artifacts/p/m/versions", "ingest",
                content=msgspec.json.encode(commit_req(e, type="dataset")))  # fmt: skip
    assert r.status_code == 409 and "type 'model'" in r.json()["error"]["message"]
    assert len(srv.store.artifact_versions("p", "m") or []) == 2


def test_a_synced_local_version_keeps_its_number_when_free(srv: Srv, tmp_path: Path) -> None:
    with srv.client() as c:

        def put(data: bytes, version: str | None = None) -> str:
            e = stage(tmp_path, "m.bin", data)
            return c.publish("m", commit_req(e, version=version), tmp_path / "files").version

        assert put(b"a", "v5") == "v5"  # free: kept
        assert put(b"b") == "v6"  # the next after the newest
        assert put(b"c", "v5") == "v7"  # taken: the server assigns the next
        assert put(b"d", "v2") == "v2"  # free, below the newest: kept, latest stays v7
    with srv.client("read") as reader:
        assert reader.get("m").version == "v7"
        assert [v.version for v in reader.versions("m")] == ["v7", "v6", "v5", "v2"]


def test_a_download_that_does_not_match_its_digest_writes_nothing(
    local_srv: Srv, tmp_path: Path
) -> None:
    e = stage(tmp_path, "m.bin", b"the real weights")
    dest = tmp_path / "out" / "m.bin"
    with local_srv.client() as c:
        c.publish("m", commit_req(e), tmp_path / "files")
        with pytest.raises(ServerError, match="sha256"):
            c.download_file("m", "v0", "m.bin", dest, digest="0" * 64)
        assert not dest.exists() and list(dest.parent.iterdir()) == []  # no partial file
        with pytest.raises(ArtifactNotFoundError):
            c.download_file("m", "v0", "other.bin", dest, digest="0" * 64)
        assert c.download_file("m", "latest", "m.bin", dest, e.digest).read_bytes() == (
            b"the real weights"
        )


# -- resumable uploads ------------------------------------------------------------------


def test_commit_without_its_chunks_is_409_listing_them_and_creates_nothing(
    srv: Srv, tmp_path: Path
) -> None:
    # 64 random bytes in the tail chunk: a 1-byte one can match a blob a test before stored
    e = stage(tmp_path, "m.bin", os.urandom(2 * CHUNK + 64))
    body = msgspec.json.encode(commit_req(e))
    r = srv.req("POST", "/api/v1/artifacts/p/m/versions", "ingest", content=body)
    assert r.status_code == 409, r.text
    assert r.json()["error"]["missing"] == [c.digest for c in e.chunks], r.text
    assert srv.store.artifact_versions("p", "m") is None


def test_a_crash_mid_upload_then_publish_again_sends_only_the_missing_chunks(
    srv: Srv, tmp_path: Path
) -> None:
    e = stage(tmp_path, "big.bin", os.urandom(6 * CHUNK))
    req = commit_req(e)
    puts = 0

    def die_after_two(response: httpx.Response) -> None:
        nonlocal puts
        if response.request.method == "PUT":
            puts += 1
            if puts == 2:
                raise Crash

    crashing = srv.client(parallel=1)
    crashing.client.event_hooks["response"] = [die_after_two]
    with pytest.raises(Crash):
        crashing.publish("big", req, tmp_path / "files")
    crashing.close()
    assert len(srv.counter.puts) == 2 and srv.store.artifact_versions("p", "big") is None
    srv.counter.puts.clear()
    srv.counter.fail_puts = 1  # and the server hiccups once on the resumed upload
    with srv.client() as c:
        info = c.publish("big", req, tmp_path / "files")
        assert info.version == "v0" and c.sent_chunks == 4
    assert len(srv.counter.puts) == 5  # the 4 missing chunks, one of them twice (503, retry)
    assert set(srv.counter.puts) == {ch.digest for ch in e.chunks[2:]}
    got = srv.req("GET", "/api/v1/artifacts/p/big/v0/files/big.bin", "read")
    assert hashlib.sha256(got.content).hexdigest() == e.digest


PUBLISH = """
import sys
from pathlib import Path
import msgspec
from rankwise.wire.artifacts import CommitRequest
from rankwise.artifacts.remote import RemoteArtifacts
url, token, body, root = sys.argv[1:]
req = msgspec.json.decode(Path(body).read_bytes(), type=CommitRequest)
RemoteArtifacts(url, "p", token, parallel=1).publish("big", req, Path(root))
"""


def test_a_publisher_sigkilled_mid_upload_is_resumed_by_the_next(
    local_srv: Srv, tmp_path: Path
) -> None:
    s = local_srv
    e = stage(tmp_path, "big.bin", os.urandom(12 * CHUNK))
    req = commit_req(e)
    body = tmp_path / "commit.json"
    body.write_bytes(msgspec.json.encode(req))
    s.counter.delay = 0.15  # each chunk takes a while: the kill lands mid-upload
    args = [s.url, s.tokens["ingest"], str(body), str(tmp_path / "files")]
    proc = subprocess.Popen([sys.executable, "-c", PUBLISH, *args], env=subprocess_env(), cwd=REPO)
    try:
        wait_until(lambda: len(s.counter.puts) >= 4, timeout=60)
    finally:
        proc.kill()  # SIGKILL: no cleanup runs in the publisher
        proc.wait(10)
    s.counter.delay = 0.0
    # A chunk whose body had all arrived may still be stored after its client died: what
    # the killed publisher stored is known once the server has handled all its PUTs.
    wait_until(lambda: s.counter.inflight == 0, timeout=30)
    digests = [c.digest for c in e.chunks]
    left = s.blobs.missing("p", digests)
    assert 0 < len(left) < len(digests) and s.store.artifact_versions("p", "big") is None
    s.counter.puts.clear()
    with s.client() as c:
        assert c.publish("big", req, tmp_path / "files").version == "v0"
    assert sorted(s.counter.puts) == sorted(left)  # only what the killed one had not stored
    got = s.req("GET", "/api/v1/artifacts/p/big/v0/files/big.bin", "read")
    assert hashlib.sha256(got.content).hexdigest() == e.digest
    # The cut-off chunk's temporary file was dropped, never renamed into place.
    wait_until(lambda: not list((tmp_path / "blobs").rglob(".tmp-*")), timeout=10)


def test_server_blob_limit_fits_a_chunk_and_a_smaller_one_is_named(
    tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert ServerSettings().max_blob_bytes >= CHUNK_BYTES
    for s in _serve("sqlite", "local", tmp_path, request, monkeypatch, max_blob_bytes=CHUNK // 2):
        e = stage(tmp_path, "m.bin", os.urandom(CHUNK))
        with s.client() as c, pytest.raises(UsageError, match="--max-blob-mb"):
            c.publish("m", commit_req(e), tmp_path / "files")
        assert s.counter.puts == []


def test_a_server_whose_blob_limit_is_below_a_chunk_says_so_at_start(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    with ServerProcess.db(f"sqlite:///{tmp_path / 'db.sqlite'}", log, "--max-blob-mb", "8"):
        pass
    assert "--max-blob-mb 8 is below the 32 MiB chunks" in log.read_text()


# -- concurrency ------------------------------------------------------------------------


def _publish_many(url: str, token: str, root: Path, tag: str, n: int, out: list[str]) -> None:
    with RemoteArtifacts(url, "p", token, backoff=0.01) as c:
        for i in range(n):
            e = stage(root, f"{tag}.bin", f"{tag}-{i}-{uuid.uuid4()}".encode())
            out.append(c.publish("shared", commit_req(e, aliases=[tag]), root / "files").version)


def _race(jobs: list[tuple[str, str, str]], root: Path, n: int) -> list[str]:
    out: list[str] = []
    errors: list[BaseException] = []

    def one(url: str, token: str, tag: str) -> None:
        try:
            _publish_many(url, token, root / tag, tag, n, out)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=one, args=job) for job in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return out


def test_concurrent_commits_from_threads_get_distinct_versions(srv: Srv, tmp_path: Path) -> None:
    tags = [f"rank{i}" for i in range(6)]
    got = _race([(srv.url, srv.tokens["ingest"], t) for t in tags], tmp_path, 5)
    assert sorted(got, key=lambda v: int(v[1:])) == [f"v{i}" for i in range(30)]
    versions = srv.store.artifact_versions("p", "shared")
    assert versions is not None and len(versions) == 30
    assert versions[0].aliases[0] == "latest" and versions[0].version == "v29"
    # Each rank's alias is on that rank's last version.
    for tag in tags:
        last = srv.store.artifact_version("p", "shared", tag)
        assert last is not None and last.manifest is not None
        assert last.manifest.entries[0].path == f"{tag}.bin"


@pytest.fixture
def pg() -> Iterator[str]:
    yield from postgres_dsn()


@pytest.mark.slow
def test_two_server_processes_on_one_postgres_assign_distinct_versions(
    tmp_path: Path, pg: str
) -> None:
    blobs = ["--blobs", str(tmp_path / "shared-blobs")]
    a = ServerProcess.db(pg, tmp_path / "a.log", *blobs).start()
    b = ServerProcess.db(pg, tmp_path / "b.log", *blobs).start()
    try:
        assert a.token and b.token
        jobs = [(s.url, s.token, f"{n}{i}") for n, s in (("a", a), ("b", b)) for i in range(3)]
        got = _race(jobs, tmp_path, 6)
        assert sorted(got, key=lambda v: int(v[1:])) == [f"v{i}" for i in range(36)]
        r = b.get("/api/v1/artifacts/p/shared")
        newest_first = [v["version"] for v in r.json()["versions"]]
        assert newest_first == [f"v{i}" for i in range(35, -1, -1)]
    finally:
        a.stop()
        b.stop()


# -- attacks (docs/security.md §6) ------------------------------------------------------

TRAVERSAL = [  # row 10, and row 11 once decoded
    "../x", "a/../../x", "./a", "a//b", "/etc/passwd", "C:\\x", "..\\x", "a\\..\\x",
    "file:///etc/passwd", "//proc/self/root", "..%2f..%2fx", "%2e%2e/x", "%252e%252e%252f",
    "a%23/../x", "a;/../x", "a%00.png", "a\x00.png", "a\u202e.png", "a\x1b[31m", "a/", "",
]  # fmt: skip


def test_row10_11_a_bad_file_path_is_refused_naming_it_and_nothing_is_stored(
    local_srv: Srv,
) -> None:
    s = local_srv
    s.blobs.put("p", hashlib.sha256(b"x").hexdigest(), io.BytesIO(b"x"))
    for bad in TRAVERSAL:
        r = s.req(
            "POST",
            "/api/v1/artifacts/p/m/versions",
            "ingest",
            json=raw_commit("m", ["ok.txt", bad]),
        )
        assert r.status_code == 422, (bad, r.text)
        message = r.json()["error"]["message"]
        assert "artifact file name" in message, bad
        assert s.store.artifact_versions("p", "m") is None and s.store.artifact_names("p") == []


@pytest.mark.parametrize(
    ("paths", "why"),
    [
        (["a.txt", "a.txt"], "appears twice"),
        (["a", "a/b"], "both a file and a directory"),  # rows 13, 14: no path through a file
    ],
)
def test_row13_14_duplicates_and_files_under_files_are_refused(
    local_srv: Srv, paths: list[str], why: str
) -> None:
    r = local_srv.req(
        "POST", "/api/v1/artifacts/p/m/versions", "ingest", json=raw_commit("m", paths)
    )
    assert r.status_code == 422 and why in r.json()["error"]["message"]
    assert paths[-1] in r.json()["error"]["message"]
    assert local_srv.store.artifact_names("p") == []


def test_row12_bad_artifact_names_are_400_before_anything(local_srv: Srv) -> None:
    for url in (
        "/api/v1/artifacts/p/..%2fx/versions",
        "/api/v1/artifacts/p/%2e%2e/versions",
        "/api/v1/artifacts/p/a%252e%252e/versions",
        "/api/v1/artifacts/p/CON/versions",
        "/api/v1/artifacts/p/my%20model/versions",
        "/api/v1/artifacts/..%2fp/m/versions",
        "/api/v1/artifacts/p/m/..%2f..%2fx/files/a",
    ):
        r = local_srv.req("POST", url, "admin", json=raw_commit("m", ["a"]))
        assert r.status_code == 400, (url, r.text)
    assert local_srv.store.projects() == [] and local_srv.store.artifact_names("p") == []


def test_row21_22_active_content_and_pickles_are_bytes_attachments(
    local_srv: Srv, tmp_path: Path
) -> None:
    marker = tmp_path / "unpickled"

    class Evil:
        def __reduce__(self) -> Any:
            return (os.mkdir, (str(marker),))

    files = {
        "evil.html": b"<script>alert(1)</script>",
        "evil.svg": b'<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"/>',
        "x.png": b"<html><script>alert(1)</script></html>",
        "model.pkl": pickle.dumps(Evil()),
        "config.yaml": b"!!python/object/apply:os.system ['touch /tmp/pwned']\n{{7*7}}",
        'na\u00efve "q".txt': b"text",
    }
    entries = [stage(tmp_path, name, data) for name, data in files.items()]
    with local_srv.client() as c:
        c.publish("evil", commit_req(*entries), tmp_path / "files")
    for name, data in files.items():
        r = local_srv.req("GET", "/api/v1/artifacts/p/evil/v0/files/" + _quote(name), "read")
        assert r.status_code == 200 and r.content == data, name
        assert r.headers["content-type"] == "application/octet-stream"
        assert r.headers["content-disposition"].startswith("attachment; filename=")
        assert (
            "filename*=UTF-8''" + _quote(name.rsplit("/", 1)[-1], "")
            in r.headers["content-disposition"]
        )
        assert r.headers["x-content-type-options"] == "nosniff"
        assert r.headers["content-security-policy"] == "sandbox; default-src 'none'"
    assert not marker.exists() and not Path("/tmp/pwned").exists()


def _quote(name: str, safe: str = "/") -> str:
    from urllib.parse import quote

    return quote(name, safe=safe)


def test_row27_28_references_are_strings_never_fetched_and_never_served(
    local_srv: Srv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    refs = [
        "file:///etc/passwd",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::ffff:a9fe:a9fe]/",
        "http://2130706433/",
        "http://127.0.0.1:6379/",
        "https://example.com/302-to-metadata",
        "file:////proc/self/root",
    ]
    entries = [Entry(path=f"ref{i}", ref=u) for i, u in enumerate(refs)]
    port = int(local_srv.url.rsplit(":", 1)[1])
    connects: list[Any] = []
    real = socket.socket.connect

    def spy(self: socket.socket, address: Any) -> Any:
        connects.append(address)
        return real(self, address)

    monkeypatch.setattr(socket.socket, "connect", spy)
    with local_srv.client() as c:
        info = c.publish("refs", commit_req(*entries), tmp_path / "files")
        assert info.size == 0 and info.file_count == len(refs)
        got = c.use("refs", "latest", run_id="r")
        assert got.manifest is not None and [e.ref for e in got.manifest.entries] == refs
    for i in range(len(refs)):
        r = local_srv.req("GET", f"/api/v1/artifacts/p/refs/v0/files/ref{i}", "read")
        assert r.status_code == 404 and "reference" in r.json()["error"]["message"]
    for path in ("etc/passwd", "..%2f..%2fetc/passwd", "%2e%2e/%2e%2e/etc/passwd",
                 "%252e%252e%252fetc/passwd", "proc/self/root/etc/passwd"):  # fmt: skip
        r = local_srv.req("GET", f"/api/v1/artifacts/p/refs/v0/files/{path}", "read")
        assert r.status_code in (400, 404) and "root:" not in r.text
    assert connects and {a[1] for a in connects} == {port}, connects  # only the test's own
    r = local_srv.req("POST", "/api/v1/artifacts/p/refs/versions", "ingest",
                      json={**raw_commit("refs", []), "manifest": {"entries": [
                          {"path": "x", "ref": "gopher://127.0.0.1:70/"}]}})  # fmt: skip
    assert r.status_code == 422 and "scheme" in r.json()["error"]["message"]


# -- authentication ---------------------------------------------------------------------


def test_auth_no_token_401_other_project_403_read_token_cannot_commit(
    local_srv: Srv, tmp_path: Path
) -> None:
    s = local_srv
    e = stage(tmp_path, "m.bin", b"weights")
    with s.client() as c:
        c.publish("m", commit_req(e), tmp_path / "files")
    body = raw_commit("m", ["a"])
    use = {"run_id": "r", "ref": "latest"}
    file = "/api/v1/artifacts/p/m/v0/files/m.bin"
    for who, status in (("", 401), ("ingest_q", 403), ("read", 403)):
        assert s.req("POST", "/api/v1/artifacts/p/m/versions", who, json=body).status_code == status
        assert s.req("POST", "/api/v1/artifacts/p/m/use", who, json=use).status_code == status
    for who, status in (("", 401), ("ingest_q", 403), ("ingest", 403)):
        for path in ("/api/v1/artifacts/p", "/api/v1/artifacts/p/m", "/api/v1/artifacts/p/m/v0",
                     "/api/v1/runs/p/r/artifacts"):  # fmt: skip
            assert s.req("GET", path, who).status_code == status, (who, path)
    r = s.req("GET", file, "")
    assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Bearer")
    assert s.req("GET", file, "ingest_q").status_code == 403
    for who in ("ingest", "read", "admin"):  # the download policy: read, or ingest of p
        assert s.req("GET", file, who).content == b"weights"
    versions = s.store.artifact_versions("p", "m")
    assert versions is not None and len(versions) == 1  # no refused request wrote anything
