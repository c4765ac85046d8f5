"""Stored XSS renders as text, under the real CSP, in Debian's Chromium (security §6 row 20).

A run whose name, config value, console line (with an OSC 8 ``javascript:`` link) and
metric key carry markup is uploaded to a real uvicorn serving the built dashboard. Each
page that shows those fields is opened: the payloads must be visible as text, add no
element or handler, fire no dialog, and the page must raise no CSP violation (the
dashboard itself keeps to ``script-src 'self'`` with no inline script or style).

Table cells and image captions do not exist yet (no rich data): they join this test
with the routes that store them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rankwise.server import ServerSettings, create_app
from rankwise.store import open_store
from rankwise.stream import records as R
from rankwise.stream.identity import StreamId
from tests.helpers.browser import STATIC, launch_browser, need_browser
from tests.helpers.servers import admin_token, browser_login, serve_in_thread

pytestmark = pytest.mark.browser

PAYLOADS = {
    "name": '<img src=x onerror="window.__xss=1;alert(1)">xss-run',
    "config": '<script>window.__xss=2;alert(2)</script>"><svg onload=alert(3)>',
    "console": (
        "<img src=x onerror=alert(4)>line \x1b]8;;javascript:alert(5)\x1b\\click\x1b]8;;\x1b\\"
    ),
    "key": "debug/<svg onload=alert(6)>",
}
# Records the page's CSP violations and dialogs before any script of the page runs.
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


@pytest.fixture(scope="module")
def xss_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    need_browser()
    tmp: Path = tmp_path_factory.mktemp("xss")
    store = open_store(f"sqlite:///{tmp / 'db.sqlite'}")
    store.migrate()
    start = R.StreamStart(
        0, 1000.0, "xss", "run1", "rank-0", 0, name=PAYLOADS["name"],
        config={"note": PAYLOADS["config"]}, rank=0, world_size=1, is_primary=True,
    )  # fmt: skip
    recs: list[R.AnyRecord] = [start]
    for step in range(5):
        recs.append(R.Metrics(len(recs), 1001.0 + step, step, {PAYLOADS["key"]: step * 0.5}))
    recs.append(R.Console(len(recs), 1010.0, "stdout", [PAYLOADS["console"]]))
    recs.append(R.Finish(len(recs), 1011.0, "finished", last_step=4))
    store.ingest([(StreamId("xss", "run1", "rank-0", 0), recs)])
    app = create_app(store, ServerSettings(static_dir=STATIC))
    with serve_in_thread(app) as url:
        yield url.replace("127.0.0.1", "localhost"), admin_token(app)
    store.close()


def test_stored_payloads_render_as_text(xss_server: tuple[str, str]) -> None:
    from playwright.sync_api import expect

    with launch_browser() as browser:
        url, token = xss_server
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        browser_login(context, url, token)  # a reader's session, as a user has
        page = context.new_page()
        page.set_default_timeout(20_000)
        dialogs: list[str] = []
        errors: list[str] = []
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))  # type: ignore[func-returns-value]
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.add_init_script(WATCH)
        views = [
            ("/#/p/xss", PAYLOADS["name"]),
            ("/#/p/xss/r/run1?tab=charts", PAYLOADS["key"]),
            ("/#/p/xss/r/run1?tab=config", PAYLOADS["config"]),
            ("/#/p/xss/r/run1?tab=logs", "line click"),
        ]
        for path, text in views:
            page.goto(url + path)
            expect(page.get_by_text(text).first).to_be_visible()
            check(page, path)
        assert dialogs == [] and errors == [], (dialogs, errors)


def check(page: Any, where: str) -> None:
    assert page.evaluate("window.__xss") is None, f"{where}: user text was run as code"
    assert page.locator(INJECTED).count() == 0, f"{where}: user text became elements"
    assert page.evaluate("window.__violations") == [], f"{where}: the page broke its CSP"
