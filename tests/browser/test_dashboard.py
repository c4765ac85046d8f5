"""The dashboard in a real browser: Debian's Chromium, headless, driven by Playwright.

Against a real server (``rankwise ui`` / ``rankwise server``, uvicorn in a subprocess)
holding real runs that a torchrun job (2 CPU processes, gloo, shared mode) wrote in this
test, it clicks through: runs table -> filter -> save a view -> reopen it -> run page ->
per-rank lines -> zoom -> compare. Names, tags, config values and a metric key carry
HTML; nothing of it may run. Screenshots go to the test's tmp dir; with
``RANKWISE_UPDATE_DOCS=1`` the run page's also goes to ``docs/img/run-page.png`` (the
README shows it), so a plain test run never changes the working tree.

No Chromium at /usr/bin/chromium: these tests skip locally and fail under ``CI=true``.
The dashboard must be built (``make setup`` runs ``npm ci && npm run build`` in ui/).

``test_wide_and_dark`` waits for the page's ``rankwise:first-charts`` performance mark;
how long it takes on a run of 64 ranks x 50 metrics is measured by
``benchmarks/bench_dashboard.py``, not here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers.browser import Page, drawn, first_charts_ms, need_browser
from tests.helpers.env import REPO, clean_env
from tests.helpers.jobs import torchrun
from tests.helpers.servers import ServerProcess, browser_login
from tests.helpers.wait import wait_until

pytestmark = pytest.mark.browser

SCRIPTS = Path(__file__).parents[1] / "scripts"
DOCS_SHOT = REPO / "docs" / "img" / "run-page.png"
PROJECT = "dash"
PREFIX = "dash"
XSS_NAME = '<img src=x onerror="window.__xss=1">trial-b'
XSS_TAG = "<b>tag</b>"
XSS_CONFIG = "<script>window.__xss=2</script>"
XSS_KEY = "debug/<img src=x onerror=window.__xss=3>"


def _job_env(**extra: str) -> dict[str, str]:
    return clean_env(**{"RANKWISE_FLUSH_INTERVAL": "0.05", **extra})


# -- data: real runs from a real torchrun job -----------------------------------------


@pytest.fixture(scope="module")
def dash_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    need_browser()
    root = tmp_path_factory.mktemp("dash") / "data"
    cmd = [*torchrun(), "--standalone", "--nproc-per-node=2", str(SCRIPTS / "dashboard_train.py"),
           "--prefix", PREFIX, "--project", PROJECT, "--steps", "40"]  # fmt: skip
    out = subprocess.run(
        cmd, env=_job_env(RANKWISE_DIR=str(root)), cwd=root.parent, capture_output=True,
        text=True, timeout=240,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    # A third run whose rank 1 is SIGKILLed: the table must call it crashed, naming rank-1.
    env = _job_env(RANKWISE_DIR=str(root), RANKWISE_RUN_ID=f"{PREFIX}-crash",
                   RANKWISE_HEARTBEAT_INTERVAL="0.5", WORLD_SIZE="2")  # fmt: skip
    ranks = [
        subprocess.Popen(
            [sys.executable, "-c", CRASH_JOB],
            cwd=root.parent,
            env={**env, "RANK": str(r), "LOCAL_RANK": str(r)},
        )
        for r in (0, 1)
    ]
    assert [p.wait(60) for p in ranks] == [0, -9]
    return root


CRASH_JOB = """
import os, signal, rankwise
run = rankwise.init(project="dash", run_mode="shared", name="crashes", job_type="eval")
for step in range(5):
    run.log({"train/loss": 1.0 / (step + 1)}, step=step)
if os.environ["RANK"] == "1":
    assert run._writer.sync(timeout=60)  # what it logged is in the file: then it dies
    os.kill(os.getpid(), signal.SIGKILL)
