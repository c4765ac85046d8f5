"""``rankwise rm``/``restore``/``trash``/``audit`` as a user runs them (real subprocesses):
against a data directory (the run folders move to ``<dir>/.trash``), against a
``rankwise server`` (a filter is a dry run unless ``--yes``), and ``rankwise ui``'s
delete routes moving the folders beside its index."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx

from tests.helpers.servers import ServerProcess, subprocess_env, wait_until

JOB = """
import rankwise
for i, tag in enumerate(["smoke", "smoke", "keep"]):
    run = rankwise.init(project="p", id=f"r{i}", tags=[tag], settings={"flush_interval": 0.02})
    run.log({"loss": 1.0})
    run.finish()
"""


def _job(root: Path, **env: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", JOB], capture_output=True, text=True, timeout=120,
        env=subprocess_env(RANKWISE_DIR=str(root), RANKWISE_SILENT="1", **env),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


def _cli(*args: str, root: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rankwise.cli", *args], capture_output=True, text=True,
        timeout=60, env=subprocess_env(RANKWISE_DIR=str(root), RANKWISE_PROJECT="p", **env),
    )  # fmt: skip


def _ids(root: Path, **env: str) -> list[str]:
    out = _cli("runs", "--project", "p", root=root, **env)
    assert out.returncode == 0, out.stderr
    return sorted(line.split()[0] for line in out.stdout.splitlines()[1:])


def test_rm_in_a_data_directory(tmp_path: Path) -> None:
    root = tmp_path / "data"
    _job(root)
    out = _cli("rm", "--filter", '{"tags": "smoke"}', root=root)
    assert out.returncode == 0, out.stderr
    assert "would delete 2 runs: r0 r1" in out.stdout and "--yes" in out.stdout
    assert _ids(root) == ["r0", "r1", "r2"]
    out = _cli("rm", "--filter", '{"tags": "smoke"}', "--yes", root=root)
    assert "deleted 2 runs to the trash" in out.stdout, out.stderr
    assert _ids(root) == ["r2"]
    assert (root / ".trash" / "p" / "r0" / "streams").is_dir()
    trash = _cli("trash", root=root).stdout
    assert "r0" in trash and "r1" in trash
    assert _cli("restore", "r1", root=root).returncode == 0
    assert _ids(root) == ["r1", "r2"]
    out = _cli("rm", "r0", "--purge", root=root)  # from the trash, for good
    assert out.returncode == 0 and "purged 1 run for good" in out.stdout, out.stderr
    assert not (root / ".trash" / "p" / "r0").exists()
    missing = _cli("rm", "nope", root=root)
    assert missing.returncode == 2 and "no run 'nope'" in missing.stderr
    audit = _cli("audit", root=root).stdout.splitlines()
    assert [line.split()[3] for line in audit] == ["purge", "restore", "delete"]


def _server_ids(srv: ServerProcess) -> list[str]:
    r = srv.get("/api/v1/projects/p/runs")
    return sorted(x["id"] for x in r.json().get("runs", []))


def test_rm_against_a_server(tmp_path: Path) -> None:
    root = tmp_path / "data"
    srv = ServerProcess.db(f"sqlite:///{tmp_path / 'server.db'}", tmp_path / "server.log")
    with srv:
        _job(root, **srv.env())
        env = {"RANKWISE_SERVER": srv.url, "RANKWISE_TOKEN": srv.token or ""}
        wait_until(lambda: _server_ids(srv) == ["r0", "r1", "r2"], timeout=30)
        out = _cli("rm", "--filter", '{"tags": "smoke"}', root=root, **env)
        assert "would delete 2 runs: r0 r1" in out.stdout, out.stderr
        assert _server_ids(srv) == ["r0", "r1", "r2"]
        out = _cli("rm", "r0", "r1", root=root, **env)
        assert out.returncode == 0 and "deleted 2 runs" in out.stdout, out.stderr
        assert _server_ids(srv) == ["r2"]
        assert "r0" in _cli("trash", root=root, **env).stdout
        assert _cli("restore", "r0", root=root, **env).returncode == 0
        assert _server_ids(srv) == ["r0", "r2"]
        out = _cli("rm", "--filter", '{"tags": "keep"}', "--yes", "--purge", root=root, **env)
        assert "purged 1 run for good: r2" in out.stdout, out.stderr
        audit = _cli("audit", root=root, **env)
        assert [line.split()[3] for line in audit.stdout.splitlines()] == [
            "purge", "restore", "delete"
        ]  # fmt: skip
        # A write token of the project may delete; an ingest token may not.
        store_url = f"sqlite:///{tmp_path / 'server.db'}"
        from rankwise.store import open_store

        with open_store(store_url) as store:
            ingest = store.create_token("ingest", ["p"], "job").value
        refused = _cli("rm", "r0", root=root, **{**env, "RANKWISE_TOKEN": ingest})
        assert refused.returncode == 2 and "write token" in refused.stderr


def test_ui_delete_moves_the_run_folder(tmp_path: Path) -> None:
    root = tmp_path / "data"
    _job(root)
    ui = ServerProcess.ui(root, tmp_path / "ui.log")
    with ui:
        api = f"{ui.url}/api/v1/projects/p"
        wait_until(lambda: len(httpx.get(f"{api}/runs").json().get("runs", [])) == 3)
        r = httpx.post(f"{api}/runs/delete", json={"runs": ["r0"]})
        assert r.json()["runs"] == ["r0"]
        assert not (root / "p" / "r0").exists()
        assert (root / ".trash" / "p" / "r0" / "streams").is_dir()
        got = sorted(x["id"] for x in httpx.get(f"{api}/runs").json()["runs"])
        assert got == ["r1", "r2"]
        assert [t["id"] for t in httpx.get(f"{api}/trash").json()["runs"]] == ["r0"]
        httpx.post(f"{api}/runs/restore", json={"runs": ["r0"]})
        assert (root / "p" / "r0" / "streams").is_dir()
        got = sorted(x["id"] for x in httpx.get(f"{api}/runs").json()["runs"])
        assert got == ["r0", "r1", "r2"]
        r = httpx.post(f"{api}/runs/delete", json={"runs": ["r1"], "purge": True})
        assert r.json()["purged"] is True
        assert not (root / "p" / "r1").exists() and not (root / ".trash" / "p" / "r1").exists()
        assert httpx.get(f"{api}/runs/r1").status_code == 404
