"""The job's story when a rank fails: the cause leads, ahead of the symptoms.

Two real torchrun jobs (3 CPU ranks, gloo, shared mode, ``scripts/failure_job.py``)
upload to a real ``rankwise server`` (uvicorn in a subprocess, SQLite) and write their
stream files. In one, rank 1 stalls (and recovers), then raises; in the other it is
SIGKILLed. The other ranks then fail in an ``all_reduce`` or are stopped by torchrun:
symptoms. ``first_failure`` must be rank 1 in ``Api(dir=)``, ``Api(server=)`` and
``rankwise show``; rank 1's traceback must be among its stderr console lines; its stall
must be printed on the terminal; Chromium must show rank 1 first in the run page's banner.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

import rankwise
from rankwise.stream import records as R
from rankwise.stream.frames import scan
from tests.helpers.browser import Page
from tests.helpers.runs import FAST_ENV
from tests.helpers.servers import REPO, ServerProcess, bearer, browser_login, subprocess_env
from tests.helpers.wait import wait_until

SCRIPT = Path(__file__).parents[1] / "scripts" / "failure_job.py"
MESSAGE = "boom on rank 1 at step 8"
DOCS_SHOT = REPO / "docs" / "img" / "failed-run.png"

pytestmark = pytest.mark.torchrun


@dataclass
class Job:
    mode: str
    project: str
    run_id: str
    data: Path
    url: str
    stderr: str
    token: str  # an admin token of the server's store

    def get(self, tail: str = "", **params: Any) -> Any:
        r = httpx.get(
            f"{self.url}/api/v1/projects/{self.project}/runs/{self.run_id}{tail}",
            params=params,
            headers=bearer(self.token),
            timeout=10,
        )
        assert r.status_code == 200, r.text
        return r.json()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    tmp = tmp_path_factory.mktemp("failstory-server")
    with ServerProcess.db(f"sqlite:///{tmp / 'store.db'}", tmp / "server.log") as srv:
        yield srv


def _run_job(srv: ServerProcess, tmp: Path, mode: str) -> Job:
    data = tmp / "data"
    server = srv.url
    env = srv.env(**FAST_ENV, OMP_NUM_THREADS="1")
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone",
         "--nproc-per-node=3", str(SCRIPT), str(data), mode],
        env=env, cwd=tmp, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert proc.returncode != 0, f"rank 1 failed: the job must fail\n{proc.stderr[-3000:]}"
    project = f"failures-{mode}"

    def ended() -> Any:
        r = srv.get(f"/api/v1/projects/{project}/runs", timeout=5)
        if r.status_code != 200:
            return None
        (run,) = r.json()["runs"]
        # A SIGKILLed rank is called crashed once its heartbeat is late too.
        return run["id"] if run["state"] == settled else None

    settled = "crashed" if mode == "kill" else "failed"
    run_id = wait_until(ended, timeout=60, every=0.2)
    wait_until(lambda: rankwise.Api(dir=data).run(run_id).state == settled, timeout=30)
    return Job(mode, project, run_id, data, server, proc.stdout + proc.stderr, str(srv.token))


@pytest.fixture(scope="module")
def raised(server: ServerProcess, tmp_path_factory: pytest.TempPathFactory) -> Job:
    return _run_job(server, tmp_path_factory.mktemp("failstory-raise"), "raise")


@pytest.fixture(scope="module")
def killed(server: ServerProcess, tmp_path_factory: pytest.TempPathFactory) -> Job:
    return _run_job(server, tmp_path_factory.mktemp("failstory-kill"), "kill")


def _show(job: Job) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "rankwise.cli", "show", job.run_id, "--dir", str(job.data)],
        env=subprocess_env(), cwd=REPO, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    return out.stdout


def _readers(job: Job) -> list[rankwise.RunInfo]:
    local = rankwise.Api(dir=job.data).run(job.run_id, project=job.project)
    remote = rankwise.Api(server=job.url, token=job.token).run(job.run_id, project=job.project)
    return [local, remote]


def test_a_raised_error_leads_ahead_of_the_collective_errors(raised: Job) -> None:
    for run in _readers(raised):
        first = run.first_failure
        assert first is not None, run
        assert (first.label, first.rank, first.node, first.state) == ("rank-1", 1, 0, "failed")
        assert (first.error_type, first.message) == ("RuntimeError", MESSAGE)
        # The others went after it: failed in the collective or stopped by torchrun.
        assert {t.label for t in first.then} == {"rank-0", "rank-2"}
        assert all(t.state in ("failed", "killed") for t in first.then)
        assert all(t.time is not None and first.time <= t.time for t in first.then)  # type: ignore[operator]
        # The primary's own error is a symptom, not the cause.
        primary = next(s for s in run.streams if s.label == "rank-0")
        assert primary.error_message != MESSAGE
    local, remote = _readers(raised)
    assert local.first_failure == remote.first_failure
    out = _show(raised)
    assert out.index("first    rank 1 failed: RuntimeError: " + MESSAGE) < out.index("config")
    assert "then     rank 0 " in out and "then     rank 2 " in out
    # Of the errors listed under the streams, rank 1's comes first.
    errors = out[out.index("streams") :]
    assert errors.index(f"rank-1 (incarnation 0) RuntimeError: {MESSAGE}") < errors.index(
        "rank-0 (incarnation 0)"
    )


def test_a_sigkilled_rank_leads_ahead_of_its_peers(killed: Job) -> None:
    for run in _readers(killed):
        streams = [(s.label, s.state, s.error_type) for s in run.streams]
        said = (streams, killed.stderr[-4000:])
        assert run.state == "crashed" and run.crashed == ["rank-1"], said
        first = run.first_failure
        assert first is not None
        assert (first.label, first.state, first.error_type) == ("rank-1", "crashed", None)
        assert {t.label for t in first.then} <= {"rank-0", "rank-2"}
    # Rank 1 uploaded only its first batch; a surviving sibling uploaded the rest.
    local, remote = _readers(killed)
    mine = {s.label: s for s in local.streams}
    theirs = {s.label: s for s in remote.streams}
    assert mine["rank-1"].last_step == 8
    got = (theirs["rank-1"].last_step, theirs["rank-1"].points)
    assert got == (8, mine["rank-1"].points), killed.stderr[-4000:]
    # No survivor may be left to upload: the server says so, with the command.
    hint = killed.get("")["unsynced"]
    assert hint["streams"] == ["rank-1"] and hint["hosts"]
    # ... naming the run's directory as rank 1 recorded it, not "<data dir>".
    run_dir = killed.data / killed.project / killed.run_id
    assert hint["command"] == f"rankwise sync {run_dir} --server {killed.url}"
    assert remote.unsynced_detail is not None and remote.unsynced_detail.command == hint["command"]
    assert remote.sync_hint == remote.unsynced_detail  # the earlier name still answers
    assert remote.unsynced is not None and "rankwise sync" in remote.unsynced
    assert local.unsynced is None  # read from the files: nothing to upload
    out = _show(killed)
    assert "state    crashed (rank-1)" in out
    assert "first    rank 1 crashed" in out


def test_a_sigkilled_rank_reads_crashed_as_soon_as_torchrun_exits(tmp_path: Path) -> None:
    """No server, a 30 s heartbeat: only the dead pid (same host, same pid namespace,
    start time checked) can tell at once. It used to read as running, rank 0's
    "Connection closed by peer" leading, until its heartbeat was 61 s late."""
    data = tmp_path / "data"
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone",
         "--nproc-per-node=3", str(SCRIPT), str(data), "sigkill"],
        env=subprocess_env(OMP_NUM_THREADS="1", RANKWISE_SILENT="1"), cwd=tmp_path,
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert proc.returncode != 0, proc.stderr[-3000:]
    (run_dir,) = (p for p in (data / "failures-sigkill").iterdir() if (p / "streams").is_dir())
    job = Job("sigkill", "failures-sigkill", run_dir.name, data, "", "", "")
    out = _show(job)  # at once: nothing waits for a heartbeat to be late
    assert "state    crashed (rank-1)" in out, out
    assert "first    rank 1 crashed" in out, out
    streams = out[out.index("\nstreams") :]
    (rank1,) = (line for line in streams.splitlines() if line.startswith("rank-1 "))
    assert " crashed " in rank1, rank1
    # The survivors saw it dead too and said so in their Finish records, for the readers
    # that cannot check its pid (a server, another host).
    # Under load, torchrun's SIGTERM may end one survivor before the other looks: it then
    # names that one too, which is harmless (a stream with its own Finish is never called
    # crashed for it). The killed rank is named by both.
    for label in ("rank-0", "rank-2"):
        (path,) = (run_dir / "streams").glob(f"{label}.*.rwlog")
        ends = [r for r in scan(path.read_bytes()).records if isinstance(r, R.Finish)]
        assert len(ends) == 1 and "rank-1" in ends[0].peers_gone, (label, ends)
        assert set(ends[0].peers_gone) <= {"rank-0", "rank-1", "rank-2"} - {label}, ends
    # `rankwise ui` on this host says the same as soon as it serves.
    with ServerProcess.ui(data, tmp_path / "ui.log") as ui:
        got = ui.get(f"/api/v1/projects/failures-sigkill/runs/{run_dir.name}", timeout=10).json()
    assert (got["state"], got["crashed"]) == ("crashed", ["rank-1"])
    assert got["first_failure"]["label"] == "rank-1"


def test_a_run_without_failure_has_none(tmp_path: Path) -> None:
    run = rankwise.init(project="ok", dir=tmp_path, system=False, console="off")
    run.log({"loss": 1.0})
    run.finish()
    assert rankwise.Api(dir=tmp_path).run(run.id).first_failure is None


def test_the_traceback_is_among_the_rank_s_stderr_lines(raised: Job) -> None:
    lines = raised.get("/console", stream="stderr", label="rank-1", limit=10_000)["lines"]
    # torch prints uncaught errors of a process group member as "[rank1]: <line>".
    texts = [re.sub(r"^\[rank\d+\]: ?", "", ln["text"]) for ln in lines]
    assert "Traceback (most recent call last):" in texts, texts
    assert texts.index("Traceback (most recent call last):") < texts.index(
        f"RuntimeError: {MESSAGE}"
    )
    assert any('raise RuntimeError(f"boom on rank 1 at step {step}")' in t for t in texts)


def test_a_stall_is_printed_on_the_stalled_rank_s_terminal(raised: Job) -> None:
    warned = [ln for ln in raised.stderr.splitlines() if "has not logged for" in ln]
    assert warned, raised.stderr[-3000:]
    assert all("rankwise: rank 1 has not logged for" in ln for ln in warned)
    assert "stack saved" in warned[0] and "failure_job.py" in warned[0]
    assert "rankwise: rank 1 is logging again after " in raised.stderr
    stalls = raised.get("/stalls", label="rank-1")["stalls"]  # newest first
    assert [s["cleared"] for s in stalls] == [True, False]
    assert stalls[1]["idle_seconds"] >= 0.4
    assert stalls[1]["step"] == 2  # where a chart by step marks it (STALL_AT)


# -- the dashboard -------------------------------------------------------------------------


@pytest.mark.browser
def test_the_banner_leads_with_the_first_failure(
    raised: Job, killed: Job, browser: Any, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    page = Page(browser, height=900)
    browser_login(page.ctx, raised.url, raised.token)
    try:
        p = page.page
        p.goto(f"{raised.url}/#/p/{raised.project}/r/{raised.run_id}")
        banner = p.locator("[data-first-failure]")
        expect(banner).to_be_visible()
        expect(banner.locator("[data-cause]")).to_contain_text("rank 1 failed")
        expect(banner.locator("[data-cause]")).to_contain_text(MESSAGE)
        then = banner.locator("[data-then] li")
        expect(then).to_have_count(2)
        assert {then.nth(i).get_attribute("data-label") for i in range(2)} == {"rank-0", "rank-2"}
        # Failed and crashed ranks look different in the health strip, without hovering.
        cell = p.locator('[data-health-strip] [data-label="rank-1"]')
        expect(cell).to_have_attribute("data-state", "failed")
        failed_colour = cell.evaluate("e => getComputedStyle(e).backgroundColor")
        p.wait_for_timeout(300)
        # Rank 1's stall, cleared before it failed, is marked on the charts' time line.
        expect(p.locator("[data-stall-key]")).to_contain_text("rank 1 stalled")
        expect(p.locator('.chart-canvas[data-stall-marks="1"]').first).to_be_visible()
        shot = tmp_path / "failed-run.png"
        p.screenshot(path=str(shot))
        if os.environ.get("RANKWISE_UPDATE_DOCS") == "1":
            DOCS_SHOT.write_bytes(shot.read_bytes())

        # The crashed run: the cause is rank 1's death, not rank 0's error.
        p.goto(f"{killed.url}/#/p/{killed.project}/r/{killed.run_id}")
        expect(p.locator("[data-first-failure] [data-cause]")).to_contain_text("rank 1 crashed")
        expect(p.locator("[data-unsynced]")).to_contain_text(f"--server {killed.url}")
        crashed = p.locator('[data-health-strip] [data-label="rank-1"]')
        expect(crashed).to_have_attribute("data-state", "crashed")
        assert crashed.evaluate("e => getComputedStyle(e).backgroundColor") != failed_colour

        # The runs table names the cause in the state cell.
        p.goto(f"{killed.url}/#/p/{killed.project}")
        expect(p.locator("[data-first-failure-cell]").first).to_contain_text("rank-1")
        page.check()
    finally:
        page.close()
