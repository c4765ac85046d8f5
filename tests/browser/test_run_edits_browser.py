"""Editing and finding runs in the dashboard, in headless Chromium, over ``rankwise ui``.

The run page's Edit form (name, tags, notes as Markdown built as elements, never HTML),
inline rename in the runs table, bulk tags on a selection, and the filter builder (W&B's
MongoDB-style filter in the URL, evaluated by the server). Every edit lands beside the
run's streams.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import rankwise
from tests.helpers.browser import Page, launch_browser
from tests.helpers.servers import ServerProcess

pytestmark = pytest.mark.browser

FAST = {"flush_interval": 0.02, "heartbeat_interval": 0.2, "finish_timeout": 10.0}
XSS = '<img src=x onerror="window.__xss=1"> **bold** [x](javascript:window.__xss=2)'


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
        # Markdown rendered as elements, the HTML in it as text: no img, no script ran
        expect(page.locator("[data-notes] strong")).to_have_text("bold")
        expect(page.locator("[data-notes]")).to_contain_text('<img src=x onerror="window.__xss=1">')
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


def test_grouping_and_parallel_coordinates(tmp_path: Path) -> None:
    """Rows grouped by a config key with a summary metric's mean/min/max per group; the
    parallel-coordinates panel draws a line per run and brushing an axis filters."""
    from playwright.sync_api import expect

    root = tmp_path / "data"
    specs = [("a1", 0.1, "adam", 1.0), ("a2", 0.01, "adam", 3.0), ("s1", 0.001, "sgd", 2.0),
             ("s2", 0.0001, "sgd", 4.0)]  # fmt: skip
    ids = {}
    for name, lr, opt, loss in specs:
        cfg = {"lr": lr, "opt": opt, "depth": len(name)}
        run = rankwise.init(project="p", name=name, config=cfg, dir=root, settings=FAST,
                            system=False)  # fmt: skip
        run.log({"loss": loss}, step=0)
        ids[name] = run.id
        run.finish()
    with ServerProcess.ui(root, tmp_path / "ui.log") as srv, launch_browser() as browser:
        p = Page(browser)
        page = p.page
        page.goto(f"{srv.url}/#/p/p")
        expect(page.locator("table.runs tbody tr")).to_have_count(4)
        page.get_by_label("Group by").select_option("config.opt")
        page.get_by_label("Aggregate metric").select_option("loss")
        groups = page.locator("tr.group-row")
        expect(groups).to_have_count(2)
        adam = page.locator("tr.group-row", has_text="config.opt = adam")
        expect(adam.locator("[data-group-agg]")).to_have_text("loss: mean 2 · min 1 · max 3")
        sgd = page.locator("tr.group-row", has_text="config.opt = sgd")
        expect(sgd.locator("[data-group-agg]")).to_have_text("loss: mean 3 · min 2 · max 4")
        assert "by=config.opt" in page.url and "agg=loss" in page.url

        page.get_by_label("Parallel coordinates").check()
        panel = page.locator("[data-parcoords]")
        expect(panel.locator("polyline")).to_have_count(4)
        expect(panel.locator("[data-axis='summary.loss']")).to_have_count(1)
        # brush the loss axis over its top half (loss 2.5 .. 4): s2 and a2 stay
        brush = panel.locator("[data-brush='summary.loss']")
        box = brush.bounding_box()
        assert box is not None
        x = box["x"] + box["width"] / 2
        page.mouse.move(x, box["y"] + 1)
        page.mouse.down()
        page.mouse.move(x, box["y"] + box["height"] * 0.5, steps=5)
        page.mouse.up()
        expect(page.locator("table.runs tbody tr:not(.group-row)")).to_have_count(2)
        for name in ("a2", "s2"):
            expect(page.locator(f"tr[data-run='{ids[name]}']")).to_have_count(1)
        assert "filter=" in page.url
        expect(page.locator("[data-filter-builder] summary")).to_have_text("Filter (on)")
        p.check()
        p.close()
