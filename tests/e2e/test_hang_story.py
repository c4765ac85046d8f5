"""A hung job and a diverging one, end to end (4-rank gloo torchrun jobs, real servers).

``scripts/hang_job.py``: rank 2 goes astray (sleeps) while ranks 0, 1 and 3 wait in the
all_reduce it never joins. The job uploads to a real ``rankwise server`` (uvicorn,
SQLite). While it hangs, the hang report must name rank 2 as the odd one out — and, with
the flight recorder, the collective it never joined — within the stall timeout plus
10 s, and say the same in ``Api(dir=)``, ``Api(server=)``, ``GET .../hang``, ``rankwise
show`` and the run page (Chromium). With the flight recorder off it must still name rank
2, from the stacks. Each variant's job is set up once (module fixtures) and released at
the end, when its report must clear. In the ``nan`` job rank 3's loss turns NaN first:
both readers, on SQLite and PostgreSQL, must name rank 3 and its step.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import rankwise
from rankwise.hang import HangReport
from rankwise.sdk.sync import sync
from tests.helpers.browser import launch_browser
from tests.helpers.runs import FAST_ENV
from tests.helpers.servers import ServerProcess, browser_login, postgres_dsn
from tests.helpers.wait import wait_until

SCRIPT = Path(__file__).parents[1] / "scripts" / "hang_job.py"
PROJECT = "hang"
STALL = 2.0  # hang_job.STALL

pytestmark = pytest.mark.torchrun


def line_of(marker: str) -> int:
    lines = SCRIPT.read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if marker in line)


WAIT = f"all_reduce at hang_job.py:{line_of('# WAIT')}"
STRAY = f"sleep at hang_job.py:{line_of('# STRAY')}"


def torchrun(data: Path, mode: str, env: dict[str, str], cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "torch.distributed.run", "--standalone",
         "--nproc-per-node=4", str(SCRIPT), str(data), mode],
        env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip


class Hung:
    """A hung job and what was seen of it: the report's first sight in each reader."""

    def __init__(self, server: ServerProcess, data: Path, run_id: str, took: dict[str, float]):
        self.server, self.data, self.run_id, self.took = server, data, run_id, took

    def local(self) -> HangReport | None:
        return rankwise.Api(self.data).run(self.run_id, project=PROJECT).hang

    def remote(self) -> HangReport | None:
        api = rankwise.Api(server=self.server.url, token=self.server.token)
        return api.run(self.run_id, project=PROJECT).hang

    def get(self, tail: str) -> Any:
        r = self.server.get(f"/api/v1/projects/{PROJECT}/runs/{self.run_id}{tail}", timeout=10)
        assert r.status_code == 200, r.text
        return r.json()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    tmp = tmp_path_factory.mktemp("hang-server")
    srv = ServerProcess.db(f"sqlite:///{tmp / 'store.db'}", tmp / "server.log")
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


def _hang(server: ServerProcess, tmp: Path, mode: str) -> Iterator[Hung]:
    """Start the job, wait for each reader's report to name rank 2, yield; then release
    rank 2 and check the report clears as the job ends."""
    data = tmp / "data"
    env = server.env(**FAST_ENV, OMP_NUM_THREADS="1")
    proc = torchrun(data, mode, env, tmp)
    fr = mode == "hang"
    try:
        stray = data / f"stray-{mode}"

        def complete(report: HangReport | None) -> bool:
            return (
                report is not None
                and report.odd == ["rank-2"]
                and len(report.waiting.ranks if report.waiting else []) == 3
                # rank 2's own stall has arrived too (before it, the flight recorder
                # alone already names it, as a rank still logging)
                and any(r.label == "rank-2" for g in report.elsewhere for r in g.ranks)
                and (report.collective is not None) == fr
            )

        def run_id() -> str | None:
            if proc.poll() is not None:
                pytest.fail(f"the job ended early:\n{proc.communicate()[0]}")
            runs = rankwise.Api(data).runs(project=PROJECT) if data.exists() else []
            return runs[0].id if runs else None

        rid = wait_until(run_id, timeout=120, every=0.2)
        hung = Hung(server, data, rid, {})
        for name, read in (("local", hung.local), ("server", hung.remote)):
            wait_until(lambda read=read: complete(read()), timeout=150, every=0.2)  # type: ignore[misc]
            hung.took[name] = time.time() - float(stray.read_text())
        yield hung
        # Release rank 2: it joins the all_reduce, every rank logs again and finishes.
        (data / "release").write_text("go")
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0, out
        assert hung.local() is None
        wait_until(lambda: hung.remote() is None, timeout=30, every=0.2)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


