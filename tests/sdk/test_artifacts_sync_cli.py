"""``rankwise artifact ls|get|put``, the outbox and ``sync_artifacts``.

The publisher here is a real second local store standing in for a server (it numbers
versions as the server does: the asked-for number when free, else the next); the HTTP
client is tested against a real server where it lives.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

import rankwise
from rankwise.artifacts.local import LocalArtifacts
from rankwise.artifacts.sync import sync_artifacts
from rankwise.artifacts.worker import commit_local
from rankwise.cli import main
from rankwise.errors import ArtifactError
from rankwise.wire.artifacts import CommitRequest, VersionInfo


class StorePublisher:
    """A ``SyncPublisher`` writing into another data directory's store."""

    def __init__(self, root: Path, project: str, fail: bool = False) -> None:
        self.store = LocalArtifacts(root, project)
        self.fail = fail
        self.commits: list[tuple[str, str | None]] = []
        self.seen: dict[str, VersionInfo] = {}

    def publish(self, name: str, request: CommitRequest, files_root: Path) -> VersionInfo:
        if self.fail:
            raise ConnectionError("server down")
        if request.client_id in self.seen:  # idempotent on client_id, as the server
            return self.seen[request.client_id]
        self.commits.append((name, request.version))
        files = [
            (e.path, str(files_root / e.digest[:2] / e.digest), None)
            for e in request.manifest.entries
            if e.ref is None
        ]
        info, _ = commit_local(self.store, name, request, files)
        self.seen[request.client_id] = info
        return info

    def use(self, name: str, ref: str, run_id: str, label: str | None) -> VersionInfo:
        if self.fail:
            raise ConnectionError("server down")
        info = self.store.resolve(name, ref)
        self.store.record_use(name, info.version, run_id, label)
        return info


def _put(tmp_path: Path, path: Path, *extra: str) -> None:
    argv = ["artifact", "put", str(path), "--dir", str(tmp_path / "data"), "--project", "p"]
    assert main([*argv, *extra]) == 0


