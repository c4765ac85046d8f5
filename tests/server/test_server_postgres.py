"""Two ``rankwise server`` processes on one PostgreSQL database: nothing doubled.

Each rank of one run uploads live to a different server; another run, written offline,
is then sent to both servers at the same moment (two ``rankwise sync`` at once), so each
of its streams is ingested by two ingesters racing on one database. The store's
per-stream mark must let each record in exactly once, aggregates included.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import rankwise
from tests.helpers.runs import assert_same_history, launch_ranks, wait_all
from tests.helpers.servers import REPO, ServerProcess, postgres_dsn, subprocess_env


@pytest.fixture
def pg() -> Iterator[str]:
    yield from postgres_dsn()


@pytest.mark.slow
def test_two_servers_on_one_postgres_double_nothing(tmp_path: Path, pg: str) -> None:
    data = tmp_path / "data"
    data.mkdir()
    a = ServerProcess.db(pg, tmp_path / "a.log", "--workers", "2").start()
    b = ServerProcess.db(pg, tmp_path / "b.log").start()
    try:
        procs = launch_ranks(data, "pg2", 2, "--steps", "40", server=[a.url, b.url])
        procs += launch_ranks(data, "pgoff", 3, "--steps", "300")
        wait_all(procs)
        syncs = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "rankwise.cli",
                    "sync",
                    str(data),
                    "--server",
                    url,
                    "--no-progress",
                ],
                env=subprocess_env(),
                cwd=REPO,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            for url in (b.url, a.url)
        ]
        for p in syncs:
            out, _ = p.communicate(timeout=120)
            assert p.returncode == 0, out
        for run_id, world in (("pg2", 2), ("pgoff", 3)):
            local = rankwise.Api(dir=data).run(run_id)
            for server in (a, b):
                remote = rankwise.Api(server=server.url).run(run_id)
                assert_same_history(local, remote, pg)
                assert remote.state == "finished" and len(remote.streams) == world
        assert _band(a.url, "pg2")["n"] == [2] * 40
        assert _band(b.url, "pgoff")["n"] == [3] * 300
    finally:
        a.stop()
        b.stop()


def _band(url: str, run: str) -> dict:
    import httpx

    headers = {"Authorization": f"Bearer {os.environ['RANKWISE_TOKEN']}"}  # the servers' admin
    with httpx.Client(base_url=url, headers=headers) as client:
        r = client.get(f"/api/v1/projects/up/runs/{run}/series", params={"key": "loss"})
    assert r.status_code == 200, r.text
    return r.json()["band"]
