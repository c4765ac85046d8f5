"""Artifacts in local mode: the ``Artifact`` class, the local store, the worker, lineage.

Bad names are refused at add time naming the file (security.md §6 rows 10-14), a
reference is never dereferenced (rows 27, 28: zero outbound connections), a download is
verified and never leaves its root, identical content makes no version and copies nothing.
"""

from __future__ import annotations

import hashlib
import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest

import rankwise
from rankwise.artifacts.local import LocalArtifacts, parse_ref
from rankwise.artifacts.manifest import Manifest, manifest_digest
from rankwise.errors import ArtifactError, ArtifactNotFoundError, UsageError


def _run(tmp_path: Path, **kw: Any) -> rankwise.Run:
    return rankwise.init(project="p", dir=tmp_path / "data", system=False, console="off", **kw)


@pytest.fixture
def files(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "a.txt").write_text("alpha")
    (src / "sub" / "b.bin").write_bytes(os.urandom(1000))
    return src


# -- names: refused at add time, naming the file, nothing added --------------------------
BAD_NAMES = [
    "../x", "a/../../x", "./a", "a//b", "/etc/passwd", "C:\\x", "C:x", "..\\x", "a\\..\\x",
    "file:///etc/passwd", "//proc/self/root", "..%2f..%2fx", "%2e%2e/x", "%252e%252e%252f",
    "a%23/../x", "a;/../x", "a%00.png", "a\x00.png", "a\u202e.png", "a\nb", "a/", "",
    ".", "..",
]  # fmt: skip


@pytest.mark.parametrize("bad", BAD_NAMES)
def test_a_bad_file_name_is_refused_naming_it(files: Path, bad: str) -> None:
    art = rankwise.Artifact("data", "dataset")
    with pytest.raises(UsageError) as err:
        art.add_file(files / "a.txt", name=bad)
    assert "artifact file name" in str(err.value)
    with pytest.raises(UsageError):
        art.add_reference("s3://b/k", name=bad)
    with pytest.raises(UsageError), art.new_file(bad) as f:
        f.write("x")
    assert art.files() == []


@pytest.mark.parametrize("bad", ["../x", "a/b", "a b", "", "x" * 129, "CON", "-a"])
def test_a_bad_artifact_name_or_type_is_refused(bad: str) -> None:
    with pytest.raises(UsageError, match="artifact name"):
        rankwise.Artifact(bad, "dataset")
    with pytest.raises(UsageError, match="artifact type"):
        rankwise.Artifact("ok", bad)


def test_metadata_must_be_json_like(tmp_path: Path, files: Path) -> None:
    with pytest.raises(UsageError, match="metadata must be JSON-like"):
        rankwise.Artifact("ok", "t", metadata={"x": object()})
    art = rankwise.Artifact("ok", "t", metadata={"a": [1, 2.5, None, "s"]})
    art.add_file(files / "a.txt")
    art.metadata["later"] = object()  # set after construction: refused when logged
    run = _run(tmp_path)
    with pytest.raises(UsageError, match="metadata must be JSON-like"):
        run.log_artifact(art)
    del art.metadata["later"]
    assert run.log_artifact(art).wait(30).metadata == {"a": [1, 2.5, None, "s"]}
    run.finish()


def test_two_files_at_one_path_and_file_dir_collisions_are_refused(files: Path) -> None:
    art = rankwise.Artifact("data", "dataset")
    art.add_file(files / "a.txt", name="x/a.txt")
    with pytest.raises(UsageError, match=r"'x/a\.txt' was added twice"):
        art.add_file(files / "a.txt", name="x/a.txt")
    with pytest.raises(UsageError, match="'x' is already a directory"):
        art.add_file(files / "a.txt", name="x")
    with pytest.raises(UsageError, match=r"lies under 'x/a\.txt', which is a file"):
        art.add_reference("s3://b/k", name="x/a.txt/y")
    with pytest.raises(UsageError, match="added twice"):
        art.add_dir(files, name="x")  # x/a.txt again: all or nothing
    assert [e.path for e in art.files()] == ["x/a.txt"]
    art.add_file(files / "sub" / "b.bin", name="x/a.txt", overwrite=True)
    assert [e.size for e in art.files()] == [1000]