run.finish()
"""


@pytest.fixture(scope="module")
def dash_server(dash_dir: Path) -> Iterator[str]:
    with ServerProcess.ui(dash_dir, dash_dir.parent / "server.log") as server:
        yield server.url


# -- the click-through ------------------------------------------------------------------


@pytest.mark.torchrun
def test_click_through(browser: Any, dash_server: str, tmp_path: Path) -> None:
    shots = tmp_path / "screenshots"
    shots.mkdir()
    p = Page(browser)
    page = p.page
    rows = page.locator("table.runs tbody tr[data-run]")

    # Runs table: the only project opens by itself; every run, names shown as text, the
    # crashed one naming its crashed rank (once its heartbeat is late: the table polls).
    page.goto(dash_server + "/")
    page.wait_for_url("**/#/p/dash**")
    page.wait_for_function("document.querySelectorAll('tr[data-run]').length === 3")
    crashed = page.locator(f"tr[data-run='{PREFIX}-crash'] .state-crashed")
    crashed.wait_for(timeout=15_000)
    assert crashed.inner_text().split() == ["crashed", "rank-1"]
    assert page.get_by_text(XSS_NAME, exact=True).is_visible()
    assert page.locator("table.runs .tag").get_by_text(XSS_TAG, exact=True).is_visible()
    assert page.locator("tr[data-run] img").count() == 0
    trial_b = page.locator(f"tr[data-run='{PREFIX}-b']")
    assert trial_b.locator(".state").inner_text() == "finished"
    assert "2 × 1" in trial_b.inner_text()  # ranks × nodes
    page.get_by_role("link", name="Crashed").click()
    page.wait_for_function("document.querySelectorAll('tr[data-run]').length === 1")
    assert rows.first.get_attribute("data-run") == f"{PREFIX}-crash"
    page.get_by_role("link", name="All runs").click()
    page.wait_for_function("document.querySelectorAll('tr[data-run]').length === 3")
    page.screenshot(path=shots / "runs.png")

    # "/" focuses the search; filter to one run.
    page.locator("h1").click()
    page.keyboard.press("/")
    assert page.evaluate("document.activeElement.matches('input[data-search]')")
    page.keyboard.type("trial-a")
    page.wait_for_url("**q=trial-a**")
    page.wait_for_function("document.querySelectorAll('tr[data-run]').length === 1")
    assert rows.first.get_attribute("data-run") == f"{PREFIX}-a"
    page.get_by_role("button", name="finished", exact=True).click()  # a state filter on top
    page.wait_for_url("**state=finished**")
    assert rows.count() == 1

    # Save the view; the server stores it; the sidebar lists it.
    page.get_by_role("button", name="Save view").click()
    page.get_by_label("View name").fill("trial a, finished")
    page.get_by_role("button", name="Save", exact=True).click()
    view_link = page.locator('a[data-view="trial a, finished"]')
    view_link.wait_for()
    stored = httpx.get(f"{dash_server}/api/v1/projects/{PROJECT}/views").json()["views"]
    assert [(v["name"], v["filters"]["q"], v["filters"]["state"]) for v in stored] == [
        ("trial a, finished", "trial-a", ["finished"])
    ]

    # Clear everything, then reopen the view from the sidebar.
    page.get_by_role("link", name="All runs").click()
    page.wait_for_function("document.querySelectorAll('tr[data-run]').length === 3")
    assert page.locator("input[data-search]").input_value() == ""
    view_link.click()
    page.wait_for_function("document.querySelectorAll('tr[data-run]').length === 1")
    assert page.locator("input[data-search]").input_value() == "trial-a"
    assert (
        page.get_by_role("button", name="finished", exact=True).get_attribute("aria-pressed")
        == "true"
    )
    page.screenshot(path=shots / "runs-view.png")

    # Run page: header, one chart per metric in sections, band drawn.
    rows.first.locator("a.run-name").click()
    page.wait_for_url(f"**/#/p/{PROJECT}/r/{PREFIX}-a**")
    page.locator(drawn()).first.wait_for()
    facts = page.locator("dl.facts").inner_text()
    assert "RANKS × NODES\n2 × 1" in facts.upper()
    assert page.get_by_role("link", name=f"{PREFIX}-sweep").first.is_visible()
    sections = page.locator(".metric-section").evaluate_all("s => s.map(e => e.dataset.section)")
    assert sections == ["train", "val", "debug"]
    page.locator('.chart-card[data-metric="train/loss"][data-state="drawn"]').wait_for()

    # Per-rank lines: a legend of ranks; every visible chart redrawn with two lines.
    page.get_by_role("button", name="Ranks", exact=True).click()
    page.locator(".rank-chip", has_text="rank-0").wait_for()
    assert page.locator(".rank-chip").all_inner_texts() == ["rank-0", "rank-1"]
    loss = page.locator('.chart-card[data-metric="train/loss"]')
    page.locator('.chart-card[data-metric="train/loss"][data-lines="2"]').wait_for()
    assert any("streams=all" in u and "band=false" in u for u in p.requests)
    page.locator(".rank-chip", has_text="rank-1").hover()
    page.wait_for_timeout(200)
    page.screenshot(path=shots / "run-ranks.png")
    page.locator(".rank-chip", has_text="rank-1").click()  # pin it
    assert page.locator(".rank-chip.on").inner_text() == "rank-1"

    # Zoom: drag across the middle of train/loss; the server is asked for that range
    # and every chart follows.
    x0, x1 = float(loss.get_attribute("data-xmin")), float(loss.get_attribute("data-xmax"))
    assert (x0, x1) == (0.0, 39.0)
    box = loss.locator(".u-over").bounding_box()
    y = box["y"] + box["height"] / 2
    n_before = len(p.requests)
    page.mouse.move(box["x"] + box["width"] * 0.25, y)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.5, y, steps=5)
    page.mouse.move(box["x"] + box["width"] * 0.75, y, steps=5)
    page.mouse.up()
    page.get_by_role("button", name="Reset zoom", exact=True).wait_for()
    page.wait_for_function(
        """() => { const c = document.querySelector('.chart-card[data-metric="train/loss"]');
                   return Number(c.dataset.xmin) > 5 && Number(c.dataset.xmax) < 35; }"""
    )
    lo, hi = float(loss.get_attribute("data-xmin")), float(loss.get_attribute("data-xmax"))
    assert 8 <= lo <= 12 and 27 <= hi <= 31, (lo, hi)  # 25 % .. 75 % of 0..39
    zoomed = [u for u in p.requests[n_before:] if "/series?" in u and "from=" in u]
    assert any("train%2Floss" in u or "train/loss" in u for u in zoomed), zoomed
    assert any("streams=all" in u for u in zoomed)  # the rank lines are refined too
    acc = page.locator('.chart-card[data-metric="train/accuracy"]')
    wait_until(lambda: acc.get_attribute("data-xmin") == loss.get_attribute("data-xmin"))
    page.screenshot(path=shots / "run-zoomed.png")
    loss.locator(".u-over").dblclick()
    page.get_by_role("button", name="Reset zoom", exact=True).wait_for(state="detached")
    wait_until(lambda: loss.get_attribute("data-xmin") == "0")

    # Back to the mean view for the README's screenshot of the run page.
    page.get_by_role("button", name="Mean", exact=True).click()
    page.locator('.chart-card[data-metric="train/loss"][data-lines="0"]').wait_for()
    page.mouse.move(5, 5)
    page.wait_for_timeout(300)
    page.screenshot(path=shots / "run.png")
    if os.environ.get("RANKWISE_UPDATE_DOCS") == "1":
        DOCS_SHOT.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=DOCS_SHOT)

    # Config and streams tabs: values as text, one row per rank.
    page.get_by_role("tab", name="Config & summary").click()
    assert page.get_by_text(XSS_CONFIG, exact=True).is_visible()
    assert page.locator(".kv-table th", has_text="optimizer.name").is_visible()
    assert page.locator(".kv-table th", has_text="final_loss").first.is_visible()
    page.get_by_role("tab", name="Streams").click()
    stream_rows = page.locator("table.streams tbody tr")
    assert stream_rows.count() == 2
    assert "finished" in stream_rows.nth(1).inner_text()
    page.screenshot(path=shots / "run-streams.png")

    # Compare: pick both runs in the table.
    page.get_by_role("link", name=PROJECT, exact=True).first.click()
    page.wait_for_function("document.querySelectorAll('tr[data-run]').length >= 1")
    page.get_by_role("link", name="All runs").click()
    page.wait_for_function("document.querySelectorAll('tr[data-run]').length === 3")
    for run in ("a", "b"):
        page.locator(f"tr[data-run='{PREFIX}-{run}'] input[type=checkbox]").check()
    page.get_by_role("link", name="Compare (2)").click()
    page.wait_for_url("**/#/compare?runs=**")
    legend = page.locator(".run-legend li")
    legend.first.wait_for()
    assert legend.count() == 2
    assert legend.filter(has_text=XSS_NAME).count() == 1
    page.locator(drawn(lines=2)).first.wait_for()
    assert page.locator(f'.chart-card[data-metric="{XSS_KEY}"]').count() == 1
    page.screenshot(path=shots / "compare.png")

    # The group overlays the same two runs.
    page.goto(f"{dash_server}/#/p/{PROJECT}/g/{PREFIX}-sweep")
    page.locator(drawn(lines=2)).first.wait_for()
    assert page.locator(".run-legend li").count() == 2
    page.screenshot(path=shots / "group.png")

    p.check()
    p.close()
    print(f"\nscreenshots: {shots}")


@pytest.mark.torchrun
def test_wide_and_dark(browser: Any, dash_server: str, tmp_path: Path) -> None:
    """1920x1080 in the dark theme: the same page, laid out wider, in dark colours."""
    p = Page(browser, 1920, 1080, dark=True)
    page = p.page
    page.goto(f"{dash_server}/#/p/{PROJECT}/r/{PREFIX}-b")
    first_charts_ms(page)
    bg = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert bg == "rgb(15, 18, 23)", bg
    assert page.get_by_role("heading", name=XSS_NAME).is_visible()
    # Wider screen, more charts per row: three cards share the first row.
    tops = (
        page.locator(".metric-section")
        .first.locator(".chart-card")
        .evaluate_all("cards => cards.map(c => Math.round(c.getBoundingClientRect().top))")
    )
    assert tops.count(tops[0]) >= 3, tops
    page.screenshot(path=tmp_path / "run-1920-dark.png")
    page.goto(f"{dash_server}/#/p/{PROJECT}?by=group")
    page.wait_for_function("document.querySelectorAll('tr[data-run]').length === 3")
    groups = page.locator("tr.group-row").evaluate_all("rows => rows.map(r => r.dataset.group)")
    assert groups == [f"{PREFIX}-sweep", ""], groups  # ungrouped runs last
    page.screenshot(path=tmp_path / "runs-1920-dark.png")
    p.check()
    p.close()


# -- live updates and empty states ------------------------------------------------------

LIVE_WRITER = """
import json, sys, time, rankwise
run = rankwise.init(project="live", id="live-1", config={"steps": int(sys.argv[2])})
with open(sys.argv[1], "a") as log:
    for step in range(int(sys.argv[2])):
        run.log({"train/loss": 1.0 / (step + 1)}, step=step)
        log.write(json.dumps([step, time.time()]) + "\\n")
        log.flush()
        time.sleep(0.1)
