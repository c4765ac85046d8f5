"""Editing and finding runs in the dashboard, in headless Chromium, over ``rankwise ui``.

The run page's Edit form (name, tags, notes shown as text, never HTML), inline rename in
the runs table, bulk tags on a selection, and the filter builder (W&B's MongoDB-style
filter in the URL, evaluated by the server). Every edit lands beside the run's streams.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import rankwise

from .helpers.browser import Page, launch_browser
from .helpers.servers import ServerProcess

pytestmark = pytest.mark.browser

FAST = {"flush_interval": 0.02, "heartbeat_interval": 0.2, "finish_timeout": 10.0}
XSS = '<img src=x onerror="window.__xss=1"> **bold**'


def _runs(root: Path) -> dict[str, str]:
    ids = {}
    for name, lr in (("alpha", 0.1), ("beta", 0.01), ("gamma", 0.001)):
        run = rankwise.init(project="p", name=name, config={"lr": lr}, tags=["t0"], dir=root,
                            settings=FAST, system=False)  # fmt: skip
        run.log({"loss": lr}, step=0)
        ids[name] = run.id
        run.finish()
    return ids


def test_edit_bulk_tags_and_filter_builder(tmp_path: Path) -> None:
    from playwright.sync_api import expect

    root = tmp_path / "data"
    ids = _runs(root)
    with ServerProcess.ui(root, tmp_path / "ui.log") as srv, launch_browser() as browser:
        p = Page(browser)
        page = p.page
        # the run page: Edit, Save
        page.goto(f"{srv.url}/#/p/p/r/{ids['alpha']}")
        page.locator("[data-edit-run]").click()
        page.get_by_label("Run name").fill("alpha-renamed")
        page.get_by_label("Tags").fill("t0, best")
        page.get_by_label("Notes").fill(XSS)
        page.get_by_role("button", name="Save").click()
        expect(page.locator("h1")).to_have_text("alpha-renamed")
        expect(page.locator("[data-notes]")).to_have_text(XSS)  # as text
        expect(page.locator("[data-notes] img")).to_have_count(0)
        got = rankwise.Api(dir=root).run(ids["alpha"], "p")
        assert (got.name, got.tags, got.notes) == ("alpha-renamed", ["t0", "best"], XSS)
        assert (root / "p" / ids["alpha"] / "edits.jsonl").is_file()

        # the runs table: rename in place
        page.goto(f"{srv.url}/#/p/p")
        row = page.locator(f"tr[data-run='{ids['gamma']}']")
        row.locator(f"[data-rename='{ids['gamma']}']").click()
        box = row.get_by_label(f"New name of {ids['gamma']}")
        box.fill("gamma-2")
        box.press("Enter")
        expect(row.locator(".run-name .name")).to_have_text("gamma-2")

        # bulk tags on a selection
        for name in ("beta", "gamma"):
            page.locator(f"tr[data-run='{ids[name]}'] td.sel input").check()
        bulk = page.locator("[data-bulk-tags]")
        expect(bulk).to_contain_text("2 selected")
        bulk.get_by_label("Tag for the selected runs").fill("sweep")
        bulk.get_by_role("button", name="Add tag").click()
        expect(bulk.get_by_role("status")).to_have_text("Tagged 2 runs.")
        for name in ("beta", "gamma"):
            expect(page.locator(f"tr[data-run='{ids[name]}'] .tags")).to_contain_text("sweep")
        expect(page.locator(f"tr[data-run='{ids['alpha']}'] .tags")).not_to_contain_text("sweep")
        bulk.get_by_role("button", name="Remove tag").click()
        expect(page.locator(f"tr[data-run='{ids['beta']}'] .tags")).not_to_contain_text("sweep")
        bulk.get_by_role("button", name="Add tag").click()

        # the filter builder: config.lr > 0.005 and the tag
        builder = page.locator("[data-filter-builder]")
        builder.locator("summary").click()
        builder.get_by_role("button", name="Add condition").click()
        builder.get_by_label("Field 1").fill("config.lr")
        builder.get_by_label("Operator 1").select_option("$gt")
        builder.get_by_label("Value 1").fill("0.005")
        builder.get_by_role("button", name="Apply").click()
        expect(page.locator("table.runs tbody tr")).to_have_count(2)
        expect(page.locator(f"tr[data-run='{ids['gamma']}']")).to_have_count(0)
        assert "filter=" in page.url
        builder.get_by_role("button", name="Add condition").click()
        builder.get_by_label("Field 2").fill("tags")
        builder.get_by_label("Value 2").fill("sweep")
        builder.get_by_role("button", name="Apply").click()
        expect(page.locator("table.runs tbody tr")).to_have_count(1)
        expect(page.locator(f"tr[data-run='{ids['beta']}']")).to_have_count(1)
        page.reload()  # the filter is in the URL
        expect(page.locator("table.runs tbody tr")).to_have_count(1)
        expect(page.locator("[data-filter-builder] summary")).to_have_text("Filter (on)")
        p.check()
        p.close()
    hist = rankwise.Api(dir=root).run_edits(ids["beta"], "p")
    assert [(e.field, e.value, e.source) for e in hist] == [
        ("tags", ["t0", "sweep"], "ui"),
        ("tags", ["t0"], "ui"),
        ("tags", ["t0", "sweep"], "ui"),
    ]
