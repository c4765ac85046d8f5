"""Artifacts in the dashboard, in Debian's Chromium under the real CSP.

A real uvicorn serves the built dashboard over SQLite and a local blob store; five runs
are ingested (``prep-1``, ``train-1``, ``eval-1``, ``eval-2``; ``plain-1`` has no
artifact) and the golden artifacts (``tests/helpers/golden_artifacts.py``) are published
to it over HTTP with ``RemoteArtifacts``, their uses recorded. The run page's Artifacts
tab and the project's Artifacts page are opened: names, versions, aliases, sizes, digests
and lineage show; a download link's href is the file route, its reply an attachment that
is the file's bytes; a reference is text, never a link; markup in a description, a
metadata value and a file name adds no element and runs nothing.

With ``RANKWISE_UPDATE_DOCS=1`` the project page's screenshot goes to
``docs/img/artifacts-page.png`` (the README's "Artifacts in the dashboard").
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import pytest

from rankwise.server import ServerSettings, create_app
from rankwise.store import open_store
from rankwise.store.blobs import LocalBlobStore
from rankwise.stream import records as R
from rankwise.stream.identity import StreamId
from tests.helpers.browser import STATIC, need_browser
from tests.helpers.env import REPO
from tests.helpers.golden_artifacts import (
    ACCURACIES,
    MODEL_V1,
    PROJECT,
    REFERENCE,
    XSS_DESC,
    XSS_FILE,
    XSS_META,
    publish_golden,
)
from tests.helpers.servers import admin_token, browser_login, serve_in_thread

pytestmark = pytest.mark.browser

RUNS = ("prep-1", "train-1", "eval-1", "eval-2", "plain-1")  # plain-1: no artifact
DOCS = REPO / "docs" / "img"
# The page's CSP violations, before any script of the page runs.
WATCH = """
window.__violations = [];
document.addEventListener('securitypolicyviolation',
  (e) => window.__violations.push(e.violatedDirective + ' ' + e.blockedURI));
