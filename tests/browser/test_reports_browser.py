"""Reports in Debian's Chromium, under the dashboard's real CSP (no ``bypass_csp``).

A real DDP job (torchrun, 2 CPU ranks, gloo: ``tests/scripts/media_browser_job.py``) logs
two runs with a loss, an image gallery and a table; the data directory is indexed as
``rankwise ui`` does and served with authentication. Then, as a user would:

* a writer (admin) adds the Compare page's loss chart of both runs to a new report with
  the chart's "+ report" button, edits the report (title, a Markdown text block moved
  to the top, a media panel, a table panel) and saves it: version 2;
* a read-only user (a read token of the project) opens it by its URL: no edit controls,
  the same blocks, the older version readable; they export it with the Export button,
  and ``rankwise report export --server`` exports it too (with a PDF by Chromium);
* each exported file is opened from disk in a context with the network blocked: it
  draws the same charts (the drawn series' points equal the dashboard's), the images
  decode from the file itself, and nothing is requested.

Title, text and caption carry XSS payloads: shown as text, no element, no CSP violation.
With ``RANKWISE_UPDATE_DOCS=1`` the screenshots go to ``docs/img/`` (report.png,
report-editor.png, report-export.png).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from rankwise.cli import main
from rankwise.server import ServerSettings, create_app
from rankwise.server.indexer import DirectoryTailer
from rankwise.store import open_store
from rankwise.store.blobs import RunDirBlobStore
from rankwise.wire.artifacts import CommitRequest
from tests.helpers.browser import CHROMIUM, STATIC, need_browser
from tests.helpers.env import REPO, clean_env
from tests.helpers.jobs import torchrun
from tests.helpers.servers import admin_token, browser_login, serve_in_thread

pytestmark = [pytest.mark.browser, pytest.mark.torchrun]

SCRIPT = REPO / "tests" / "scripts" / "media_browser_job.py"
PROJECT = "media"
RUNS = ("rep-a", "rep-b")
DOCS = REPO / "docs" / "img"
TITLE = 'Week 47: loss <img src=x onerror="window.__xss=21">'
TEXT = (
    "# What we saw\n\nThe **loss** fell on both runs; rank 1 lagged by a step.\n\n"
    "- two runs, 2 ranks each\n- the gallery at the last step\n\n"
    "<script>window.__xss=22</script>\n\n"
    "See [a bad link](javascript:window.__xss=23) and [the docs](https://example.com/docs)."
)
CAPTION = 'Samples <svg onload="window.__xss=24">'
RUN_A = {"project": PROJECT, "run": RUNS[0]}
OTHER_PANELS = [
    {"id": "h", "type": "histogram", "run": RUN_A, "key": "grad/fc0", "step": 10},
    {"id": "s", "type": "health", "run": RUN_A},
    {"id": "f", "type": "failure", "run": RUN_A},
    {"id": "l", "type": "lineage", "artifact": "digits"},
    {"id": "r", "type": "chart", "runs": [RUN_A], "metrics": ["loss"], "mode": "ranks"},
]
WATCH = """
window.__violations = [];
document.addEventListener('securitypolicyviolation',
  (e) => window.__violations.push(e.violatedDirective + ' ' + e.blockedURI));
