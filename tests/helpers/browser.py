"""Debian's Chromium, headless, driven by Playwright: one launch for every browser test.

No Chromium at ``/usr/bin/chromium``: a browser test skips locally and fails under CI
(``tests.helpers.env.in_ci``), where ``.ci/run`` installs it. The dashboard must be
built into the package (``make setup`` runs ``npm ci && npm run build`` in ui/).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .env import REPO, in_ci

CHROMIUM = Path("/usr/bin/chromium")
# No sandbox (tests run as root in containers), no GPU, and nothing the browser would
# fetch or update by itself: the only traffic is the page's own.
CHROME_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
STATIC = REPO / "rankwise" / "server" / "static"


def need_browser() -> None:
    """Skip without Chromium (fail under CI); fail when the dashboard is not built."""
    if not CHROMIUM.exists():
        if in_ci():
            pytest.fail(f"no Chromium at {CHROMIUM} in CI: .ci/run installs chromium")
        pytest.skip(f"no Chromium at {CHROMIUM}: apt-get install -y chromium chromium-driver")
    if not (STATIC / "index.html").is_file():
        pytest.fail(
            f"the dashboard is not built into {STATIC}: run `make setup` "
            "(or `npm ci && npm run build` in ui/)"
        )


@contextlib.contextmanager
def launch_browser() -> Iterator[Any]:
    """Headless Chromium through Playwright, closed afterwards."""
    need_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROME_ARGS)
        try:
            yield b
        finally:
            b.close()


class Page:
    """A page that records its errors and requests; ``check()`` fails the test on script
    errors, failed API calls and user text run as code."""

    def __init__(self, browser: Any, width: int = 1280, height: int = 800, dark: bool = False):
        # bypass_csp: Playwright's wait_for_function evaluates strings, which the
        # dashboard's CSP forbids; tests/browser/test_xss_browser.py checks the page under it.
        self.ctx = browser.new_context(
            viewport={"width": width, "height": height},
            color_scheme="dark" if dark else "light",
            bypass_csp=True,
        )
        self.page = self.ctx.new_page()
        self.page.set_default_timeout(20_000)
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.page.on("pageerror", lambda e: self.errors.append(f"page error: {e}"))
        self.page.on(
            "console",
            lambda m: (
                self.errors.append(f"console {m.type}: {m.text}") if m.type == "error" else None
            ),
        )
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.on("response", self._response)

    def _response(self, r: Any) -> None:
        if r.status >= 400 and "/api/" in r.url:
            self.errors.append(f"HTTP {r.status} for {r.url}")

    def check(self) -> None:
        assert self.page.evaluate("window.__xss") is None, "user text was run as code"
        assert not self.errors, "\n".join(self.errors)

    def close(self) -> None:
        self.ctx.close()


def drawn(lines: int | None = None) -> str:
    """The selector of a chart card drawn (with ``lines`` per-rank lines)."""
    sel = '.chart-card[data-state="drawn"]'
    return sel if lines is None else f'{sel}[data-lines="{lines}"]'


def first_charts_ms(page: Any, timeout_ms: int = 60_000) -> float:
    """When the page's ``rankwise:first-charts`` mark fired, in ms since navigation."""
    page.wait_for_function(
        "performance.getEntriesByName('rankwise:first-charts').length > 0", timeout=timeout_ms
    )
    return float(
        page.evaluate("performance.getEntriesByName('rankwise:first-charts')[0].startTime")
    )
