"""Rank health end to end: a real torchrun job (4 CPU processes, gloo) uploads to a real
``rankwise server`` (uvicorn in a subprocess, SQLite), and the HTTP API tells its story.

The job (``scripts/health_job.py``) has a straggler (rank 1), a hang in
``all_reduce`` (rank 2) and a SIGKILLed rank (rank 3); every rank prints and samples the
system. The health endpoint must name the slow, the stalled (with where) and the crashed
rank; the console endpoint must return the captured lines with their labels; the system
endpoint must return node series. The same run is then opened in Debian's Chromium: the
run page shows the health strip and the stall message, the Logs tab the lines and the
System tab a chart (screenshots in the test's tmp dir).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.browser import launch_browser
from tests.helpers.runs import FAST_ENV
from tests.helpers.servers import ServerProcess, browser_login, subprocess_env
from tests.helpers.wait import wait_until

SCRIPT = Path(__file__).parents[1] / "scripts" / "health_job.py"
PROJECT = "telemetry"

pytestmark = pytest.mark.torchrun


def line_of(marker: str) -> int:
    lines = SCRIPT.read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if marker in line)


class Job:
    def __init__(self, server: ServerProcess, run_id: str, data: Path, tmp: Path) -> None:
        self.url, self.run_id, self.data, self.tmp = server.url, run_id, data, tmp
        self.server = server

    def get(self, tail: str, **params: Any) -> Any:
        r = self.server.get(
            f"/api/v1/projects/{PROJECT}/runs/{self.run_id}{tail}", params=params, timeout=10
        )
        assert r.status_code == 200, r.text
        return r.json()


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Job]:
    tmp = tmp_path_factory.mktemp("health-e2e")
    data = tmp / "data"
    server = ServerProcess.db(f"sqlite:///{tmp / 'store.db'}", tmp / "server.log")
    server.start()
    try:
        env = subprocess_env(**FAST_ENV, RANKWISE_SERVER=server.url, OMP_NUM_THREADS="1")
        proc = subprocess.run(
            [sys.executable, "-m", "torch.distributed.run", "--standalone",
             "--nproc-per-node=4", str(SCRIPT), str(data), "telemetry"],
            env=env, cwd=tmp, capture_output=True, text=True, timeout=240,
        )  # fmt: skip
        assert proc.returncode != 0, "rank 3 was SIGKILLed: the job must fail"

        def settled() -> Any:
            runs = server.get(f"/api/v1/projects/{PROJECT}/runs", timeout=5).json()
            (run,) = runs["runs"]
            return run["id"] if run["state"] == "crashed" else None

        run_id = wait_until(settled, timeout=60, every=0.2)
        yield Job(server, run_id, data, tmp)
    finally:
        server.stop()


def test_health_names_the_slow_the_stalled_and_the_crashed_rank(job: Job) -> None:
    run = job.get("")
    assert run["crashed"] == ["rank-3"] and run["world_size"] == 4
    health = job.get("/health", stacks="true")
    assert health["state"] == "crashed" and health["crashed"] == ["rank-3"]
    ranks = {r["label"]: r for r in health["ranks"]}
    assert list(ranks) == ["rank-0", "rank-1", "rank-2", "rank-3"]
    assert ranks["rank-3"]["state"] == "crashed"
    assert ranks["rank-0"]["state"] == ranks["rank-1"]["state"] == "killed"
    # The straggler: flagged slow, behind the median, while rank 0 is neither.
    assert ranks["rank-1"]["slow"] and not ranks["rank-0"]["slow"]
    assert ranks["rank-1"]["lag_steps"] > 0 > ranks["rank-0"]["lag_steps"]
    assert ranks["rank-0"]["step_rate"] > 2 * ranks["rank-1"]["step_rate"]
    # The hang: stalled in all_reduce on the line of the call, with its stacks.
    hang = ranks["rank-2"]
    where = f"all_reduce at health_job.py:{line_of('# HANG')}"
    assert hang["stalled"] and hang["stall"]["where"] == where
    assert hang["message"].startswith("rank 2 stalled for ") and hang["message"].endswith(where)
    assert any("health_job.py" in s for s in hang["stall"]["stacks"].values())
    assert not ranks["rank-0"]["stalled"] and ranks["rank-0"]["stall"] is None
    (event, *_) = job.get("/stalls", label="rank-2")["stalls"]
    assert event["where"] == where and event["idle_seconds"] >= 1.0


def test_console_returns_the_captured_lines_with_labels(job: Job) -> None:
    page = job.get("/console", limit=10_000)
    lines = page["lines"]
    assert page["total"] == len(lines) > 20 and page["offset"] == 0
    assert [ln["time"] for ln in lines] == sorted(ln["time"] for ln in lines)
    by_label: dict[str, list[str]] = {}
    for ln in lines:
        assert ln["rank"] == int(ln["label"].split("-")[1])
        by_label.setdefault(ln["label"], []).append(ln["text"])
    assert set(by_label) == {"rank-0", "rank-1", "rank-2", "rank-3"}

    def stdout(label: str) -> list[str]:
        return [ln["text"] for ln in lines if ln["label"] == label and ln["stream"] == "stdout"]

    # Rank 2 printed five steps, then hung in all_reduce; rank 0 kept going.
    assert stdout("rank-2") == [f"rank 2 step {s} loss {1 / (s + 1):.4f}" for s in range(5)]
    assert stdout("rank-0")[:50] == [f"rank 0 step {s} loss {1 / (s + 1):.4f}" for s in range(50)]
    errs = job.get("/console", stream="stderr", label="rank-0", limit=10_000)["lines"]
    assert errs and all(ln["stream"] == "stderr" and ln["label"] == "rank-0" for ln in errs)
    assert errs[0]["text"] == "\x1b[33mWARNING rank 0 step 0: <slow> & steady"  # ANSI kept
    found = job.get("/console", q="rank 1 STEP 7 ")["lines"]
    assert [(ln["label"], ln["text"]) for ln in found] == [("rank-1", "rank 1 step 7 loss 0.1250")]


def test_system_returns_node_series(job: Job) -> None:
    keys = job.get("/system")["keys"]
    assert "node/cpu_percent" in keys and "node/mem_used_bytes" in keys
    assert "proc/rss_bytes" in keys
    node = job.get("/system/series", key="node/mem_used_bytes")["series"]
    # One sampler per node: the single node of this job, from local rank 0.
    assert [(s["name"], s["label"], s["node"]) for s in node] == [("node 0", "rank-0", 0)]
    assert len(node[0]["x"]) >= 3 and all(v > 0 for v in node[0]["y"])
    proc = job.get("/system/series", key="proc/rss_bytes")["series"]
    assert [s["name"] for s in proc] == ["rank 0", "rank 1", "rank 2", "rank 3"]


# -- the dashboard ---------------------------------------------------------------------------


@pytest.mark.browser
def test_run_page_shows_rank_health_logs_and_system(job: Job) -> None:
    from playwright.sync_api import expect

    shots = job.tmp / "screenshots"
    shots.mkdir()
    errors: list[str] = []
    with launch_browser() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        assert job.server.token
        browser_login(page.context, job.url, job.server.token)
        page.set_default_timeout(20_000)
        page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.goto(f"{job.url}/#/p/{PROJECT}/r/{job.run_id}")

        strip = page.locator("[data-health-strip]")
        expect(strip.locator("[data-rank]")).to_have_count(4)
        expect(strip.locator('[data-rank="2"]')).to_have_attribute("data-state", "stalled")
        expect(strip.locator('[data-rank="3"]')).to_have_attribute("data-state", "crashed")
        expect(strip.locator('[data-rank="1"]')).to_have_attribute("data-slow", "true")
        where = f"all_reduce at health_job.py:{line_of('# HANG')}"
        banner = page.locator("[data-stall-banner]")
        expect(banner).to_contain_text("rank 2 stalled for")
        expect(banner).to_contain_text(where)
        banner.get_by_role("button", name="Show stacks").click()
        expect(page.locator("[data-stall-stacks]")).to_contain_text("health_job.py")
        page.screenshot(path=str(shots / "run-health.png"), full_page=True)

        page.get_by_role("tab", name="Logs").click()
        logs = page.locator("[data-log-line]")
        expect(logs.first).to_be_visible()
        expect(page.locator("[data-log-total]")).not_to_have_text("0")
        page.get_by_placeholder("Search the logs").fill("rank 1 step 7 ")
        expect(logs).to_have_count(1)
        expect(logs.first).to_contain_text("rank 1 step 7 loss 0.1250")
        page.screenshot(path=str(shots / "run-logs.png"), full_page=True)

        # By keyboard: after a full-page screenshot the page settles back to the viewport,
        # and on a page as tall as this one (the hang report's banner) a click can land on
        # what moved under the pointer.
        system = page.get_by_role("tab", name="System")
        system.focus()
        page.keyboard.press("Enter")
        expect(system).to_have_attribute("aria-selected", "true")
        chart = page.locator('[data-system-chart="node/mem_used_bytes"]')
        chart.scroll_into_view_if_needed()  # charts load when scrolled near
        expect(chart.locator("canvas")).to_have_count(1)
        expect(chart).to_contain_text("node 0")
        page.screenshot(path=str(shots / "run-system.png"), full_page=True)

        # Clicking a rank's cell shows that rank's lines, and its logs in the Logs tab.
        page.get_by_role("tab", name="Charts").click()
        strip.locator('[data-rank="2"]').click()
        charts_tab = page.get_by_role("tab", name="Charts")
        expect(charts_tab).to_have_attribute("aria-selected", "true")
        expect(page.locator(".rank-chip.on")).to_have_text("rank-2")
        page.get_by_role("tab", name="Logs").click()
        expect(logs.first).to_contain_text("rank 2")
        labels = page.locator("[data-log-line] [data-log-label]").all_inner_texts()
        assert labels and set(labels) == {"rank-2"}
        assert page.evaluate("window.__xss") is None
    assert not errors, errors
    assert sorted(f.name for f in shots.iterdir()) == ["run-health.png", "run-logs.png",
                                                       "run-system.png"]  # fmt: skip
    print(f"screenshots in {shots}")