def test_cli_put_ls_get(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "src"
    (src / "d").mkdir(parents=True)
    (src / "d" / "x.txt").write_text("x")
    (src / "y.txt").write_text("y")
    _put(tmp_path, src, "--name", "ds", "--type", "dataset", "--alias", "first")
    (src / "y.txt").write_text("y2")
    _put(tmp_path, src, "--name", "ds", "--type", "dataset")
    _put(tmp_path, src / "y.txt", "--name", "one", "--type", "text")
    out = capsys.readouterr().out
    assert "p/ds:v0" in out and "p/ds:v1" in out and "p/one:v0" in out
    where = ["--dir", str(tmp_path / "data"), "--project", "p"]
    assert main(["artifact", "ls", *where]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == ["NAME", "TYPE", "VERSIONS", "LATEST", "SIZE", "UPDATED"]
    assert table[1].split()[:4] == ["ds", "dataset", "2", "v1"]
    assert main(["artifact", "ls", "--type", "text", "--json", *where]) == 0
    assert [json.loads(x)["name"] for x in capsys.readouterr().out.splitlines()] == ["one"]
    assert main(["artifact", "ls", "ds", *where]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert rows[1].split()[:2] == ["v1", "latest"] and rows[2].split()[:2] == ["v0", "first"]
    assert main(["artifact", "get", "ds:first", "--root", str(tmp_path / "got"), *where]) == 0
    assert (tmp_path / "got" / "y.txt").read_text() == "y"
    assert (tmp_path / "got" / "d" / "x.txt").read_text() == "x"
    assert main(["artifact", "get", "ds:nope", *where]) == 2
    assert "no alias 'nope'" in capsys.readouterr().err
    assert main(["artifact", "put", str(src), "--name", "../x", "--type", "t", *where]) == 2
    assert "artifact name" in capsys.readouterr().err


@pytest.mark.parametrize(("size", "shown"), [(21_400, "20.9 KiB"), (1023 * 1024, "1020 KiB")])
def test_cli_sizes_are_the_dashboards_binary_units(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], size: int, shown: str
) -> None:
    """The same strings as the dashboard's fmtBytes (ui/test/system.test.js)."""
    (tmp_path / "w.bin").write_bytes(b"w" * size)
    _put(tmp_path, tmp_path / "w.bin", "--name", "w", "--type", "model")
    capsys.readouterr()
    assert main(["artifact", "ls", "--dir", str(tmp_path / "data"), "--project", "p"]) == 0
    row = capsys.readouterr().out.splitlines()[1]
    assert f"  {shown}  " in row, row


def test_sync_publishes_local_versions_with_numbers_aliases_and_lineage(tmp_path: Path) -> None:
    src = tmp_path / "f.txt"
    run = rankwise.init(project="p", dir=tmp_path / "data", system=False, console="off")
    for i in range(3):
        src.write_text(f"v{i}")
        aliases = ["best"] if i == 1 else None
        run.log_artifact(src, name="m", type="model", aliases=aliases).wait(30)
    run.log_artifact(src, name="m", type="model").wait(30)  # identical: no v3
    run.use_artifact("m:v0")
    run.finish()
    server = StorePublisher(tmp_path / "server", "p")
    report = sync_artifacts(tmp_path / "data", "p", server)
    assert report.failed == {}
    assert report.published == ["m:v0", "m:v1", "m:v2"] and report.uses == 1
    assert server.commits == [("m", "v0"), ("m", "v1"), ("m", "v2")]
    assert server.store.resolve("m", "best").version == "v1"
    assert server.store.resolve("m").run_id == run.id
    assert [u.run_id for u in server.store.uses("m", "v0")] == [run.id]
    again = sync_artifacts(tmp_path / "data", "p", server)  # nothing left to send
    assert again.published == [] and again.uses == 0 and len(server.commits) == 3


def test_remote_mode_without_a_client_keeps_the_commit_in_the_outbox(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Remote mode whose artifact client cannot work (no server listens): training goes
    # on, wait() names the outbox, and sync completes it later.
    src = tmp_path / "f.txt"
    src.write_text("weights")
    run = rankwise.init(
        project="p",
        dir=tmp_path / "data",
        server="http://127.0.0.1:9",
        system=False,
        console="off",
        settings={"upload_timeout": 0.5, "finish_timeout": 5},
    )
    art = run.log_artifact(src, name="m", type="model", aliases=["prod"])
    with pytest.raises(ArtifactError, match="rankwise sync"):
        art.wait(90)  # the client gives up after its 8 tries: up to 35.5 s of backoff
    run.log({"loss": 1.0})
    run.finish()
    store = LocalArtifacts(tmp_path / "data", "p")
    [entry] = store.outbox()
    assert entry.staged and entry.name == "m" and entry.request.aliases == ["prod"]
    assert store.version_numbers("m") == []  # versions come from the server in remote mode
    os.unlink(src)  # staged: the sync needs the store's copy only
    down = StorePublisher(tmp_path / "server", "p", fail=True)
    assert sync_artifacts(tmp_path / "data", "p", down).failed
    assert len(store.outbox()) == 1
    server = StorePublisher(tmp_path / "server", "p")
    report = sync_artifacts(tmp_path / "data", "p", server)
    assert report.failed == {} and report.published == ["m:v0"]
    assert store.outbox() == []
    got = server.store.resolve("m", "prod")
    assert got.run_id == run.id and got.manifest is not None
    assert got.manifest.entries[0].size == len("weights")


def test_finish_timeout_leaves_unhashed_artifacts_in_the_outbox(tmp_path: Path) -> None:
    big = tmp_path / "big.bin"
    with open(big, "wb") as f:
        f.truncate(160 * 1024 * 1024)  # sparse: staging it takes a while
    small = tmp_path / "small.txt"
    small.write_text("small")
    run = rankwise.init(
        project="p", dir=tmp_path / "data", system=False, console="off",
        settings={"finish_timeout": 0.2},
    )  # fmt: skip
    run.log_artifact(big, name="big", type="t")
    run.log_artifact(small, name="small", type="t")
    t = time.monotonic()
    run.finish()
    assert time.monotonic() - t < 3
    store = LocalArtifacts(tmp_path / "data", "p")
    left = {e.name: e for e in store.outbox()}
    assert "small" in left and not left["small"].staged and left["small"].local
    report = sync_artifacts(tmp_path / "data", "p", StorePublisher(tmp_path / "srv", "p"))
    assert report.failed == {}
    assert store.version_numbers("small") == [0]  # stored locally first, then published
    assert "small:v0" in report.published


def test_a_staged_commit_cut_short_by_finish_stays_staged(tmp_path: Path) -> None:
    # Remote mode, the server slow to answer: finish() times out while publishing. The
    # outbox keeps the staged entry (manifest + files in the store), so a sync needs
    # no source file.
    import threading

    from rankwise.artifacts.worker import ArtifactWorker

    release = threading.Event()

    class SlowServer(StorePublisher):
        def publish(self, name: str, request: CommitRequest, files_root: Path) -> VersionInfo:
            release.wait(30)
            raise ConnectionError("timed out")

    store = LocalArtifacts(tmp_path / "data", "p")
    worker = ArtifactWorker(store, "run1", "rank-0", lambda: SlowServer(tmp_path / "srv", "p"))
    src = tmp_path / "w.bin"
    src.write_bytes(b"weights" * 1000)
    art = rankwise.Artifact("m", "model")
    art.add_file(src)
    worker.submit(art, ["prod"])
    deadline = time.monotonic() + 10
    while not store.outbox() and time.monotonic() < deadline:
        time.sleep(0.01)
    worker.stop(time.monotonic() + 0.2)
    release.set()
    [entry] = store.outbox()
    assert entry.staged and entry.request.manifest.entries[0].size == 7000
    with pytest.raises(ArtifactError, match="rankwise sync"):
        art.wait(5)
    src.unlink()
    server = StorePublisher(tmp_path / "srv", "p")
    assert sync_artifacts(tmp_path / "data", "p", server).published == ["m:v0"]
    assert server.store.resolve("m", "prod").run_id == "run1"