def test_add_dir_refuses_a_symlink_leading_outside(tmp_path: Path, files: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("do not take")
    (files / "link").symlink_to(secret)
    art = rankwise.Artifact("data", "dataset")
    with pytest.raises(UsageError, match=r"'link' is a symlink to .*outside"):
        art.add_dir(files)
    assert art.files() == []
    (files / "link").unlink()
    (files / "up").symlink_to(tmp_path, target_is_directory=True)  # dir -> outside
    with pytest.raises(UsageError, match="'up' is a symlink"):
        art.add_dir(files)
    (files / "up").unlink()
    # Inside links are followed, and a loop is walked once.
    (files / "same.txt").symlink_to(files / "a.txt")
    (files / "sub" / "loop").symlink_to(files, target_is_directory=True)
    art.add_dir(files, name="d")
    assert [e.path for e in art.files()] == ["d/a.txt", "d/same.txt", "d/sub/b.bin"]


def test_add_dir_refuses_a_fifo(files: Path) -> None:
    os.mkfifo(files / "pipe")
    with pytest.raises(UsageError, match="'pipe' is not a regular file"):
        rankwise.Artifact("data", "dataset").add_dir(files)


def test_references_are_never_dereferenced(
    tmp_path: Path, files: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _run(tmp_path)  # the run's own start-up may use sockets; from here none may
    calls: list[Any] = []

    def connect(self: socket.socket, address: Any) -> None:
        calls.append(address)
        raise OSError("no connection allowed in this test")

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect)
    monkeypatch.setattr(socket, "create_connection", lambda *a, **k: connect(None, a))
    uris = [
        "file:///etc/passwd", "http://169.254.169.254/latest/meta-data/",
        "http://[::ffff:a9fe:a9fe]/x", "http://2130706433/x", "http://127.0.0.1:6379/x",
        "https://example.com/redirect-to-metadata", "file:////proc/self/root",
    ]  # fmt: skip
    art = rankwise.Artifact("refs", "dataset")
    for i, uri in enumerate(uris):
        art.add_reference(uri, name=f"r{i}")
    with pytest.raises(UsageError, match="schemes"):
        art.add_reference("gopher://127.0.0.1:70/x", name="g")
    run.log_artifact(art).wait(30)
    back = run.use_artifact("refs:latest")
    assert [e.ref for e in back.files()] == uris
    where = back.download(tmp_path / "out")
    assert os.listdir(where) == []  # a reference is never fetched
    run.finish()
    assert calls == []


# -- logging, versions, dedup, aliases ---------------------------------------------------
def test_log_use_download_round_trip(tmp_path: Path, files: Path) -> None:
    run = _run(tmp_path)
    art = rankwise.Artifact("data", "dataset", description="d", metadata={"n": 2})
    art.add_dir(files, name="src")
    with art.new_file("notes/readme.txt", mode="w") as f:
        f.write("notes")
    assert run.log_artifact(art, aliases=["best"]) is art
    art.wait(30)
    assert art.version == "v0" and art.aliases == ["best", "latest"]
    assert art.qualified_name == "p/data:v0" and art.state == "COMMITTED"
    assert art.bytes_copied == 5 + 1000 + 5
    with pytest.raises(UsageError, match="already logged"):
        art.add_file(files / "a.txt", name="more")

    back = run.use_artifact("data:best", type="dataset")
    assert back.version == "v0" and back.digest == art.digest
    assert back.metadata == {"n": 2} and back.description == "d"
    entry = back.get_entry("src/sub/b.bin")
    assert entry.digest == hashlib.sha256((files / "sub" / "b.bin").read_bytes()).hexdigest()
    where = Path(back.download(tmp_path / "out"))
    assert (where / "src" / "a.txt").read_text() == "alpha"
    assert (where / "notes" / "readme.txt").read_text() == "notes"
    part = Path(back.download(tmp_path / "part", path_prefix="src/sub/"))
    assert [p.relative_to(part).as_posix() for p in part.rglob("*") if p.is_file()] == [
        "src/sub/b.bin"
    ]
    with pytest.raises(UsageError, match="type 'dataset', not 'model'"):
        run.use_artifact("data", type="model")
    with pytest.raises(ArtifactNotFoundError, match="no alias 'nope'"):
        run.use_artifact("data:nope")
    with pytest.raises(ArtifactNotFoundError, match="no version v7"):
        run.use_artifact("data:v7")
    with pytest.raises(ArtifactNotFoundError, match="no artifact 'other'"):
        run.use_artifact("other")
    run.finish()

    store = LocalArtifacts(tmp_path / "data", "p")
    assert [u.run_id for u in store.uses("data", "v0")] == [run.id]
    assert [v.version for v in store.logged_by(run.id)] == ["v0"]
    assert [v.version for v in store.used_by(run.id)] == ["v0"]


def test_identical_content_makes_no_version_and_copies_nothing(tmp_path: Path, files: Path) -> None:
    run = _run(tmp_path)

    def make(extra: str | None = None) -> rankwise.Artifact:
        art = rankwise.Artifact("data", "dataset")
        art.add_file(files / "a.txt")
        art.add_reference("s3://bucket/x.bin")
        if extra is not None:
            with art.new_file("extra.txt", mode="w") as f:
                f.write(extra)
        return art

    first = run.log_artifact(make()).wait(30)
    again = run.log_artifact(make(), aliases=["moved"]).wait(30)
    assert (first.version, again.version) == ("v0", "v0")
    assert again.bytes_copied == 0 and again.aliases == ["latest", "moved"]
    changed = run.log_artifact(make("x"), aliases=["moved"]).wait(30)
    assert changed.version == "v1" and changed.bytes_copied == 1  # a.txt was stored already
    back = run.use_artifact("data:v0")
    assert back.aliases == []  # both aliases moved to v1
    assert run.use_artifact("data:moved").version == "v1"
    assert run.use_artifact("data").version == "v1"
    run.finish()


def test_log_model_and_use_model(
    tmp_path: Path, files: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # use_model downloads under ./artifacts/<name>:<version>
    run = _run(tmp_path)
    m = run.log_model(files / "a.txt", name="net", aliases=["prod"])
    m.wait(30)
    assert m.type == "model" and m.version == "v0"
    path = run.use_model("net:prod")
    assert Path(path).read_text() == "alpha" and path.endswith("a.txt")
    d = run.log_model(files, aliases="prod").wait(30)
    assert d.name == f"run-{run.id}-src"
    assert sorted(os.listdir(run.use_model(f"{d.name}"))) == ["a.txt", "sub"]
    with pytest.raises(UsageError, match="type 'model', not 'dataset'"):
        run.use_artifact("net", type="dataset")
    assert Path(path) == tmp_path / "artifacts" / "net:v0" / "a.txt"
    run.finish()

    api = rankwise.Api(tmp_path / "data")
    info = api.run(run.id, project="p")
    assert sorted(a.qualified_name for a in info.logged_artifacts()) == sorted(
        [f"p/{d.name}:v0", "p/net:v0"]
    )
    used = info.used_artifacts()
    assert sorted(a.name for a in used) == sorted(["net", d.name])
    assert all(a.files() for a in used)
    names = api.artifacts("p", type="model")
    assert sorted(s.name for s in names) == sorted(["net", d.name])
    assert api.artifacts("p", type="dataset") == []
    versions = api.artifact_versions("p/net")
    assert [v.version for v in versions] == ["v0"] and versions[0].aliases == ["latest", "prod"]


def test_log_artifact_of_a_path_and_module_functions(tmp_path: Path, files: Path) -> None:
    run = _run(tmp_path)
    art = rankwise.log_artifact(files / "a.txt", name="one", type="text")
    art.wait(30)
    assert rankwise.use_artifact("one:v0").files()[0].path == "a.txt"
    assert rankwise.use_artifact(art).version == "v0"
    assert run
    rankwise.finish()
    with pytest.raises(UsageError, match="init"):
        rankwise.use_artifact("one")


def test_a_rank_that_does_not_record_resolves_but_logs_nothing(
    tmp_path: Path, files: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _run(tmp_path)
    run.log_artifact(files / "a.txt", name="one", type="text").wait(30)
    run.finish()
    monkeypatch.setenv("RANKWISE_DISABLED", "1")
    silent = _run(tmp_path)
    assert not silent
    art = rankwise.Artifact("never", "text")
    art.add_file(files / "a.txt")
    assert silent.log_artifact(art) is art
    got = silent.use_artifact("one")
    assert got.version == "v0"
    store = LocalArtifacts(tmp_path / "data", "p")
    assert store.names() == ["one"]
    assert store.uses("one", "v0") == []  # no lineage from a rank that records nothing


def test_versions_are_distinct_across_processes(tmp_path: Path) -> None:
    # Six processes commit different content to one name at once: six versions, no loss.
    data = tmp_path / "data"
    code = textwrap.dedent(
        """
        import sys, time
        from rankwise.artifacts.local import LocalArtifacts
        from rankwise.wire.artifacts import CommitRequest
        from rankwise.artifacts.worker import commit_local, stage
        i, data, start = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
        path = f"{data}-f{i}.txt"
        open(path, "w").write(f"content {i}")
        store = LocalArtifacts(data, "p")
        files = [("f.txt", path, None)]
        req = CommitRequest(type="t", manifest=stage(files)[0], client_id=f"c{i}")
        while time.time() < start:
            pass
        info, _ = commit_local(store, "same", req, files)
        print(info.version)
        """
    )
    start = time.time() + 2.0
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(i), str(data), str(start)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(6)
    ]
    versions = sorted(p.communicate(timeout=60)[0].strip() for p in procs)
    assert versions == [f"v{i}" for i in range(6)]
    store = LocalArtifacts(data, "p")
    contents = set()
    for info in store.versions("same"):
        full = store.resolve("same", info.version)
        assert full.manifest is not None
        with store.open_file(full.manifest.entries[0].digest) as f:
            contents.add(f.read().decode())
    assert contents == {f"content {i}" for i in range(6)}


# -- a damaged or tampered store is detected; a download never leaves its root -----------
def test_a_tampered_file_or_manifest_is_detected(tmp_path: Path, files: Path) -> None:
    run = _run(tmp_path)
    art = run.log_artifact(files / "sub", name="d", type="t").wait(30)
    run.finish()
    store = LocalArtifacts(tmp_path / "data", "p")
    info = store.resolve("d")
    assert info.manifest is not None
    stored = store.file_path(info.manifest.entries[0].digest)
    good = stored.read_bytes()
    stored.write_bytes(b"x" * len(good))
    back = rankwise.Api(tmp_path / "data").artifact("p/d:latest")
    with pytest.raises(ArtifactError, match="does not match its digest"):
        back.download(tmp_path / "out")
    assert not (tmp_path / "out" / "b.bin").exists()
    stored.write_bytes(good)
    assert (Path(back.download(tmp_path / "out")) / "b.bin").read_bytes() == good

    manifest_file = store.base / "manifests" / f"{art.digest}.json"
    m = msgspec.json.decode(manifest_file.read_bytes(), type=Manifest)
    m.entries[0].path = "../../escape.bin"
    manifest_file.write_bytes(msgspec.json.encode(m))
    with pytest.raises(UsageError, match="artifact file name"):
        rankwise.Api(tmp_path / "data").artifact("p/d")
    m.entries[0].path = "other.bin"  # valid, but not what the digest names
    manifest_file.write_bytes(msgspec.json.encode(m))
    with pytest.raises(UsageError, match="does not match its digest"):
        rankwise.Api(tmp_path / "data").artifact("p/d")


def test_a_download_never_writes_through_a_symlink(tmp_path: Path, files: Path) -> None:
    run = _run(tmp_path)
    run.log_artifact(files, name="d", type="t").wait(30)
    back = run.use_artifact("d")
    run.finish()
    root = tmp_path / "out"
    root.mkdir()
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (root / "sub").symlink_to(outside, target_is_directory=True)
    with pytest.raises(UsageError, match="symlink"):
        back.download(root)
    assert list(outside.iterdir()) == []
    assert sorted(os.listdir(root)) == ["sub"]  # nothing written, a.txt neither
    (root / "sub").unlink()
    (root / "a.txt").symlink_to(outside / "target.txt")
    with pytest.raises(UsageError, match=r"outside|symlink"):
        back.download(root)
    assert list(outside.iterdir()) == []


def test_parse_ref() -> None:
    assert parse_ref("m") == (None, "m", "latest")
    assert parse_ref("p/m:v3") == ("p", "m", "v3")
    assert parse_ref("p/m:best") == ("p", "m", "best")
    assert parse_ref("team/p/m:v1") == ("p", "m", "v1")  # W&B's entity is left out
    for bad in ("../m", "p/../m", "m:../x", "m:a/b", "a/p/q/m", "../p/m", "m:v1:v2", "m:"):
        with pytest.raises(UsageError):
            parse_ref(bad)


def test_a_failure_is_raised_by_wait_and_does_not_stop_the_run(tmp_path: Path, files: Path) -> None:
    run = _run(tmp_path)
    doomed = tmp_path / "doomed.txt"
    doomed.write_text("soon gone")
    art = rankwise.Artifact("gone", "t")
    art.add_file(doomed)
    doomed.unlink()  # removed before the worker reads it
    run.log_artifact(art)
    with pytest.raises(ArtifactError, match="was not stored"):
        art.wait(30)
    run.log({"x": 1})
    ok = run.log_artifact(files / "a.txt", name="fine", type="t").wait(30)
    assert ok.version == "v0"
    run.finish()
    assert run.state == "finished"


def test_manifest_digest_is_independent_of_adding_order(files: Path) -> None:
    a = rankwise.Artifact("x", "t")
    a.add_file(files / "a.txt")
    a.add_file(files / "sub" / "b.bin")
    from rankwise.artifacts.worker import stage

    m1, _ = stage(a.pending())
    b = rankwise.Artifact("y", "t")
    b.add_file(files / "sub" / "b.bin")
    b.add_file(files / "a.txt")
    assert manifest_digest(m1) == manifest_digest(stage(b.pending())[0])


def test_a_file_changed_after_log_artifact_is_refused(tmp_path: Path) -> None:
    big = tmp_path / "big.bin"
    with open(big, "wb") as f:
        f.truncate(160 * 1024 * 1024)  # keeps the worker busy for a while
    ckpt = tmp_path / "ckpt.pt"
    ckpt.write_bytes(b"epoch 1")
    run = _run(tmp_path)
    run.log_artifact(big, name="big", type="t")
    art = run.log_artifact(ckpt, name="ckpt", type="model")
    ckpt.write_bytes(b"epoch 2, longer")  # overwritten before the worker got to it
    with pytest.raises(ArtifactError, match="changed or vanished after log_artifact"):
        art.wait(60)
    run.finish()
    assert LocalArtifacts(tmp_path / "data", "p").version_numbers("ckpt") == []


def test_a_large_file_is_hashed_and_stored_with_bounded_memory(tmp_path: Path) -> None:
    # 160 MiB of real (non-sparse) bytes: the process's peak RSS grows by far less.
    code = textwrap.dedent(
        """
        import os, resource, sys, time
        import rankwise
        big = sys.argv[1] + "/big.bin"
        block = os.urandom(1 << 20)
        with open(big, "wb") as f:
            for _ in range(160):
                f.write(block)
        del block
        run = rankwise.init(project="p", dir=sys.argv[1] + "/data", system=False,
                            console="off")
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        art = run.log_artifact(big, name="big", type="t")
        returned = art.bytes_copied  # what was copied when log_artifact returned
        art.wait(120)
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        run.finish()
        print(returned, (after - before) * 1024, art.bytes_copied, art.size)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    returned, grew, copied, size = out.stdout.split()
    assert int(size) == int(copied) == 160 * 2**20
    assert int(grew) < 48 * 2**20, f"peak RSS grew by {int(grew) / 2**20:.0f} MiB"
    # log_artifact returned before the copy and hash were done (bench_artifacts.py
    # measures how fast it returns).
    assert int(returned) < int(size), returned
    store = LocalArtifacts(tmp_path / "data", "p")
    info = store.resolve("big")
    assert info.manifest is not None
    [entry] = info.manifest.entries
    assert [c.size for c in entry.chunks] == [32 * 2**20] * 5  # CHUNK_BYTES pieces
    assert store.file_path(entry.digest).stat().st_size == 160 * 2**20


def test_tags_are_stored_with_the_version_and_read_back(tmp_path: Path, files: Path) -> None:
    """``log_artifact(tags=)`` is kept with the version (never dropped); the same content
    logged again gains the new tags; a bad tag is a UsageError naming the rule."""
    run = _run(tmp_path)
    art = rankwise.Artifact("data", "dataset")
    art.add_file(files / "a.txt")
    run.log_artifact(art, tags=["baseline", "fp16", "baseline"]).wait(30)
    assert art.tags == ["baseline", "fp16"]
    again = rankwise.Artifact("data", "dataset")
    again.add_file(files / "a.txt")
    run.log_artifact(again, tags="best").wait(30)
    assert again.version == "v0" and again.tags == ["baseline", "fp16", "best"]
    with pytest.raises(UsageError, match="artifact tag"):
        run.log_artifact(files / "a.txt", name="x", tags=["no spaces"])
    with pytest.raises(UsageError, match="list of strings"):
        run.log_artifact(files / "a.txt", name="x", tags=3)
    run.finish()
    api = rankwise.Api(dir=tmp_path / "data")
    assert api.artifact("p/data:v0").tags == ["baseline", "fp16", "best"]
    assert LocalArtifacts(tmp_path / "data", "p").version("data", 0).tags == [
        "baseline",
        "fp16",
        "best",
    ]
