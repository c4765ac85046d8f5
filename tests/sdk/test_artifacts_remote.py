"""The SDK's artifacts against a real server (uvicorn, SQLite, local blob store).

Remote mode: ``log_artifact``/``log_model`` publish through the server, identical
content makes no version, ``use_artifact`` records lineage there and downloads verified
files; ``Api(server=)`` reads names, versions and a run's artifacts; ``rankwise sync``
uploads local-mode versions with their numbers, aliases and lineage; ``rankwise
artifact`` works against the server. Needs the server's artifact routes and client
(``rankwise.artifacts.remote``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

import rankwise
import rankwise.artifacts.remote  # part of the package: a broken client fails, never skips
from rankwise.artifacts.local import LocalArtifacts
from rankwise.cli import main
from tests.helpers.servers import AppServer


@pytest.fixture
def server(app_server: AppServer) -> str:
    return app_server.url


def _init(tmp_path: Path, **kw: Any) -> rankwise.Run:
    settings = {"upload_interval": 0.05, "flush_interval": 0.02}
    return rankwise.init(
        project="p", dir=tmp_path / "data", system=False, console="off", settings=settings, **kw
    )


def test_remote_mode_log_use_and_read(tmp_path: Path, server: str) -> None:
    weights = tmp_path / "model.pt"
    weights.write_bytes(os.urandom(100_000))
    run = _init(tmp_path, server=server)
    art = run.log_model(weights, name="net", aliases=["final"]).wait(60)
    assert art.version == "v0" and "final" in art.aliases
    again = run.log_model(weights, name="net").wait(60)
    assert again.version == "v0"  # identical content: no new version
    used = run.use_artifact("net:final", type="model")
    got = Path(used.download(tmp_path / "dl")) / "model.pt"
    assert got.read_bytes() == weights.read_bytes()
    run.finish()
    store = LocalArtifacts(tmp_path / "data", "p")  # staged there, versions on the server
    assert store.outbox() == [] and store.version_numbers("net") == []

    api = rankwise.Api(server=server)
    assert [s.name for s in api.artifacts("p", type="model")] == ["net"]
    back = api.artifact("p/net:final")
    assert back.info is not None and [u.run_id for u in back.info.used_by] == [run.id]
    info = api.run(run.id, project="p")
    assert [a.qualified_name for a in info.logged_artifacts()] == ["p/net:v0"]
    assert [a.qualified_name for a in info.used_artifacts()] == ["p/net:v0"]


def test_sync_uploads_local_versions_and_the_cli_reads_them(
    tmp_path: Path, server: str, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "data.txt"
    run = _init(tmp_path)
    for i in range(3):
        src.write_text(f"version {i}")
        aliases = ["best"] if i == 1 else None
        run.log_artifact(src, name="ds", type="dataset", aliases=aliases).wait(30)
    run.use_artifact("ds:v0")
    run.finish()
    data = str(tmp_path / "data")
    assert main(["sync", data, "--server", server, "--no-progress"]) == 0
    assert "3 version(s)" in capsys.readouterr().out
    api = rankwise.Api(server=server)
    versions = api.artifact_versions("p/ds")
    assert [v.version for v in versions] == ["v2", "v1", "v0"]
    assert api.artifact("p/ds:best").version == "v1"
    v0 = api.artifact("p/ds:v0").info
    assert v0 is not None and [u.run_id for u in v0.used_by] == [run.id]
    assert main(["sync", data, "--server", server, "--no-progress"]) == 0
    assert "0 version(s)" in capsys.readouterr().out
    where = ["--project", "p", "--server", server]
    assert main(["artifact", "get", "ds:best", "--root", str(tmp_path / "got"), *where]) == 0
    assert (tmp_path / "got" / "data.txt").read_text() == "version 1"
    staged = ["--dir", data]  # put stages the files in a data directory first
    assert main(["artifact", "put", str(src), "--name", "put", "--type", "t", *where, *staged]) == 0
    assert main(["artifact", "ls", *where]) == 0
    assert "put" in capsys.readouterr().out


def test_remote_mode_stores_tags_and_sync_carries_them(tmp_path: Path, server: str) -> None:
    weights = tmp_path / "model.pt"
    weights.write_bytes(os.urandom(10_000))
    run = _init(tmp_path, server=server)
    art = run.log_artifact(weights, name="net", type="model", tags=["fp16"]).wait(60)
    assert art.tags == ["fp16"]
    again = run.log_artifact(weights, name="net", type="model", tags=["best"]).wait(60)
    assert again.version == "v0" and again.tags == ["fp16", "best"]
    run.finish()
    api = rankwise.Api(server=server)
    assert api.artifact("p/net:v0").tags == ["fp16", "best"]
    assert [v.tags for v in api.artifact_versions("net", project="p")] == [["fp16", "best"]]

    # a local-mode version keeps its tags through rankwise sync
    run2 = rankwise.init(
        project="q", dir=tmp_path / "local", system=False, console="off", settings={}
    )
    run2.log_artifact(weights, name="w", type="model", tags=["synced"]).wait(60)
    run2.finish()
    assert main(["sync", str(tmp_path / "local"), "--server", server]) == 0
    assert api.artifact("q/w:v0").tags == ["synced"]
