"""The job's story told right: a live shared run's partial step and its summaries.

A real torchrun job (3 CPU ranks, gloo) holds its last step half-reached while the test
reads it through ``Api(dir=)`` and a real ``rankwise ui`` server (uvicorn), then lets it
finish and reads again.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import httpx
import msgspec
import pytest

import rankwise
from tests.helpers.browser import Page, launch_browser
from tests.helpers.jobs import SCRIPTS, job_env, torchrun
from tests.helpers.servers import ServerProcess
from tests.helpers.wait import wait_until

STEPS = 5
DOCS_SHOT = Path(__file__).parents[2] / "docs" / "img" / "live-shared-run.png"


def _start_job(tmp_path: Path) -> tuple[subprocess.Popen[str], Path, Path]:
    data, sync = tmp_path / "data", tmp_path / "sync"
    sync.mkdir()
    cmd = [
        *torchrun(), "--standalone", "--nproc-per-node=3", str(SCRIPTS / "story_job.py"),
        "--dir", str(data), "--sync", str(sync), "--steps", str(STEPS),
    ]  # fmt: skip
    proc = subprocess.Popen(
        cmd, env=job_env(), cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True,
    )  # fmt: skip
    return proc, data, sync


def _check_page(url: str) -> None:
    """What the run page shows of the held job, in headless Chromium."""
    with launch_browser() as browser:
        p = Page(browser, width=1280, height=760)
        page = p.page
        page.goto(f"{url}/#/p/story/r/job")
        card = page.locator('.chart-card[data-metric="score"]')
        page.locator('.chart-card[data-metric="score"][data-state="drawn"]').wait_for()
        readout = card.locator(".readout")
        # The header quotes step 4, the last one all three ranks reached, as weighted.
        wait_until(lambda: "partial" in readout.inner_text(), timeout=10)
        text = readout.inner_text()
        assert "weighted mean 17.333 at step 4" in text and "· 1 partial" in text, text
        assert "1,000" not in text and "1,000.5" not in text
        card.get_by_role("button", name="weighted mean", exact=True).click()
        wait_until(lambda: "unweighted mean 14 at step 4" in readout.inner_text(), timeout=5)
        card.get_by_role("button", name="unweighted mean", exact=True).click()
        assert page.locator("[data-ranks]").inner_text() == "3 × 1"
        if os.environ.get("RANKWISE_UPDATE_DOCS") == "1":
            page.locator('.chart-card[data-metric="train/loss"][data-state="drawn"]').wait_for()
            page.screenshot(path=DOCS_SHOT)
        page.get_by_role("tab", name="Config & summary").click()
        cross = page.locator('[data-cross="score"]')
        assert cross.inner_text().startswith("17.333"), cross.inner_text()
        assert "torchrun" in page.locator(".env-table").inner_text()
        table = page.locator(".rank-summary")
        assert "rank 2" in table.inner_text()
        assert "summary (primary rank)" in page.inner_text("main").lower()
        p.check()
        p.close()


def _check_ended_page(url: str) -> None:
    """The ended run keeps its partial tail marked, as a live run does, in Chromium."""
    with launch_browser() as browser:
        p = Page(browser, width=1280, height=760)
        page = p.page
        page.goto(f"{url}/#/p/story/r/job")
        page.locator('.chart-card[data-metric="score"][data-state="drawn"]').wait_for()
        readout = page.locator('.chart-card[data-metric="score"] .readout')
        text = readout.inner_text()
        assert "weighted mean 17.333 at step 4" in text, text
        assert "· 1 partial: 2 of 3 ranks" in text and "1,000" not in text, text
        # Hovering the tail gives its value, as partial, of 2 of the 3 ranks.
        over = page.locator('.chart-card[data-metric="score"] .u-over')
        over.scroll_into_view_if_needed()
        box = over.bounding_box()
        assert box is not None
        y = box["y"] + box["height"] / 2
        page.mouse.move(box["x"] + box["width"] / 2, y)
        page.mouse.move(box["x"] + box["width"] - 1, y, steps=5)
        wait_until(lambda: readout.inner_text().startswith("step 5"), timeout=10)
        hovered = readout.inner_text()
        assert "partial: 2 of 3 ranks" in hovered and "1,000" in hovered, hovered
        p.check()
        p.close()


@pytest.mark.torchrun
@pytest.mark.browser
def test_live_shared_run_partial_step_and_summaries(tmp_path: Path) -> None:
    proc, data, sync = _start_job(tmp_path)
    try:
        wait_until(lambda: len(list(sync.glob("READY.*"))) == 3 or proc.poll() is not None, 90)
        assert proc.poll() is None, proc.communicate()[0]
        with ServerProcess.ui(data, tmp_path / "ui.log") as ui:
            base = f"{ui.url}/api/v1/projects/story/runs/job"

            def band() -> dict:
                r = httpx.get(f"{base}/series", params={"key": "score"}).json()
                return r["band"]

            b = wait_until(
                lambda: (lambda b: b if b and len(b["x"]) == STEPS + 1 else None)(band())
            )
            # Step 5 holds ranks 0 and 1 only: partial, and not the run's last complete step.
            assert b["n"][-2:] == [3, 2] and b["partial"] == [False] * STEPS + [True]
            assert b["complete_step"] == STEPS - 1
            assert b["nw"][-2] == 3  # every value carried a weight: wmean is weighted
            assert b["wmean"][-2] == pytest.approx((4 * 1 + 14 * 2 + 24 * 3) / 6)
            remote = httpx.get(base).json()
            cross = remote["summary_cross_rank"]["score"]
            assert cross["step"] == STEPS - 1 and cross["n"] == 3
            assert cross["mean"] == pytest.approx(14.0)
            assert cross["wmean"] == pytest.approx(104 / 6)
            assert remote["summary"]["who"] == "rank 0"
            rank2 = remote["summary_ranks"]["rank-2"]
            assert (rank2["score"], rank2["who"]) == (24.0, "rank 2")
            assert remote["summary_ranks"]["rank-1"]["score"] == 1001.0
            assert (remote["run_ranks"], remote["run_nodes"]) == (3, 1)
            env = remote["environment"]
            assert env["command"][0].endswith("story_job.py") and env["launcher"] == "torchrun"
            assert env["python"] == platform.python_version() and env["rankwise_version"]
            _check_page(ui.url)
        local = rankwise.Api(dir=data).run("job", project="story")
        assert local.environment == env and (local.run_ranks, local.run_nodes) == (3, 1)
        assert msgspec.structs.asdict(local.summary_cross_rank["score"]) == cross
        assert local.summary_ranks == remote["summary_ranks"]
        (sync / "GO").touch()
        out, _ = proc.communicate(timeout=90)
        assert proc.returncode == 0, out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    # Finished, its ranks ended at steps 5, 5 and 4: step 5 stays partial for good (it
    # was quoted as the job's mean, 1000.5 of two ranks), so step 4 is what is quoted.
    run = rankwise.Api(dir=data).run("job", project="story")
    last = run.summary_cross_rank["score"]
    assert (last["step"], last["n"], last["mean"]) == (STEPS - 1, 3, 14.0)
    assert last["wmean"] == pytest.approx(104 / 6)
    with ServerProcess.ui(data, tmp_path / "ended.log") as ui:
        ended = httpx.get(f"{ui.url}/api/v1/projects/story/runs/job").json()
        assert ended["state"] == "finished"
        assert ended["summary_cross_rank"]["score"] == msgspec.structs.asdict(last)
        b = httpx.get(f"{ui.url}/api/v1/projects/story/runs/job/series",
                      params={"key": "score"}).json()["band"]  # fmt: skip
        assert b["complete_step"] == STEPS - 1 and b["partial"] == [False] * STEPS + [True]
        _check_ended_page(ui.url)
    shown = subprocess.run(
        [sys.executable, "-m", "rankwise.cli", "show", "job",
         "--dir", str(data), "--project", "story"],
        env=job_env(), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert "summary (primary rank)" in shown.stdout
    assert "cross-rank line, last complete step" in shown.stdout
    assert "score" in shown.stdout and "at step 4, 3 values" in shown.stdout
    assert "rank-2 24" in shown.stdout
    assert "command  " in shown.stdout and "story_job.py --dir" in shown.stdout
    assert (
        "launcher torchrun" in shown.stdout
        and "ranks    3 on 1 node(s), mode shared: every rank" in shown.stdout
    )


VALUES_JOB = """
import math, time, rankwise
run = rankwise.init(project="vis", id="values", settings={"flush_interval": 0.02,
                    "system_interval": 0.25})