run.finish()
"""


def _live_diagnosis(url: str, page: Any, writer: Any) -> str:
    """Why a live run's page did not show *finished*: the server's run reply now, the
    writer's exit code and the page's head (it failed once in CI under load)."""
    try:
        reply = httpx.get(f"{url}/api/v1/projects/live/runs/live-1", timeout=30).json()
        said = {k: reply.get(k) for k in ("state", "steps", "updated_at")}
        said["streams"] = [(s.get("label"), s.get("state")) for s in reply.get("streams", [])]
    except Exception as exc:  # the diagnosis must not hide the failure
        said = {"error": repr(exc)}
    head = page.locator(".run-head").first.inner_text(timeout=5_000)
    return (
        f"the page never showed finished: server says {said}, writer exit "
        f"{writer.returncode}, page head {head!r}"
    )


def test_live_run_updates_without_a_reload(browser: Any, tmp_path: Path) -> None:
    """A running run's chart follows the writer without a reload. How far behind it is
    gets printed: a speed figure, not asserted on a shared machine."""
    need_browser()
    root = tmp_path / "data"
    root.mkdir()
    progress = tmp_path / "progress.jsonl"
    steps = 120  # 12 s of logging
    with ServerProcess.ui(root, tmp_path / "server.log") as server:
        writer = subprocess.Popen(
            [sys.executable, "-c", LIVE_WRITER, str(progress), str(steps)],
            env=_job_env(RANKWISE_DIR=str(root)), cwd=tmp_path,
        )  # fmt: skip
        try:
            p = Page(browser)
            page = p.page
            # The projects page notices the new project by itself, then the run.
            page.goto(server.url + "/")
            # Under the whole suite's load (2 cores) the first index and the page's polls
            # took over the default 20 s once: the page must still find it by itself.
            page.locator("tr[data-run='live-1'] a.run-name").click(timeout=60_000)
            card = page.locator('.chart-card[data-metric="train/loss"]')
            page.locator('.chart-card[data-metric="train/loss"][data-state="drawn"]').wait_for()
            assert page.locator(".run-head .state").first.inner_text().startswith("running")
            lags = []
            shown_while_running = []
            while writer.poll() is None:
                shown = int(float(card.get_attribute("data-lastx") or -1))
                shown_while_running.append(shown)
                now = time.time()
                logged = [json.loads(line) for line in progress.read_text().splitlines()]
                later = [t for s, t in logged if s > shown]
                # Behind by how long the first step not yet shown has been written.
                lags.append(max(0.0, now - later[0]) if later else 0.0)
                page.wait_for_timeout(100)
            # Generous bounds: they catch a page that stopped following, not a slow one.
            try:
                page.locator(".run-head .state-finished").wait_for(timeout=60_000)
            except Exception:  # what the server said, beside what the page shows
                raise AssertionError(_live_diagnosis(server.url, page, writer)) from None
            wait_until(lambda: card.get_attribute("data-lastx") == str(steps - 1), timeout=60)
            lags.sort()
            print(f"\nlive lag over {len(lags)} samples: median {lags[len(lags) // 2]:.2f} s, "
                  f"max {lags[-1]:.2f} s")  # fmt: skip
            # The chart moved forward, step by step, while the writer was still logging.
            assert shown_while_running == sorted(shown_while_running)
            assert len(set(shown_while_running)) >= 3, sorted(set(shown_while_running))
            p.check()
            p.close()
        finally:
            writer.kill()
            writer.wait()


def test_empty_states(browser: Any, tmp_path: Path) -> None:
    need_browser()
    root = tmp_path / "data"
    root.mkdir()
    with ServerProcess.ui(root, tmp_path / "server.log") as server:
        p = Page(browser)
        page = p.page
        page.goto(server.url + "/")
        page.get_by_role("heading", name="No runs yet").wait_for()
        assert page.get_by_text("rankwise.init", exact=False).first.is_visible()
        empty = page.locator(".empty").inner_text()
        assert "rankwise ui --dir" in empty and "RANKWISE_TOKEN" not in empty  # local story
        page.screenshot(path=tmp_path / "empty-project.png")
        quiet = "import rankwise; rankwise.init(project='quiet', id='nothing').finish()"
        subprocess.run(
            [sys.executable, "-c", quiet],
            env=_job_env(RANKWISE_DIR=str(root)), cwd=tmp_path, check=True, timeout=60,
        )  # fmt: skip
        run_url = f"{server.url}/api/v1/projects/quiet/runs/nothing"
        wait_until(lambda: httpx.get(run_url).status_code == 200, timeout=10)  # indexed
        page.goto(server.url + "/#/p/quiet/r/nothing")
        page.get_by_role("heading", name="No metrics logged yet").wait_for()
        page.screenshot(path=tmp_path / "empty-run.png")
        page.goto(server.url + "/#/p/quiet?q=zzz")
        page.get_by_role("heading", name="No run matches these filters").wait_for()
        p.check()
        p.close()


def test_a_servers_empty_page_tells_how_to_upload(browser: Any, tmp_path: Path) -> None:
    """`rankwise server` holds no files: its empty page says how ranks reach it (the
    address, an ingest token and how to make one), not the local-directory story."""
    need_browser()
    with ServerProcess.db(f"sqlite:///{tmp_path / 'db.sqlite'}", tmp_path / "server.log") as srv:
        p = Page(browser)
        assert srv.token is not None
        browser_login(p.ctx, srv.url, srv.token)
        p.page.goto(srv.url + "/")
        p.page.get_by_role("heading", name="No runs yet").wait_for()
        empty = p.page.locator(".empty").inner_text()
        assert f"RANKWISE_SERVER={srv.url}" in empty
        assert "RANKWISE_TOKEN=" in empty
        assert "rankwise token create --db DB_URL --role ingest" in empty
        assert f'server="{srv.url}"' in empty
        assert "rankwise ui --dir" not in empty and "./rankwise" not in empty
        p.page.screenshot(path=tmp_path / "empty-server.png")
        p.check()
        p.close()
