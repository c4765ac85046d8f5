"""The golden artifact replies the dashboard is tested with are the server's real ones.

``tests/data/golden/artifacts/*.json`` feed ``ui/test/artifacts.test.js``. Here each file
decodes strictly into the struct its route answers (``rankwise/wire/artifacts.py``) and
encodes back to the same JSON (no field more, none missing, defaults left out as the
server leaves them out); then the same artifacts are published to a real server (uvicorn,
SQLite and PostgreSQL) and every route's reply equals its file, but for the times the
server chose.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from rankwise.server import ServerSettings, create_app
from rankwise.store.blobs import LocalBlobStore
from rankwise.wire.artifacts import ArtifactsReply, RunArtifacts, VersionInfo, VersionsReply
from tests.helpers.golden_artifacts import GOLDEN, PROJECT, golden, publish_golden, without_times
from tests.helpers.servers import bearer, serve_in_thread
from tests.helpers.stores import open_sql_store

FILES: dict[str, type] = {
    "artifacts": ArtifactsReply,
    "versions": VersionsReply,
    "version": VersionInfo,
    "version_accuracies": VersionInfo,
    "run_artifacts": RunArtifacts,
    "run_artifacts_empty": RunArtifacts,
}
ROUTES = {
    "artifacts": f"/api/v1/artifacts/{PROJECT}",
    "versions": f"/api/v1/artifacts/{PROJECT}/mnist-cnn",
    "version": f"/api/v1/artifacts/{PROJECT}/mnist-cnn/best",
    "version_accuracies": f"/api/v1/artifacts/{PROJECT}/accuracies/v0",
    "run_artifacts": f"/api/v1/runs/{PROJECT}/train-1/artifacts",
    "run_artifacts_empty": f"/api/v1/runs/{PROJECT}/never-ran/artifacts",
}


def test_every_golden_file_is_checked() -> None:
    assert sorted(p.stem for p in GOLDEN.glob("*.json")) == sorted(FILES)


@pytest.mark.parametrize("name", sorted(FILES))
def test_golden_file_is_exactly_its_struct(name: str) -> None:
    raw = (GOLDEN / f"{name}.json").read_bytes()
    decoded: Any = msgspec.json.decode(raw, type=FILES[name], strict=True)
    assert json.loads(msgspec.json.encode(decoded)) == json.loads(raw)


@pytest.fixture(params=["sqlite", "postgres"])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    store = open_sql_store(request.param, tmp_path, request)
    store.migrate()
    try:
        settings = ServerSettings(
            static_dir=tmp_path / "no-static", blobs=LocalBlobStore(tmp_path / "blobs")
        )
        token = store.create_token("admin", None, "tests").value
        with serve_in_thread(create_app(store, settings), token_env=False) as url:
            yield url, token
    finally:
        store.close()


def test_the_server_answers_the_golden_replies(server: tuple[str, str], tmp_path: Path) -> None:
    url, token = server
    publish_golden(url, token, tmp_path / "staged")
    for name, route in ROUTES.items():
        r = httpx.get(url + route, headers=bearer(token), timeout=30)
        assert r.status_code == 200, (route, r.text)
        got: Any = without_times(r.json())
        assert got == without_times(golden(name)), f"{route} differs from {name}.json"