for step in range(6):
    loss = {2: math.nan, 5: math.inf}.get(step, 1.0 / (step + 1))
    run.log({"loss": loss, "huge": 2.0**70 * (1 + step)}, step=step)
    if step == 3:
        run.log({"once": 0.5}, step=step)
    time.sleep(0.3)
run.finish()
"""


@pytest.mark.browser
def test_every_value_visible(tmp_path: Path) -> None:
    """A metric logged once, NaN and ±Inf, 2**70 and the System tab, in Chromium."""

    data = tmp_path / "data"
    job = subprocess.run(
        [sys.executable, "-c", VALUES_JOB], env=job_env(RANKWISE_DIR=str(data)),
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert job.returncode == 0, job.stderr
    with ServerProcess.ui(data, tmp_path / "ui.log") as ui, launch_browser() as browser:
        p = Page(browser, width=1280, height=900)
        page = p.page
        page.goto(f"{ui.url}/#/p/vis/r/values")

        def canvas(metric: str):
            page.locator(f'.chart-card[data-metric="{metric}"][data-state="drawn"]').wait_for()
            return page.locator(f'.chart-card[data-metric="{metric}"] .chart-canvas')

        # Logged once: drawn as a dot, and the dot is really on the canvas.
        once = canvas("once")
        dot = once.get_attribute("data-dots") or ""
        assert len(dot.split()) == 1, dot
        x, y = (int(v) for v in dot.split(","))
        lit = page.evaluate(
            """([el, x, y]) => {
                 const c = el.querySelector('canvas'), r = devicePixelRatio;
                 const px = [Math.round(x * r), Math.round(y * r)];
                 return c.getContext('2d').getImageData(px[0], px[1], 1, 1).data[3]; }""",
            [once.element_handle(), x, y],
        )  # fmt: skip
        assert lit > 0, "no dot drawn where the lone value is"
        # NaN and +Inf: marked at their steps, and the header quotes the last one as ∞.
        loss = canvas("loss")
        assert loss.get_attribute("data-marks") == "2:NaN 5:∞"
        readout = page.locator('.chart-card[data-metric="loss"] .readout').inner_text()
        assert readout.startswith("∞ at step 5"), readout
        # 2**70: short, distinct tick labels.
        ticks = json.loads(canvas("huge").get_attribute("data-yticks") or "[]")
        assert ticks and len(set(ticks)) == len(ticks) and all(len(t) <= 8 for t in ticks), ticks
        assert all("e21" in t or "e20" in t or t == "0" for t in ticks), ticks
        # The summary says ∞, not a blank.
        page.get_by_role("tab", name="Config & summary").click()
        row = page.locator(".kv-table tr", has=page.locator("th", has_text="loss"))
        assert row.first.locator("td").inner_text() == "∞"
        # Logs: the "Jump to" example is this run's start, not a fixed "13:04:05".
        created = httpx.get(f"{ui.url}/api/v1/projects/vis/runs/values").json()["created"]
        page.get_by_role("tab", name="Logs").click()
        jump = page.get_by_label("Jump to a time")
        start = datetime.fromtimestamp(created)
        assert jump.get_attribute("placeholder") == f"Jump to {start:%H:%M:%S}"
        # System tab: distinct y ticks, room for the two-line time labels. A short window:
        # the charts below it load too (a full-page capture showed them "loading…").
        page.set_viewport_size({"width": 1280, "height": 360})
        page.get_by_role("tab", name="System").click()
        cards = page.locator(".system-chart")
        cards.first.wait_for()
        last = cards.nth(cards.count() - 1).bounding_box()
        assert last is not None and last["y"] > 360 + 300 + 100, last  # far below the view
        drawn = page.locator(".system-chart .chart-canvas[data-yticks]")
        wait_until(lambda: drawn.count() == cards.count(), timeout=15)
        assert "loading…" not in page.locator(".system-tab").inner_text()
        page.set_viewport_size({"width": 1280, "height": 900})
        charts = page.locator(".system-chart .chart-canvas[data-yticks]")
        charts.first.wait_for()
        for i in range(charts.count()):
            c = charts.nth(i)
            yt = json.loads(c.get_attribute("data-yticks") or "[]")
            assert len(set(yt)) == len(yt), yt
            xt = json.loads(c.get_attribute("data-xticks") or "[]")
            if any("\\n" in t for t in xt):
                assert float(c.get_attribute("data-xsize") or 0) >= 40
        p.check()
        p.close()
    shown = subprocess.run(
        [sys.executable, "-m", "rankwise.cli", "show", "values", "--dir", str(data)],
        env=job_env(), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert [line.split() for line in shown.stdout.splitlines() if line.startswith("  loss")] == [
        ["loss", "∞"]
    ]