@pytest.fixture(scope="module")
def hung(server: ServerProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hung]:
    yield from _hang(server, tmp_path_factory.mktemp("hang-fr"), "hang")


@pytest.fixture(scope="module")
def hung_nofr(server: ServerProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hung]:
    yield from _hang(server, tmp_path_factory.mktemp("hang-nofr"), "hang-nofr")


def test_the_report_names_rank_2_and_the_collective_it_never_joined(hung: Hung) -> None:
    # Seen within the stall timeout plus 10 s of rank 2 going astray, in both readers.
    assert max(hung.took.values()) <= STALL + 10, hung.took
    report = hung.local()
    assert report is not None and report.collective is not None
    assert report.waiting is not None and report.waiting.where == WAIT
    assert [r.rank for r in report.waiting.ranks] == [0, 1, 3]
    assert [g.where for g in report.elsewhere] == [STRAY]
    c = report.collective
    assert c.op == "all_reduce" and c.entered == [0, 1, 3]
    assert [(m.rank, m.last_seq) for m in c.missing] == [(2, c.seq - 1)]
    assert report.message.startswith(f"rank 2 is in {STRAY}")
    assert f"collective #{c.seq} (all_reduce, 1 tensor of [4] float)" in "\n".join(report.lines)
    # The server tells the same story, in RunInfo.hang and GET .../hang.
    assert hung.remote() == report
    got = hung.get("/hang")["hang"]
    assert got["odd"] == ["rank-2"] and got["collective"]["entered"] == [0, 1, 3]
    assert got["message"] == report.message


def test_rankwise_ui_tells_the_same_hang(hung: Hung) -> None:
    with ServerProcess.ui(hung.data, hung.data.parent / "ui.log") as ui:
        path = f"/api/v1/projects/{PROJECT}/runs/{hung.run_id}/hang"

        def told() -> Any:
            r = httpx.get(ui.url + path, timeout=10)
            got = r.json()["hang"] if r.status_code == 200 else None
            return got if got and len(got["waiting"]["ranks"]) == 3 else None

        got = wait_until(told, timeout=60, every=0.2)
    local = hung.local()
    assert local is not None
    assert got["message"] == local.message and got["odd"] == ["rank-2"]
    assert got["collective"]["entered"] == [0, 1, 3]


def test_rankwise_show_leads_with_the_hang_report(hung: Hung) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "rankwise.cli", "show", hung.run_id, "--dir", str(hung.data),
         "--project", PROJECT],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[1].startswith(f"hang     rank 2 is in {STRAY}")
    assert any("collective #" in x and "rank 2's last is #" in x for x in lines[2:6])
    assert lines.index(next(x for x in lines if x.startswith("state"))) > 2


def test_without_the_flight_recorder_the_stacks_still_name_rank_2(hung_nofr: Hung) -> None:
    assert max(hung_nofr.took.values()) <= STALL + 10, hung_nofr.took
    report = hung_nofr.local()
    assert report is not None and report.collective is None
    assert report.odd == ["rank-2"] and report.message.startswith(f"rank 2 is in {STRAY}")
    assert report.waiting is not None and report.waiting.where == WAIT
    assert hung_nofr.remote() == report


def test_the_run_page_banner_shows_the_hang_report(hung: Hung) -> None:
    from playwright.sync_api import expect

    shots = hung.data.parent / "screenshots"
    shots.mkdir()
    errors: list[str] = []
    with launch_browser() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        assert hung.server.token
        browser_login(page.context, hung.server.url, hung.server.token)
        page.set_default_timeout(20_000)
        page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
        page.goto(f"{hung.server.url}/#/p/{PROJECT}/r/{hung.run_id}")
        banner = page.locator("[data-hang-report]")
        expect(banner).to_contain_text(f"rank 2 is in {STRAY}")
        expect(banner).to_contain_text("entered by ranks 0, 1, 3")
        expect(banner.locator('[data-odd="rank-2"]')).to_have_count(1)
        # The banner stands above the health strip.
        strip = page.locator("[data-health-strip]")
        expect(strip).to_be_visible()
        b, s = banner.bounding_box(), strip.bounding_box()
        assert b is not None and s is not None and b["y"] < s["y"]
        page.screenshot(path=str(shots / "hang-banner.png"), full_page=True)
        # A rank in the report links to its stacks.
        banner.locator('[data-odd="rank-2"] button').first.click()
        expect(page.locator("[data-hang-stack]")).to_contain_text("hang_job.py")
    assert not errors, errors


