"""The uploader's answers to a real server's refusals (real uvicorn, the real app):

* 413: the server's body cap (``max_body_bytes``, ``--max-body-mb``) refuses a batch;
  the uploader halves its batch until the uploads fit, and a single frame over the cap
  gives up with the hint to raise it;
* 415: a server without zstandard refuses zstd; the uploader falls back to gzip.

``test_upload_unit.py`` covers the same paths against a scripted transport; here the
refusals are the server's own.
"""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest

from rankwise.sdk.retry import GiveUp, Retry
from rankwise.sdk.uploader import StreamUpload
from rankwise.server import ServerSettings, create_app
from rankwise.store import open_store
from rankwise.stream import records as R
from rankwise.stream.frames import encode_frame
from rankwise.stream.identity import StreamId
from tests.helpers.env import REPO, need
from tests.helpers.servers import ServerProcess, admin_token, bearer, serve_in_thread
from tests.helpers.streams import body, records

REF = StreamId("p", "r", "rank-0", 0)
KEY = StreamId("p", "r", "rank-0", 0)


def stream_file(tmp_path: Path, steps: int, per_frame: int) -> tuple[Path, int]:
    recs = records(steps=steps)
    path = tmp_path / "rank-0.0.rwlog"
    path.write_bytes(body(recs, per_frame=per_frame))
    return path, recs[-1].seq


def drain(up: StreamUpload) -> None:
    for _ in range(10_000):
        try:
            if not up.pump():
                return
        except Retry:
            continue
    raise AssertionError("the upload did not drain")


def test_413_from_the_body_cap_halves_the_batch_then_a_huge_frame_gives_up(
    tmp_path: Path,
) -> None:
    limit = 12_000
    path, last = stream_file(tmp_path, steps=3000, per_frame=50)
    assert path.stat().st_size > 8 * limit  # the first batches are well over the cap
    store = open_store(f"sqlite:///{tmp_path / 'server.db'}")
    store.migrate()
    app = create_app(store, ServerSettings(max_body_bytes=limit))
    try:
        with (
            serve_in_thread(app) as url,
            httpx.Client(base_url=url, headers=bearer(admin_token(app))) as client,
        ):
            up = StreamUpload(client, path, REF, max_batch=512 * 1024, encoding="identity")
            drain(up)
            # Halved from 512 KiB (then from the whole file's size) until batches fit.
            assert up.max_batch <= 2 * limit, up.max_batch
            assert store.acked(KEY) == last
            steps = [r["step"] for r in store.history("p", "r", keys=["loss"])]
            assert steps == list(range(3000))
            assert store.stored_points("p", "r")[("rank-0", "loss")] == 3000  # each once

            # One frame over the cap cannot be split: the uploader says what to change.
            huge = R.Console(last + 1, 1.0, "stdout", ["x" * (2 * limit)], [1.0])
            with open(path, "ab") as f:
                f.write(encode_frame([huge]))
            with pytest.raises(GiveUp, match="larger --max-body-mb"):
                drain(up)
            assert store.acked(KEY) == last
    finally:
        store.close()


def test_415_from_a_server_without_zstandard_falls_back_to_gzip(tmp_path: Path) -> None:
    need("zstandard")  # the uploader's side compresses with it
    path, last = stream_file(tmp_path, steps=40, per_frame=3)
    # The server process cannot import zstandard, as where it is not installed.
    shim = tmp_path / "no-zstandard"
    shim.mkdir()
    (shim / "zstandard.py").write_text('raise ImportError("zstandard is not installed here")\n')
    db = f"sqlite:///{tmp_path / 'server.db'}"
    server = ServerProcess.db(db, tmp_path / "server.log")
    server.extra_env = {"PYTHONPATH": f"{shim}{os.pathsep}{REPO}"}
    with server, httpx.Client(base_url=server.url, headers=server.headers) as client:
        up = StreamUpload(client, path, REF, encoding="zstd")
        with pytest.raises(Retry, match="this server cannot read zstd"):
            up.pump()  # the server's own 415
        assert up.encoding == "gzip"
        drain(up)
    with open_store(db) as store:
        assert store.acked(KEY) == last
        assert store.stored_points("p", "r")[("rank-0", "loss")] == 40
