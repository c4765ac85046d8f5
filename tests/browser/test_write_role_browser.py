"""The dashboard's edit controls follow the session's role, in headless Chromium.

A session of a write token of the project sees and uses the run edit controls (the run
page's Edit, the runs table's rename) and the new-report form; a session of a read token
of the same project sees none of them (the server would refuse its edits with 403).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rankwise.server import ServerSettings, create_app
from rankwise.store import open_store
from rankwise.stream.identity import StreamId
from tests.helpers.browser import STATIC, launch_browser
from tests.helpers.servers import browser_login, serve_in_thread
from tests.helpers.streams import records

pytestmark = pytest.mark.browser


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Any, str, str]]:
    store = open_store(f"sqlite:///{tmp_path / 'db.sqlite'}")
    store.migrate()
    store.ingest([(StreamId("p", "r1", "rank-0", 0), records(steps=3, project="p", run="r1"))])
    writer = store.create_token("write", ["p"], "alice").value
    reader = store.create_token("read", ["p"], "bob").value
    app = create_app(store, ServerSettings(static_dir=STATIC, token_cache_ttl=0))
    with serve_in_thread(app, token_env=False) as url:
        yield url.replace("127.0.0.1", "localhost"), store, writer, reader
    store.close()


def _page(browser: Any, url: str, token: str) -> tuple[Any, Any, list[str]]:
    ctx = browser.new_context(viewport={"width": 1200, "height": 900})
    browser_login(ctx, url, token)
    page = ctx.new_page()
    page.set_default_timeout(20_000)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    return ctx, page, errors


def test_a_writer_sees_and_uses_edit_controls_a_reader_sees_none(
    served: tuple[str, Any, str, str],
) -> None:
    from playwright.sync_api import expect

    url, store, writer, reader = served
    with launch_browser() as browser:
        ctx, page, errors = _page(browser, url, writer)
        page.goto(f"{url}/#/p/p")
        expect(page.locator("[data-run='r1']")).to_be_visible()
        expect(page.locator("[data-rename='r1']")).to_have_count(1)
        page.goto(f"{url}/#/p/p/r/r1")
        page.locator("[data-edit-run]").click()
        page.get_by_label("Run name").fill("renamed-by-writer")
        page.get_by_role("button", name="Save").click()
        expect(page.locator("h1")).to_have_text("renamed-by-writer")
        page.goto(f"{url}/#/p/p/reports")
        expect(page.locator("form.new-report")).to_be_visible()
        assert errors == []
        ctx.close()
        run = store.get_run("p", "r1")
        assert run is not None and run.name == "renamed-by-writer"
        hist = store.run_edits("p", "r1")
        assert hist is not None and {(e.who, e.source) for e in hist} == {("alice", "ui")}

        ctx, page, errors = _page(browser, url, reader)
        page.goto(f"{url}/#/p/p")
        expect(page.locator("[data-run='r1']")).to_be_visible()
        expect(page.locator("[data-rename]")).to_have_count(0)
        page.goto(f"{url}/#/p/p/r/r1")
        expect(page.locator("h1")).to_have_text("renamed-by-writer")
        expect(page.locator("[data-edit-run]")).to_have_count(0)
        page.goto(f"{url}/#/p/p/reports")
        expect(page.locator("h1")).to_have_text("Reports")
        expect(page.locator("form.new-report")).to_have_count(0)
        assert errors == []
        ctx.close()
