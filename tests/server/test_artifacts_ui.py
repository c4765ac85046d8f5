"""``rankwise ui`` over a data directory whose runs logged artifacts in local mode: the
index holds their versions (numbers kept), aliases (moves too), tags and lineage, and the
file route serves the local store's files, a multi-chunk one whole, with nothing
written into the data directory."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import rankwise
from rankwise.artifacts.manifest import CHUNK_BYTES
from rankwise.server import ServerSettings, create_app
from rankwise.server.indexer import DirectoryTailer
from rankwise.store import open_store
from rankwise.store.blobs import RunDirBlobStore
from tests.helpers.servers import call


def _tree(root: Path) -> dict[str, float]:
    return {str(p): p.stat().st_mtime for p in root.rglob("*")}


@pytest.fixture(autouse=True)
def _quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANKWISE_SILENT", "1")


def test_ui_indexes_local_artifacts(tmp_path: Path) -> None:
    data = tmp_path / "data"
    src = tmp_path / "src"
    src.mkdir()
    big = os.urandom(CHUNK_BYTES + 12345)  # two chunks
    (src / "model.bin").write_bytes(big)
    (src / "notes.txt").write_text("<b>not html</b>")

    run = rankwise.init(project="p", id="train", dir=data, system=False, console="off")
    art = rankwise.Artifact("cnn", "model", metadata={"acc": 0.9})
    art.add_file(src / "model.bin")
    art.add_file(src / "notes.txt", name="docs/notes.txt")
    run.log_artifact(art, aliases=["best"], tags=["fp16"]).wait(60)
    again = rankwise.Artifact("cnn", "model", metadata={"acc": 0.9})
    again.add_file(src / "model.bin")
    again.add_file(src / "notes.txt", name="docs/notes.txt")
    run.finish()

    ev = rankwise.init(project="p", id="eval", dir=data, system=False, console="off")
    used = ev.use_artifact("cnn:best")
    assert used.version == "v0"
    ev.finish()

    store = open_store(tmp_path / "index.db")
    store.migrate()
    before = _tree(data)
    tailer = DirectoryTailer(data, store, discover_interval=0)
    tailer.poll()
    assert _tree(data) == before  # rankwise ui writes nothing into the data directory
    app = create_app(
        store, ServerSettings(static_dir=tmp_path / "no-static", blobs=RunDirBlobStore(data))
    )

    names = call(app, "GET", "/api/v1/artifacts/p").json()["artifacts"]
    assert [(n["name"], n["type"], n["latest"]) for n in names] == [("cnn", "model", "v0")]
    one = call(app, "GET", "/api/v1/artifacts/p/cnn/best").json()
    assert one["version"] == "v0" and sorted(one["aliases"]) == ["best", "latest"]
    assert one["tags"] == ["fp16"]
    assert one["metadata"] == {"acc": 0.9} and one["run_id"] == "train"
    assert [u["run_id"] for u in one["used_by"]] == ["eval"]
    runs = call(app, "GET", "/api/v1/runs/p/eval/artifacts").json()
    assert [v["name"] for v in runs["used"]] == ["cnn"] and runs["logged"] == []

    got = call(app, "GET", "/api/v1/artifacts/p/cnn/v0/files/model.bin")
    assert got.status_code == 200 and got.content == big
    assert got.headers["content-disposition"].startswith("attachment")
    notes = call(app, "GET", "/api/v1/artifacts/p/cnn/v0/files/docs/notes.txt")
    assert notes.content == b"<b>not html</b>"
    assert notes.headers["content-type"] == "application/octet-stream"

    # Identical content logged again with a new alias: no version, the alias moves.
    run = rankwise.init(project="p", id="train2", dir=data, system=False, console="off")
    run.log_artifact(again, aliases=["prod"], tags=["rerun"]).wait(60)
    run.finish()
    tailer.poll()
    moved = call(app, "GET", "/api/v1/artifacts/p/cnn/prod").json()
    assert moved["version"] == "v0"
    assert moved["tags"] == ["fp16", "rerun"]  # the local store's new tag, indexed too
    # ... and a new tag alone (no alias moves) reaches the index as well
    run = rankwise.init(project="p", id="train3", dir=data, system=False, console="off")
    third = rankwise.Artifact("cnn", "model", metadata={"acc": 0.9})
    third.add_file(src / "model.bin")
    third.add_file(src / "notes.txt", name="docs/notes.txt")
    run.log_artifact(third, tags=["third"]).wait(60)
    run.finish()
    tailer.poll()
    tagged = call(app, "GET", "/api/v1/artifacts/p/cnn/latest").json()
    assert tagged["tags"] == ["fp16", "rerun", "third"]
    assert len(call(app, "GET", "/api/v1/artifacts/p/cnn").json()["versions"]) == 1
    store.close()
