"""The blob store and the blob routes, against a real uvicorn with authentication on.

Upload order and exactly-once across uploaders, restarts and object stores are in
``test_blobs_upload.py``; this file checks each route's contract: idempotent verified
PUTs, the 400/413/422 refusals, project scoping (403), the served headers, and the
ingest check that refuses records whose blobs are not stored (409 ``missing_blobs``).
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from rankwise.server import ServerSettings, create_app
from rankwise.store import open_store
from rankwise.store.blobs import DigestMismatch, LocalBlobStore
from rankwise.stream import records as R
from rankwise.stream.identity import StreamId
from tests.helpers.blobs import sha, stored_files
from tests.helpers.servers import bearer, serve_in_thread
from tests.helpers.streams import body, start

LIMIT = 256 * 1024


@pytest.fixture
def server(tmp_path: Path) -> Iterator[dict[str, Any]]:
    store = open_store(f"sqlite:///{tmp_path / 'server.db'}")
    store.migrate()
    blobs = LocalBlobStore(tmp_path / "blobs")
    settings = ServerSettings(static_dir=tmp_path / "none", blobs=blobs, max_blob_bytes=LIMIT)
    app = create_app(store, settings)
    tokens = {
        "admin": store.create_token("admin", None, "t").value,
        "ingest_a": store.create_token("ingest", ["a"], "t").value,
        "read_a": store.create_token("read", ["a"], "t").value,
    }
    with serve_in_thread(app, token_env=False) as url:
        yield {"url": url, "store": store, "blobs": blobs, "root": tmp_path / "blobs", **tokens}
    store.close()


def put(srv: dict[str, Any], project: str, digest: str, data: Any, who: str = "ingest_a",
        **kw: Any) -> httpx.Response:  # fmt: skip
    url = f"{srv['url']}/api/v1/blobs/{project}/{digest}"
    headers = {**bearer(srv[who]), **kw.pop("headers", {})}
    return httpx.put(url, content=data, headers=headers, **kw)


def get(srv: dict[str, Any], project: str, digest: str, who: str = "read_a", **kw: Any):
    url = f"{srv['url']}/api/v1/blobs/{project}/{digest}"
    headers = {**bearer(srv[who]), **kw.pop("headers", {})}
    return httpx.get(url, headers=headers, **kw)


def test_local_store_is_verified_atomic_and_idempotent(tmp_path: Path) -> None:
    import io

    store = LocalBlobStore(tmp_path)
    data = b"x" * 3_000_000  # several chunks
    d = sha(data)
    assert store.missing("p", [d, d]) == [d]
    assert store.put("p", d, io.BytesIO(data)) is True
    assert store.put("p", d, io.BytesIO(data)) is False
    with pytest.raises(DigestMismatch):
        store.put("p", sha(b"other"), io.BytesIO(b"not other"))
    assert not store.has("p", sha(b"other")) and store.has("p", d) and not store.has("q", d)
    fileobj = store.open("p", d)
    assert fileobj is not None
    with fileobj:
        assert fileobj.read() == data
    # Eight writers of one digest at once: one file, whole, no temporaries left.
    e = sha(b"y" * 100_000)
    threads = [
        threading.Thread(target=store.put, args=("p", e, io.BytesIO(b"y" * 100_000)))
        for _ in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(p.name for p in stored_files(tmp_path)) == sorted([d, e])
    assert not [p for p in tmp_path.rglob(".tmp-*")]
    # A symlink planted where a blob would be is never followed.
    f = sha(b"secret")
    (tmp_path / "p" / f[:2]).mkdir()
    (tmp_path / "p" / f[:2] / f).symlink_to(tmp_path / "p" / d[:2] / d)
    assert store.open("p", f) is None and store.local_path("p", f) is None


def test_put_is_idempotent_and_get_serves_the_bytes(server: dict[str, Any]) -> None:
    data = b"\x89PNG" + bytes(range(256)) * 40
    d = sha(data)
    r = put(server, "a", d, data)
    assert r.status_code == 201 and r.json() == {"digest": d, "size": len(data), "stored": True}
    r = put(server, "a", d, data)
    assert r.status_code == 200 and r.json()["stored"] is False
    r = get(server, "a", d)
    assert r.status_code == 200 and r.content == data
    # No media row names it: bytes, a download, nothing the browser would run.
    assert r.headers["content-type"] == "application/octet-stream"
    assert r.headers["x-content-type-options"] == "nosniff"
    assert r.headers["content-security-policy"].startswith("sandbox; default-src 'none'")
    assert r.headers["content-disposition"].startswith("attachment")
    assert r.headers["content-length"] == str(len(data))
    assert "x-request-id" in r.headers  # the hardening layer still wraps it
    assert get(server, "a", sha(b"never")).status_code == 404
    ask = httpx.post(
        f"{server['url']}/api/v1/blobs/a/missing",
        json={"digests": [d, sha(b"never")]},
        headers=bearer(server["ingest_a"]),
    )
    assert ask.json() == {"missing": [sha(b"never")], "max_blob_bytes": LIMIT}


def test_get_serves_one_byte_range_for_seeking(server: dict[str, Any]) -> None:
    data = bytes(range(256)) * 900  # under the test cap (256 KiB)
    assert put(server, "a", sha(data), data).status_code == 201
    for header, want in (
        ("bytes=0-9", data[:10]),
        ("bytes=1000-", data[1000:]),
        ("bytes=-5", data[-5:]),
        ("bytes=5-99999999", data[5:]),
    ):
        r = get(server, "a", sha(data), headers={"Range": header})
        assert r.status_code == 206 and r.content == want, header
        assert r.headers["content-range"].endswith(f"/{len(data)}")
    assert get(server, "a", sha(data), headers={"Range": "bytes=9999999-"}).status_code == 416
    whole = get(server, "a", sha(data), headers={"Range": "bytes=0-1,5-6"})  # not understood
    assert whole.status_code == 200 and whole.content == data


def test_streamed_put_of_a_chunked_body(server: dict[str, Any]) -> None:
    data = bytes(range(256)) * 800  # 200 KiB, sent chunked (no Content-Length)
    r = put(server, "a", sha(data), iter([data[i : i + 7000] for i in range(0, len(data), 7000)]))
    assert r.status_code == 201, r.text
    assert get(server, "a", sha(data)).content == data


def test_mismatch_bad_digest_and_oversize_are_refused(server: dict[str, Any]) -> None:
    data = b"hello blob"
    r = put(server, "a", sha(b"something else"), data)
    assert r.status_code == 400 and "do not hash" in r.json()["error"]["message"]
    for bad in ("0" * 63, "A" * 64, "g" * 64, sha(data) + "0"):
        assert put(server, "a", bad, data).status_code in (400, 422), bad
        assert get(server, "a", bad).status_code in (400, 422), bad
    big = b"z" * (LIMIT + 1)
    r = put(server, "a", sha(big), big)
    assert r.status_code == 413 and "--max-blob-mb" in r.json()["error"]["message"]
    chunks = iter([big[i : i + 65536] for i in range(0, len(big), 65536)])
    r = put(server, "a", sha(big), chunks)  # chunked: cut off as it streams past the cap
    assert r.status_code == 413
    assert stored_files(server["root"]) == []
    assert not list(server["root"].rglob(".tmp-*"))


def test_a_project_token_cannot_reach_another_projects_blobs(server: dict[str, Any]) -> None:
    data = b"b's picture"
    d = sha(data)
    assert put(server, "b", d, data, who="admin").status_code == 201
    assert put(server, "b", d, data).status_code == 403  # ingest token of project a
    assert get(server, "b", d).status_code == 403  # read token of project a
    assert get(server, "b", sha(b"none")).status_code == 403  # exists or not: same answer
    ask = httpx.post(
        f"{server['url']}/api/v1/blobs/b/missing",
        json={"digests": [d]},
        headers=bearer(server["ingest_a"]),
    )
    assert ask.status_code == 403
    # Roles: an ingest token reads nothing, a read token uploads nothing.
    assert put(server, "a", d, data, who="read_a").status_code == 403
    assert put(server, "a", d, data).status_code == 201
    assert get(server, "a", d, who="ingest_a").status_code == 403
    assert httpx.get(f"{server['url']}/api/v1/blobs/a/{d}").status_code == 401
    # Namespaced: a's copy and b's copy are two files.
    assert len(stored_files(server["root"])) == 2


def test_served_content_type_comes_from_the_store_never_the_client(
    server: dict[str, Any],
) -> None:
    page = b"<html><script>alert(1)</script></html>"
    png = b"\x89PNG\r\n\x1a\n" + b"\0" * 20
    for data in (page, png):
        assert put(server, "a", sha(data), data, headers={"Content-Type": "text/html"}).is_success
    kinds = {sha(page): ("html", "html"), sha(png): ("image", "png")}
    # The hook the media rows fill: the store's blob_media(project, digest).
    server["store"].blob_media = lambda project, digest: kinds.get(digest)
    r = get(server, "a", sha(page))
    assert r.headers["content-type"].startswith("text/html")
    assert r.headers["content-disposition"].startswith("attachment")
    assert r.headers["content-security-policy"].startswith("sandbox")
    r = get(server, "a", sha(page), params={"inline": "1"})
    assert "content-disposition" not in r.headers
    assert r.headers["content-security-policy"].startswith("sandbox; default-src 'none'")
    assert r.headers["x-frame-options"] == "SAMEORIGIN"
    r = get(server, "a", sha(png))
    assert r.headers["content-type"] == "image/png" and "content-disposition" not in r.headers
    assert r.headers["x-content-type-options"] == "nosniff"


def _media_body(digests: list[str], first: int = 0) -> bytes:
    recs: list[R.AnyRecord] = [start("a", "r", "rank-0")] if first == 0 else []
    items = [R.MediaItem("image", d, 10, "png") for d in digests]
    recs.append(R.Media(first + len(recs), 1001.0, 0, "examples", items))
    return body(recs)


def test_ingest_refuses_records_whose_blobs_are_not_stored(server: dict[str, Any]) -> None:
    data = [b"one", b"two"]
    digests = [sha(x) for x in data]
    params = {"project": "a", "run": "r", "label": "rank-0", "incarnation": "0"}
    headers = {**bearer(server["ingest_a"]), "Content-Type": "application/x-rankwise-stream"}

    def ingest() -> httpx.Response:
        url = f"{server['url']}/api/v1/ingest"
        return httpx.post(url, params=params, content=_media_body(digests), headers=headers)

    put(server, "a", digests[0], data[0])
    r = ingest()
    assert r.status_code == 409
    assert r.json()["error"]["missing_blobs"] == [digests[1]]
    assert server["store"].acked(_key()) == -1  # nothing of it applied
    put(server, "a", digests[1], data[1])
    r = ingest()
    assert r.status_code == 200 and r.json() == {"acked_seq": 1}
    # A blob its uploader declared lost no longer holds records back (and stays 404).
    gone = hashlib.sha256(b"deleted by the user").hexdigest()
    lost = httpx.post(
        f"{server['url']}/api/v1/blobs/a/lost", json={"digests": [gone]}, headers=headers
    )
    assert lost.json() == {"lost": [gone]}
    recs: list[R.AnyRecord] = [
        R.Media(2, 1002.0, 1, "examples", [R.MediaItem("image", gone, 1, "png")])
    ]
    url = f"{server['url']}/api/v1/ingest"
    assert httpx.post(url, params=params, content=body(recs), headers=headers).status_code == 200
    assert get(server, "a", gone).status_code == 404


def _key() -> StreamId:
    return StreamId("a", "r", "rank-0", 0)
