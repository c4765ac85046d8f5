"""The SDK in remote mode logging images and a table to a real uvicorn: every blob the
run wrote reaches the server's blob store before the records naming it, and a later
``rankwise sync`` of the same run sends 0 blob bytes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from rankwise.sdk.sync import sync
from rankwise.server import ServerSettings, create_app
from rankwise.server.blobs import LocalBlobStore
from rankwise.store import open_store
from rankwise.store.base import StreamKey

from .helpers.blobs import sha, stored_files
from .helpers.env import need
from .helpers.servers import bearer, serve_in_thread

np = need("numpy")
need("PIL.Image")
need("pyarrow")

import rankwise  # noqa: E402


@pytest.fixture
def server(tmp_path: Path) -> Iterator[dict[str, Any]]:
    store = open_store(f"sqlite:///{tmp_path / 'server.db'}")
    store.migrate()
    root = tmp_path / "server-blobs"
    app = create_app(
        store, ServerSettings(static_dir=tmp_path / "none", blobs=LocalBlobStore(root))
    )
    with serve_in_thread(app) as url:
        yield {"url": url, "store": store, "root": root, "token": app.state.test_admin_token}
    store.close()


def test_remote_run_uploads_every_blob_before_its_record(
    data_dir: Path, server: dict[str, Any]
) -> None:
    settings = {"flush_interval": 0.02, "upload_interval": 0.05, "upload_timeout": 30}
    run = rankwise.init(project="media", server=server["url"], settings=settings)
    rng = np.random.default_rng(0)
    for step in range(3):
        gallery = [rankwise.Image(rng.integers(0, 255, (16, 16, 3), dtype=np.uint8))
                   for _ in range(4)]  # fmt: skip
        run.log({"examples": gallery, "loss": 1.0 / (step + 1)}, step=step)
    table = rankwise.Table(columns=["id", "image", "score"])
    for i in range(5):
        table.add_data(i, rankwise.Image(rng.integers(0, 255, (8, 8), dtype=np.uint8)), i / 5)
    run.log({"predictions": table}, step=3)
    run.finish()
    run_dir = data_dir / "media" / run.id
    local = sorted(p.name for p in (run_dir / "blobs").rglob("*") if p.is_file()
                   and not p.name.startswith(".tmp-"))  # fmt: skip
    assert len(local) == 3 * 4 + 1 + 5
    assert sorted(p.name for p in stored_files(server["root"])) == local
    stream = StreamKey("media", run.id, "rank-0", 0)
    assert server["store"].acked(stream) >= 0
    for digest in local:
        r = httpx.get(f"{server['url']}/api/v1/blobs/media/{digest}",
                      headers=bearer(server["token"]))  # fmt: skip
        assert r.status_code == 200 and sha(r.content) == digest
    again = sync(data_dir, server["url"], progress=False)
    assert not again.failed and again.blob_bytes == 0 and again.uploaded_bytes == 0
