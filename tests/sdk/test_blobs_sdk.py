"""The SDK in remote mode logging images and a table to a real uvicorn: every blob the
run wrote reaches the server's blob store before the records naming it, and a later
``rankwise sync`` of the same run sends 0 blob bytes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from rankwise.sdk.sync import sync
from rankwise.store import open_store
from rankwise.stream.identity import StreamId
from tests.helpers.blobs import sha, stored_files
from tests.helpers.env import need
from tests.helpers.servers import AppServer, bearer

np = need("numpy")
need("PIL.Image")
need("pyarrow")

import rankwise  # noqa: E402


@pytest.fixture
def server(app_server: AppServer) -> dict[str, Any]:
    s = app_server
    return {"url": s.url, "store": s.store, "root": s.root, "token": s.token}


def test_remote_run_uploads_every_blob_before_its_record(
    data_dir: Path, server: dict[str, Any]
) -> None:
    # save_code off: the count below is the run's media blobs, with no diff of whatever
    # repository the tests run in (docs/what-ran.md).
    settings = {"flush_interval": 0.02, "upload_interval": 0.05, "upload_timeout": 30,
                "save_code": False}  # fmt: skip
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
    stream = StreamId("media", run.id, "rank-0", 0)
    assert server["store"].acked(stream) >= 0
    for digest in local:
        r = httpx.get(f"{server['url']}/api/v1/blobs/media/{digest}",
                      headers=bearer(server["token"]))  # fmt: skip
        assert r.status_code == 200 and sha(r.content) == digest
    again = sync(data_dir, server["url"], progress=False)
    assert not again.failed and again.blob_bytes == 0 and again.uploaded_bytes == 0


@pytest.mark.torchrun
def test_torchrun_shared_run_uploads_each_ranks_blobs_once(tmp_path: Path) -> None:
    """Three ranks of one shared run, each uploading live, share the run's blob folder
    (and some contents): the server ends with every blob once and every record."""
    import subprocess
    import sys

    from tests.helpers.env import clean_env
    from tests.helpers.servers import ServerProcess

    script = Path(__file__).parents[1] / "scripts" / "media_job.py"
    blobs_dir = tmp_path / "server-blobs"
    db = f"sqlite:///{tmp_path / 'server.db'}"
    srv = ServerProcess.db(db, tmp_path / "server.log", "--blobs", str(blobs_dir))
    data = tmp_path / "data"
    with srv:
        env = clean_env(
            RANKWISE_DIR=str(data), RANKWISE_RUN_ID="mr", RANKWISE_SERVER=srv.url,
            RANKWISE_TOKEN=srv.token or "", RANKWISE_FLUSH_INTERVAL="0.05",
            RANKWISE_UPLOAD_INTERVAL="0.1", RANKWISE_SYSTEM="0", RANKWISE_CONSOLE="off",
        )  # fmt: skip
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               "--nproc-per-node=3", str(script), "--torch", "--steps", "4"]  # fmt: skip
        out = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True,
                             timeout=240)  # fmt: skip
        assert out.returncode == 0, out.stdout + out.stderr
        assert "WARNING" not in out.stderr, out.stderr
    local = sorted(p.name for p in (data / "media" / "mr" / "blobs").rglob("*")
                   if p.is_file() and not p.name.startswith(".tmp-"))  # fmt: skip
    files = stored_files(blobs_dir)
    assert sorted(p.name for p in files) == local and len(local) > 3 * 4
    for p in files:
        assert sha(p.read_bytes()) == p.name
    local_info = rankwise.Api(dir=data).run("mr", project="media")
    with open_store(db) as store:
        for s in local_info.streams:
            mark = store.acked(StreamId("media", "mr", s.label, s.incarnation))
            assert mark >= 0 and mark == _last_seq(data, s.label, s.incarnation)


def _last_seq(data: Path, label: str, incarnation: int) -> int:
    from rankwise.stream.files import stream_filename, streams_dir
    from rankwise.stream.frames import scan

    path = streams_dir(data, "media", "mr") / stream_filename(label, incarnation)
    return scan(path.read_bytes()).records[-1].seq