"""
# What the payloads would make if rendered as HTML (the text file's "<b>" is in no view).
INJECTED = ", ".join(
    f"#app {sel}"
    for sel in (
        "script",
        "img[src='x']",
        "[onerror]",
        "[onload]",
        "a[href^='http']",
        "iframe",
        ".artifacts-tab b",
        ".artifacts-page b",
    )
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    need_browser()
    tmp: Path = tmp_path_factory.mktemp("artifacts")
    store = open_store(f"sqlite:///{tmp / 'db.sqlite'}")
    store.migrate()
    for i, run in enumerate(RUNS):
        t = 1794998000.0 + 1000 * i
        recs: list[R.AnyRecord] = [
            R.StreamStart(0, t, PROJECT, run, "rank-0", 0, rank=0, world_size=1, is_primary=True),
            R.Metrics(1, t + 1, 0, {"loss": 1.0}),
            R.Finish(2, t + 2, "finished", last_step=0),
        ]
        store.ingest([(StreamId(PROJECT, run, "rank-0", 0), recs)])
    settings = ServerSettings(static_dir=STATIC, blobs=LocalBlobStore(tmp / "blobs"))
    app = create_app(store, settings)
    with serve_in_thread(app, token_env=False) as url:
        token = admin_token(app)
        publish_golden(url, token, tmp / "staged")
        yield url.replace("127.0.0.1", "localhost"), token
    store.close()


class Watched:
    """A logged-in page under the dashboard's CSP that records dialogs, errors and
    CSP violations; ``check`` fails on any, or on user text become elements."""

    def __init__(self, browser: Any, url: str, token: str) -> None:
        self.context = browser.new_context(
            viewport={"width": 1280, "height": 900}, accept_downloads=True
        )
        browser_login(self.context, url, token)
        self.page = self.context.new_page()
        self.page.set_default_timeout(20_000)
        self.problems: list[str] = []
        self.page.on("dialog", lambda d: (self.problems.append(d.message), d.dismiss()))  # type: ignore[func-returns-value]
        self.page.on("pageerror", lambda e: self.problems.append(str(e)))
        self.page.on(
            "console", lambda m: self.problems.append(m.text) if m.type == "error" else None
        )
        self.page.add_init_script(WATCH)

    def check(self, where: str) -> None:
        page = self.page
        assert page.evaluate("window.__xss") is None, f"{where}: user text was run as code"
        assert page.locator(INJECTED).count() == 0, f"{where}: user text became elements"
        assert page.evaluate("window.__violations") == [], f"{where}: the page broke its CSP"
        assert self.problems == [], f"{where}: {self.problems}"

    def close(self) -> None:
        self.context.close()


def test_run_page_artifacts_tab(browser: Any, server: tuple[str, str]) -> None:
    from playwright.sync_api import expect

    url, token = server
    w = Watched(browser, url, token)
    page = w.page
    page.goto(f"{url}/#/p/{PROJECT}/r/train-1")
    # The tab shows (with a count) because the run logged and used artifacts.
    expect(page.get_by_role("tab", name="Artifacts")).to_contain_text("4")
    page.get_by_role("tab", name="Artifacts").click()
    logged = page.locator('[data-artifacts="logged"] tbody')
    expect(logged).to_have_count(3)
    assert [logged.nth(i).get_attribute("data-artifact") for i in range(3)] == [
        "mnist-cnn:v0",
        "mnist-cnn:v1",
        "accuracies:v0",
    ]
    used = page.locator('[data-artifacts="used"] tbody')
    expect(used).to_have_count(1)
    expect(used.first.locator(".artifact-name")).to_have_text("mnist-train")
    expect(used.first.locator("a.run-link")).to_have_attribute("href", f"#/p/{PROJECT}/r/prep-1")

    v1 = page.locator('tbody[data-artifact="mnist-cnn:v1"]')
    expect(v1.locator(".alias")).to_have_text(["latest", "best"])
    expect(v1.locator("td.num").first).to_have_text("2.38 MiB")
    expect(v1.locator("td.num").nth(1)).to_have_text("3")
    v1.get_by_role("button", name="Files").click()
    files = v1.locator("table.artifact-files tbody tr")
    expect(files).to_have_count(3)
    # Paths with spaces and '?' are text; each file links to its route.
    expect(v1.locator(".file-path").first).to_have_text("eval/acc per epoch?.json")
    link = v1.locator('tr[data-path="eval/acc per epoch?.json"] a.download')
    href = link.get_attribute("href")
    assert href == (f"api/v1/artifacts/{PROJECT}/mnist-cnn/v1/files/eval/acc%20per%20epoch%3F.json")
    # Digests short, the whole value in the title.
    digest = hashlib.sha256(ACCURACIES).hexdigest()
    code = v1.locator('tr[data-path="eval/acc per epoch?.json"] .digest code')
    expect(code).to_have_text(digest[:12] + "…")
    expect(code).to_have_attribute("title", digest)
    # The reference is its URI as text, no link.
    ref = v1.locator('tr[data-path="source"]')
    expect(ref.locator(".ref-uri")).to_have_text(REFERENCE)
    expect(ref.locator("a")).to_have_count(0)
    expect(page.locator(f'a[href*="{REFERENCE[:20]}"]')).to_have_count(0)
    expect(v1.locator(".artifact-metadata")).to_contain_text('"lr": 0.01')
    # Markup in a description, a metadata value and a file name: text.
    acc = page.locator('tbody[data-artifact="accuracies:v0"]')
    acc.get_by_role("button", name="Files").click()
    expect(acc.locator(".artifact-description")).to_have_text(XSS_DESC)
    expect(acc.locator(".artifact-metadata")).to_contain_text('"note": "<img src=x onerror=')
    expect(acc.locator(".artifact-metadata")).to_contain_text(XSS_META.replace('"', '\\"'))
    expect(acc.locator(".file-path").first).to_have_text(XSS_FILE)
    expect(acc.locator("a.download").first).to_have_attribute(
        "href", f"api/v1/artifacts/{PROJECT}/accuracies/v0/files/" + quote(XSS_FILE, safe="")
    )

    # The download: an attachment carrying the file's bytes, never rendered.
    reply = w.context.request.get(f"{url}/{href}")
    assert reply.status == 200
    headers = reply.headers
    assert headers["content-disposition"].startswith("attachment;")
    assert unquote(headers["content-disposition"].split("filename*=UTF-8''")[1]) == (
        "acc per epoch?.json"
    )
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["content-type"] == "application/octet-stream"
    assert "sandbox" in headers["content-security-policy"]
    assert reply.body() == ACCURACIES
    # A click downloads the model (the browser saves it, the page stays).
    with page.expect_download() as got:
        v1.locator('tr[data-path="model.pt"] a.download').click()
    saved = got.value
    assert saved.suggested_filename == "model.pt"
    assert Path(saved.path()).read_bytes() == MODEL_V1
    expect(page.get_by_role("tab", name="Artifacts")).to_have_attribute("aria-selected", "true")
    w.check("run page, Artifacts tab")

    # A run that logged and used nothing: an empty state if asked for, else no tab.
    page.goto(f"{url}/#/p/{PROJECT}/r/plain-1?tab=artifacts")
    expect(page.locator(".empty h3")).to_have_text("No artifacts logged or used by this run")
    expect(page.get_by_role("tab", name="Artifacts")).to_contain_text("0")
    page.get_by_role("tab", name="Charts").click()
    expect(page.get_by_role("tab", name="Artifacts")).to_have_count(0)
    w.check("run page without artifacts")
    w.close()


def test_project_artifacts_page(browser: Any, server: tuple[str, str], tmp_path: Path) -> None:
    from playwright.sync_api import expect

    url, token = server
    w = Watched(browser, url, token)
    page = w.page
    asked: list[str] = []
    page.on("request", lambda r: asked.append(r.url) if "/api/v1/artifacts" in r.url else None)
    # Linked from the project's runs page.
    page.goto(f"{url}/#/p/{PROJECT}")
    page.get_by_role("link", name="Artifacts").click()
    expect(page.get_by_role("heading", name="Artifacts", exact=True)).to_be_visible()
    assert page.url.endswith(f"#/p/{PROJECT}/artifacts")

    # Names grouped by type, types in order; the first name is open at its newest version.
    groups = page.locator(".artifact-names .side-block")
    expect(groups).to_have_count(3)
    assert [groups.nth(i).get_attribute("data-type") for i in range(3)] == [
        "dataset",
        "model",
        "result",
    ]
    expect(page.locator('.side-block[data-type="model"] li')).to_contain_text("2 versions · v1")
    expect(page.locator(".artifact-title")).to_contain_text("accuracies")
    # ... whose description, metadata and file name carry markup: text.
    expect(page.locator(".artifact-description-cell")).to_have_text(XSS_DESC)
    expect(page.locator(".version-details .artifact-description")).to_have_text(XSS_DESC)
    expect(page.locator(".version-details .file-path").first).to_have_text(XSS_FILE)
    w.check("artifacts page, accuracies:v0")

    # A name: its versions, newest first, with aliases; the newest one's details.
    page.locator('.artifact-names li[data-name="mnist-cnn"] a').click()
    rows = page.locator("table.artifact-versions tbody tr")
    expect(rows).to_have_count(2)
    assert [rows.nth(i).get_attribute("data-version") for i in range(2)] == ["v1", "v0"]
    expect(rows.first.locator(".alias")).to_have_text(["latest", "best"])
    expect(rows.nth(1).locator(".alias")).to_have_count(0)
    expect(rows.first.locator(".artifact-description-cell")).to_have_text("the CNN after 2 epochs")
    expect(page.locator(".version-heading")).to_have_text("mnist-cnn:v1")
    # Lineage: the run that logged it and the runs that used it, as links.
    logged_by = page.locator(".version-details .lineage-logged a")
    expect(logged_by).to_have_text("train-1 (rank-0)")
    expect(logged_by).to_have_attribute("href", f"#/p/{PROJECT}/r/train-1")
    used_by = page.locator(".version-details .lineage-used a")
    expect(used_by).to_have_text(["eval-1 (rank-0)", "eval-2"])
    expect(page.locator(".version-details .artifact-metadata")).to_contain_text('"lr": 0.01')
    expect(page.locator(".version-details a.download")).to_have_count(2)
    expect(page.locator(".version-details .ref-uri")).to_have_text(REFERENCE)
    page.mouse.move(5, 5)
    page.screenshot(path=tmp_path / "artifacts-page.png")
    w.check("artifacts page, mnist-cnn:v1")

    # Another version: its metadata and no lineage of use.
    rows.nth(1).get_by_role("link", name="v0").click()
    expect(page.locator(".version-heading")).to_have_text("mnist-cnn:v0")
    expect(page.locator(".version-details .artifact-metadata")).to_contain_text('"epochs": 1')
    expect(page.locator(".version-details .lineage-used")).to_contain_text("no run yet")

    # A type: the server filters (?type=model), one group remains.
    page.get_by_role("button", name="model", exact=True).click()
    expect(page.locator(".artifact-names .side-block")).to_have_count(1)
    expect(page.locator(".artifact-names li")).to_have_count(1)
    expect(page.locator(".artifact-names li")).to_contain_text(
        "mnist-cnn2 versions · v1 · 2.38 MiB"
    )
    assert any(u.endswith(f"/api/v1/artifacts/{PROJECT}?type=model") for u in asked), asked

    # An unknown name in the address: a plain 404, the rest of the page still there.
    page.goto(f"{url}/#/p/{PROJECT}/artifacts?name=no-such-model")
    expect(page.locator(".error-box")).to_contain_text("Not found")
    expect(page.locator(".error-box")).to_contain_text("no artifact 'no-such-model'")
    expect(page.locator(".artifact-names li")).to_have_count(3)
    w.problems = [p for p in w.problems if "404" not in p]  # the refused read, on purpose

    # Lineage links open the run.
    page.goto(f"{url}/#/p/{PROJECT}/artifacts?name=mnist-cnn&version=best")
    expect(page.locator(".version-heading")).to_have_text("mnist-cnn:v1")
    page.locator(".version-details .lineage-used a", has_text="eval-1").click()
    expect(page.locator(".run-title h1")).to_have_text("eval-1")
    w.check("artifacts page")
    w.close()
    if os.environ.get("RANKWISE_UPDATE_DOCS") == "1":
        DOCS.mkdir(parents=True, exist_ok=True)
        (DOCS / "artifacts-page.png").write_bytes((tmp_path / "artifacts-page.png").read_bytes())