"""
INJECTED = ", ".join(
    f"#app {sel}"
    for sel in (
        "script",
        "img[src='x']",
        "svg[onload]",
        "[onerror]",
        "[onload]",
        "a[href^='javascript']",
    )
)
DECODED = "els => els.length > 0 && els.every(e => e.complete && e.naturalWidth > 0)"
PAINTED = """c => {
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  let n = 0;
  for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n++;
  return n;
}"""


def _dismiss(dialog: Any, errors: list[str]) -> None:
    errors.append(f"dialog {dialog.message}")
    dialog.dismiss()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, str, Path]]:
    """(url, admin token, read token, tmp): the job's runs, indexed and served with auth."""
    need_browser()
    tmp = tmp_path_factory.mktemp("reports")
    root = tmp / "data"
    cmd = [*torchrun(), "--standalone", "--nproc-per-node=2", str(SCRIPT), "--vary-runs",
           "--run-ids", ",".join(RUNS), "--project", PROJECT, "--rows", "12"]  # fmt: skip
    env = clean_env(RANKWISE_DIR=str(root), RANKWISE_FLUSH_INTERVAL="0.05")
    out = subprocess.run(cmd, env=env, cwd=tmp, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    store = open_store(f"sqlite:///{tmp / 'db.sqlite'}")
    store.migrate()
    DirectoryTailer(root, store).poll()  # as `rankwise ui` indexes a directory
    app = create_app(store, ServerSettings(static_dir=STATIC, blobs=RunDirBlobStore(root)))
    reader = store.create_token("read", [PROJECT], "reader").value
    # An artifact version logged by one run and used by the other, for a lineage panel,
    # and a report of the other panel kinds, saved as the API would.
    manifest = {"entries": [{"path": "train.csv", "ref": "s3://bucket/train.csv"}]}
    req = {"type": "dataset", "manifest": manifest, "client_id": "c" * 32, "run_id": RUNS[0]}
    store.commit_artifact(PROJECT, "digits", msgspec.convert(req, CommitRequest))
    store.use_artifact(PROJECT, "digits", "latest", RUNS[1], "rank-0")
    store.save_report(PROJECT, "panels", "Every panel", OTHER_PANELS)
    with serve_in_thread(app) as url:
        yield url.replace("127.0.0.1", "localhost"), admin_token(app), reader, tmp
    store.close()


def _page(browser: Any, url: str, token: str | None, **ctx: Any) -> tuple[Any, Any, list[str]]:
    context = browser.new_context(viewport={"width": 1200, "height": 1000}, **ctx)
    if token:
        browser_login(context, url, token)
    page = context.new_page()
    page.set_default_timeout(30_000)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("dialog", lambda d: _dismiss(d, errors))
    page.add_init_script(WATCH)
    return context, page, errors


def _safe(page: Any, errors: list[str], where: str) -> None:
    assert page.evaluate("window.__xss") is None, f"{where}: user text was run as code"
    assert page.locator(INJECTED).count() == 0, f"{where}: user text became elements"
    assert page.evaluate("window.__violations") == [], f"{where}: the page broke its CSP"
    assert errors == [], f"{where}: {errors}"


def _drawn(page: Any) -> list[str]:
    """Each report chart's drawn series (its lines' points), once all are drawn."""
    charts = page.locator("[data-report-chart]")
    from playwright.sync_api import expect

    expect(charts.first).to_have_attribute("data-state", "drawn")
    n = charts.count()
    for i in range(n):
        expect(charts.nth(i)).to_have_attribute("data-state", "drawn")
    return [charts.nth(i).get_attribute("data-series") or "" for i in range(n)]


def _check_report(page: Any) -> list[str]:
    from playwright.sync_api import expect

    expect(page.locator("[data-report-title]")).to_have_text(TITLE)
    blocks = page.locator("[data-block]")
    expect(blocks).to_have_count(4)
    assert [blocks.nth(i).get_attribute("data-block") for i in range(4)] == [
        "text",
        "chart",
        "media",
        "table",
    ]
    md = page.locator("[data-markdown]")
    expect(md.locator("h1")).to_have_text("What we saw")
    expect(md.locator("strong")).to_have_text("loss")
    expect(md.locator("li")).to_have_count(2)
    assert "<script>window.__xss=22</script>" in md.inner_text()
    assert md.locator("a").count() == 1  # the javascript: link is text, the https one a link
    assert md.locator("a").get_attribute("href") == "https://example.com/docs"
    expect(page.locator("[data-caption]")).to_have_text(CAPTION)
    chart = page.locator("[data-report-chart]")
    expect(chart).to_have_attribute("data-lines", "2")
    series = _drawn(page)
    lines = json.loads(series[0])
    assert [ln["label"] for ln in lines] == list(RUNS)
    assert all(sum(y is not None for y in ln["y"]) == 21 for ln in lines)  # steps 0..20
    assert lines[0]["y"] != lines[1]["y"]  # two runs, two curves
    assert chart.locator("canvas").first.evaluate(PAINTED) > 500
    images = page.locator("[data-block='media'] img")
    page.wait_for_function(DECODED, arg=images.element_handles())
    assert images.count() == 8  # the gallery of each rank at the last step
    ranks = page.locator("[data-block='media'] [data-label]")
    assert [ranks.nth(i).get_attribute("data-label") for i in range(2)] == ["rank-0", "rank-1"]
    table = page.locator("[data-block='table'] [data-rows]")
    expect(table).to_have_attribute("data-rows", "12")
    expect(table.locator("td", has_text="<script>window.__xss=12</script>cell")).to_have_count(1)
    return series


def _offline(route: Any, asked: list[str]) -> None:
    """Let the file (and its data: URIs) load; note and refuse anything else."""
    if route.request.url.startswith(("file:", "data:")):
        route.continue_()
    else:
        asked.append(route.request.url)
        route.abort()


def _shot(page: Any, name: str) -> None:
    if os.environ.get("RANKWISE_UPDATE_DOCS") == "1":
        DOCS.mkdir(parents=True, exist_ok=True)
        page.evaluate("window.scrollTo(0, 0)")
        page.screenshot(path=str(DOCS / name), full_page=True)


def test_make_share_and_export_a_report(browser: Any, served: tuple[str, str, str, Path]) -> None:
    from playwright.sync_api import expect

    url, admin, reader, tmp = served
    report_url = f"{url}/#/p/{PROJECT}/reports/weekly"

    # -- a writer makes it: a chart from Compare, then text, media and table blocks ------
    ctx, page, errors = _page(browser, url, admin)
    page.goto(f"{url}/#/compare?runs={PROJECT}/{RUNS[0]},{PROJECT}/{RUNS[1]}")
    page.locator('.chart-card[data-metric="loss"] a[data-add-to-report]').click()
    form = page.locator("form[data-add-to-report]")
    form.get_by_label("Report name").fill("weekly")
    form.get_by_role("button", name="Add").click()
    expect(page.locator("[data-report='weekly'][data-version='1']")).to_be_visible()
    _drawn(page)
    page.locator("[data-edit]").click()
    page.locator("[data-title-input]").fill(TITLE)
    for kind in ("text", "media", "table"):
        page.locator("[data-kind]").select_option(kind)
        page.locator("[data-add-block]").click()
    page.locator("[data-edit-block='1'] [data-text-input]").fill(TEXT)
    media = page.locator("[data-edit-block='2']")
    media.locator("[data-run-input]").fill(f"{PROJECT}/{RUNS[0]}")
    media.locator("[data-key-input]").fill("samples")
    media.locator("[data-caption-input]").fill(CAPTION)
    table = page.locator("[data-edit-block='3']")
    table.locator("[data-run-input]").fill(f"{PROJECT}/{RUNS[0]}")
    table.locator("[data-key-input]").fill("predictions")
    page.locator("[data-edit-block='1']").get_by_role("button", name="Move up").click()
    expect(page.locator("[data-edit-block='0'] [data-text-input]")).to_have_value(TEXT)
    page.locator("[data-edit-block='3'] [data-block='table'] [data-rows]").wait_for()
    _shot(page, "report-editor.png")
    page.locator("[data-save]").click()
    expect(page.locator("[data-report='weekly'][data-version='2']")).to_be_visible()
    _check_report(page)
    _safe(page, errors, "the writer's report")
    ctx.close()

    # -- a read-only user opens it by its URL ------------------------------------------
    ctx, page, errors = _page(browser, url, reader, accept_downloads=True)
    page.goto(report_url)
    expect(page.locator("[data-report='weekly'][data-version='2']")).to_be_visible()
    live = _check_report(page)
    live_pixels = page.locator("[data-report-chart] canvas").first.evaluate("c => c.toDataURL()")
    assert page.locator("[data-edit]").count() == 0, "a reader sees no edit controls"
    _safe(page, errors, "the reader's report")
    _shot(page, "report.png")
    with page.expect_download() as got:
        page.locator("[data-export]").click()
    from_button = tmp / "from-button.html"
    got.value.save_as(from_button)
    # the first version stays readable
    page.locator("[data-versions]").select_option("1")
    expect(page.locator("[data-report='weekly'][data-version='1']")).to_be_visible()
    expect(page.locator("[data-block]")).to_have_count(1)
    _safe(page, errors, "version 1")
    ctx.close()

    # -- the CLI exports it from the server, with a PDF by headless Chromium -----------
    from_cli = tmp / "from-cli.html"
    pdf = tmp / "from-cli.pdf"
    os.environ["RANKWISE_CHROMIUM"] = str(CHROMIUM)
    try:
        argv = ["report", "export", f"{PROJECT}/weekly", "--server", url, "--token", reader]
        assert main([*argv, "--out", str(from_cli), "--pdf", str(pdf)]) == 0
    finally:
        os.environ.pop("RANKWISE_CHROMIUM", None)
    assert pdf.read_bytes()[:5] == b"%PDF-" and pdf.stat().st_size > 10_000

    # -- each file, opened from disk with the network blocked, draws the same charts ---
    for path in (from_button, from_cli):
        ctx, page, errors = _page(browser, url, None, offline=True)
        asked: list[str] = []

        ctx.route("**/*", lambda route, asked=asked: _offline(route, asked))
        page.goto(path.as_uri())
        assert page.locator("html[data-exported]").count() == 1
        offline = _check_report(page)
        assert offline == live, f"{path.name}: the charts drawn differ from the dashboard's"
        pixels = page.locator("[data-report-chart] canvas").first.evaluate("c => c.toDataURL()")
        assert pixels == live_pixels, f"{path.name}: the chart's pixels differ"
        assert asked == [], f"{path.name} asked the network for {asked}"
        _safe(page, errors, path.name)
        if path == from_cli:
            _shot(page, "report-export.png")
        ctx.close()


def test_the_other_panels_draw_for_a_reader(
    browser: Any, served: tuple[str, str, str, Path]
) -> None:
    """A histogram, a health strip, a hang-or-failure summary, an artifact's lineage and
    a chart of every rank, opened by a reader and in the exported file."""
    from playwright.sync_api import expect

    url, _admin, reader, tmp = served
    ctx, page, errors = _page(browser, url, reader)
    page.goto(f"{url}/#/p/{PROJECT}/reports/panels")
    expect(page.locator("[data-block]")).to_have_count(5)
    hist = page.locator("[data-block='histogram'] [data-step]")
    expect(hist).to_have_attribute("data-step", "10")
    assert hist.locator("rect").count() > 0
    expect(page.locator("[data-block='health'] [data-health-strip]")).to_be_visible()
    expect(page.locator("[data-block='failure']")).to_contain_text("No hang or failure")
    lineage = page.locator("[data-block='lineage']")
    expect(lineage.locator(".lineage-logged")).to_contain_text(RUNS[0])
    expect(lineage.locator(".lineage-used")).to_contain_text(RUNS[1])
    chart = page.locator("[data-report-chart]")
    expect(chart).to_have_attribute("data-lines", "2")  # rank 0 and rank 1
    live = _drawn(page)
    assert [ln["label"] for ln in json.loads(live[0])] == ["rank-0", "rank-1"]
    _safe(page, errors, "the panels report")
    ctx.close()

    out = tmp / "panels.html"
    argv = ["report", "export", f"{PROJECT}/panels", "--server", url, "--token", reader]
    assert main([*argv, "--out", str(out)]) == 0
    ctx, page, errors = _page(browser, url, None, offline=True)
    asked: list[str] = []
    ctx.route("**/*", lambda route: _offline(route, asked))
    page.goto(out.as_uri())
    expect(page.locator("[data-block='histogram'] [data-step]")).to_have_attribute(
        "data-step", "10"
    )
    expect(page.locator("[data-block='lineage'] .lineage-used")).to_contain_text(RUNS[1])
    expect(page.locator("[data-block='health'] [data-health-strip]")).to_be_visible()
    assert _drawn(page) == live
    assert asked == []
    _safe(page, errors, "panels.html")
    ctx.close()
