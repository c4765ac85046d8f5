"""Deleting runs in the dashboard, in headless Chromium, over ``rankwise ui``: a selection
of the runs table, the runs a filter picks (the server counts them first) and the run
page each ask for a confirmation naming the count ("Delete 2 runs?"); the trash lists
the deleted runs and restores them. The run folders follow on disk.

With ``RANKWISE_UPDATE_DOCS=1`` the confirmation's screenshot goes to
``docs/img/delete-runs.png`` (docs/deleting-runs.md).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import rankwise
from tests.helpers.browser import Page, launch_browser
from tests.helpers.servers import REPO, ServerProcess

pytestmark = pytest.mark.browser

FAST = {"flush_interval": 0.02, "heartbeat_interval": 0.2, "finish_timeout": 10.0}
DOCS = REPO / "docs" / "img"


def _runs(root: Path) -> dict[str, str]:
    ids = {}
    for name, tag in (("alpha", "t0"), ("beta", "t0"), ("gamma", "t0"), ("delta", "smoke")):
        run = rankwise.init(project="p", name=name, tags=[tag], dir=root, settings=FAST,
                            system=False)  # fmt: skip
        run.log({"loss": 1.0}, step=0)
        ids[name] = run.id
        run.finish()
    return ids


def test_delete_confirm_trash_and_restore(tmp_path: Path) -> None:
    from playwright.sync_api import expect

    root = tmp_path / "data"
    ids = _runs(root)
    rows = "table.runs tbody tr"
    with ServerProcess.ui(root, tmp_path / "ui.log") as srv, launch_browser() as browser:
        p = Page(browser)
        page = p.page
        page.goto(f"{srv.url}/#/p/p")
        expect(page.locator(rows)).to_have_count(4)

        # a selection: the dialog names the count; Cancel changes nothing
        for name in ("beta", "gamma"):
            page.locator(f"tr[data-run='{ids[name]}'] td.sel input").check()
        bar = page.locator("[data-delete-runs]")
        bar.get_by_role("button", name="Delete 2 runs…").click()
        dialog = page.get_by_role("dialog")
        expect(dialog.locator("h2")).to_have_text("Delete 2 runs?")
        dialog.get_by_role("button", name="Cancel").click()
        expect(dialog).to_have_count(0)
        expect(page.locator(rows)).to_have_count(4)
        bar.get_by_role("button", name="Delete 2 runs…").click()
        page.get_by_role("dialog").get_by_role("button", name="Delete 2 runs").click()
        expect(page.locator(rows)).to_have_count(2)
        expect(page.locator("[data-delete-runs], [role=status]").first).to_contain_text(
            "Deleted 2 runs (in the trash)."
        )
        assert (root / ".trash" / "p" / ids["beta"] / "streams").is_dir()
        assert not (root / "p" / ids["beta"]).exists()

        # the trash: both listed; restore one
        page.locator("[data-trash-toggle]").click()
        trash = page.locator("[data-trash]")
        expect(trash.locator("tr[data-trashed]")).to_have_count(2)
        trash.locator(f"tr[data-trashed='{ids['beta']}']").get_by_role(
            "button", name="Restore"
        ).click()
        expect(trash.locator("tr[data-trashed]")).to_have_count(1)
        expect(page.locator(rows)).to_have_count(3)
        assert (root / "p" / ids["beta"] / "streams").is_dir()
        page.locator("[data-trash-toggle]").click()

        # a filter: the server counts the runs it picks; purge for good
        builder = page.locator("[data-filter-builder]")
        builder.locator("summary").click()
        builder.get_by_role("button", name="Add condition").click()
        builder.get_by_label("Field 1").fill("tags")
        builder.get_by_label("Value 1").fill("smoke")
        builder.get_by_role("button", name="Apply").click()
        expect(page.locator(rows)).to_have_count(1)
        builder.locator("summary").click()  # close it
        page.get_by_role("button", name="Delete the runs this filter picks…").click()
        dialog = page.get_by_role("dialog")
        expect(dialog.locator("h2")).to_have_text("Delete 1 run?")
        expect(dialog.locator("[data-delete-ids]")).to_have_text(ids["delta"])
        dialog.locator("[data-purge]").check()
        expect(dialog).to_contain_text("This cannot be undone.")
        shot = tmp_path / "delete-runs.png"
        page.screenshot(path=str(shot))
        dialog.get_by_role("button", name="Purge 1 run").click()
        expect(dialog).to_have_count(0)
        assert not (root / "p" / ids["delta"]).exists()
        assert not (root / ".trash" / "p" / ids["delta"]).exists()

        # the run page: Delete, confirm, back to the runs
        page.goto(f"{srv.url}/#/p/p/r/{ids['alpha']}")
        page.locator("[data-delete-run]").click()
        dialog = page.get_by_role("dialog")
        expect(dialog.locator("h2")).to_have_text(f"Delete run {ids['alpha']}?")
        dialog.get_by_role("button", name="Delete 1 run").click()
        page.wait_for_url(f"{srv.url}/#/p/p")
        expect(page.locator(rows)).to_have_count(1)
        expect(page.locator(f"tr[data-run='{ids['beta']}']")).to_have_count(1)
        p.check()
        p.close()
    assert sorted(r.id for r in rankwise.Api(dir=root).runs("p")) == [ids["beta"]]
    if os.environ.get("RANKWISE_UPDATE_DOCS") == "1":
        DOCS.mkdir(parents=True, exist_ok=True)
        (DOCS / "delete-runs.png").write_bytes(shot.read_bytes())