# -- divergence -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def diverged(server: ServerProcess, tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("nan")
    data = tmp / "data"
    proc = torchrun(data, "nan", server.env(**FAST_ENV, OMP_NUM_THREADS="1"), tmp)
    out, _ = proc.communicate(timeout=240)
    assert proc.returncode == 0, out
    return data


def _says_rank_3_first(run: rankwise.RunInfo) -> None:
    firsts = run.first_nonfinite["train/loss"]
    assert (firsts[0].rank, firsts[0].step, firsts[0].value) == (3, 7, "NaN")
    assert sorted((f.rank, f.step) for f in firsts[1:]) == [(0, 8), (1, 8), (2, 8)]
    assert "lr" not in run.first_nonfinite
    (d,) = run.divergence
    assert d.message == "train/loss: rank 3 NaN at step 7; ranks 0–2 followed at 8"


def test_the_rank_that_went_nan_first_is_named_by_both_readers(
    diverged: Path, server: ServerProcess
) -> None:
    (local,) = rankwise.Api(diverged).runs(project=PROJECT)
    _says_rank_3_first(local)
    remote = wait_until(
        lambda: next(
            (r for r in rankwise.Api(server=server.url, token=server.token).runs(project=PROJECT)
             if r.id == local.id and r.state == "finished"),
            None,
        ),
        timeout=60,
    )  # fmt: skip
    _says_rank_3_first(remote)
    assert remote.first_nonfinite == local.first_nonfinite
    out = subprocess.run(
        [sys.executable, "-m", "rankwise.cli", "show", local.id, "--dir", str(diverged),
         "--project", PROJECT],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert "diverged train/loss: rank 3 NaN at step 7; ranks 0–2 followed at 8" in out.stdout


def test_postgresql_keeps_the_first_nonfinite_at_ingest(diverged: Path, tmp_path: Path) -> None:
    for dsn in postgres_dsn():
        with ServerProcess.db(dsn, tmp_path / "pg.log") as pg:
            report = sync(diverged, pg.url, progress=False, token=pg.token)
            assert not report.failed
            (run,) = rankwise.Api(server=pg.url, token=pg.token).runs(project=PROJECT)
            _says_rank_3_first(run)


def test_the_dashboard_marks_the_rank_that_went_nan_first(
    diverged: Path, server: ServerProcess
) -> None:
    from playwright.sync_api import expect

    (run,) = rankwise.Api(diverged).runs(project=PROJECT)
    errors: list[str] = []
    with launch_browser() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        assert server.token
        browser_login(page.context, server.url, server.token)
        page.set_default_timeout(20_000)
        page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
        # The runs table's state cell, the run's state line, the banner, the health strip.
        page.goto(f"{server.url}/#/p/{PROJECT}")
        row = page.locator(f'tr[data-run="{run.id}"]')
        expect(row.locator("[data-nonfinite-cell]")).to_have_text("NaN on rank 3 from step 7")
        page.goto(f"{server.url}/#/p/{PROJECT}/r/{run.id}")
        expect(page.locator("[data-nonfinite-note]")).to_have_text("NaN on rank 3 from step 7")
        expect(page.locator("[data-divergence]")).to_contain_text(
            "train/loss: rank 3 NaN at step 7; ranks 0–2 followed at 8"
        )
        strip = page.locator("[data-health-strip]")
        expect(strip.locator('[data-rank="3"]')).to_have_attribute(
            "data-nonfinite", "NaN from step 7 (train/loss)"
        )
        expect(strip.locator('[data-rank="0"]')).to_have_attribute(
            "data-nonfinite", "NaN from step 8 (train/loss)"
        )
        # The chart marks the first rank's value; lr never went non-finite.
        loss = page.locator('.chart-card[data-metric="train/loss"] .chart-canvas')
        expect(loss).to_have_attribute("data-first-nonfinite", "NaN on rank 3 at step 7")
        lr = page.locator('.chart-card[data-metric="lr"] .chart-canvas')
        expect(lr).to_be_visible()
        expect(lr).not_to_have_attribute("data-first-nonfinite", re.compile(".+"))
        page.screenshot(path=str(diverged.parent / "nan-run.png"), full_page=True)
    assert not errors, errors
