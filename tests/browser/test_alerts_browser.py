"""Alerts in the dashboard, in headless Chromium: the runs table marks a run with an alert
not yet delivered, the run page lists its alerts with each delivery's state, and the
admin page lists, adds, tests and removes destinations without ever showing a secret.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from rankwise.alert_config import make_destination
from rankwise.server import ServerSettings, create_app
from rankwise.server.alert_watch import Deliverer
from rankwise.server.config import AlertSettings
from rankwise.store import open_store
from rankwise.stream import records as R
from rankwise.stream.identity import StreamId
from tests.helpers.browser import launch_browser
from tests.helpers.receivers import WebhookReceiver
from tests.helpers.servers import admin_token, browser_login, serve_in_thread

pytestmark = pytest.mark.browser


def test_run_page_runs_table_and_admin_page_show_alerts(tmp_path: Path) -> None:
    from playwright.sync_api import expect

    hook = WebhookReceiver().start()
    dead = WebhookReceiver()  # never started: its deliveries stay pending
    store = open_store(f"sqlite:///{tmp_path / 's.db'}")
    store.migrate()
    alerts = AlertSettings(allow_private_webhooks=True)
    for url in (hook.url + "/live-secret", dead.url + "/dead-secret"):
        store.add_destination(
            make_destination(
                project="vis",
                kind="webhook",
                target=url,
                events="nonfinite",
                secret="hmac-secret",
                allow_private=True,
            )
        )
    key = StreamId("vis", "nan-run", "rank-0", 0)
    start = R.StreamStart(0, 1.0, "vis", "nan-run", "rank-0", 0, rank=0, world_size=1)
    store.ingest([(key, [start, R.Metrics(1, 2.0, 0, {"loss": float("nan")})])])
    Deliverer(store, alerts).deliver_due()
    Deliverer(store, alerts).deliver_due()
    settings = ServerSettings(static_dir=ServerSettings.static_dir, alerts=alerts)
    app = create_app(store, dataclasses.replace(settings))
    try:
        with serve_in_thread(app) as url, launch_browser() as browser:
            ctx = browser.new_context()
            browser_login(ctx, url, admin_token(app))
            page = ctx.new_page()
            page.set_default_timeout(20_000)
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))

            page.goto(url + "/#/p/vis")
            mark = page.locator("[data-run='nan-run'] [data-open-alerts]")
            expect(mark).to_have_text("1 open alert")

            page.goto(url + "/#/p/vis/r/nan-run")
            item = page.locator("[data-alerts] [data-alert='nonfinite']")
            expect(item).to_contain_text("loss is NaN (rank 0, step 0)")
            expect(item.locator("[data-delivery='delivered']")).to_have_count(1)
            expect(item.locator("[data-delivery='pending']")).to_contain_text("(1 attempt)")
            page.screenshot(path=str(tmp_path / "run-alerts.png"))
            _no_secret(page)

            page.goto(url + "/#/alerts")
            expect(page.locator("[data-destination]")).to_have_count(2)
            _no_secret(page)
            form = page.locator("[data-add-destination]")
            form.locator("input[name=project]").fill("vis")
            form.locator("input[name=target]").fill(hook.url + "/slack-secret")
            form.get_by_role("button", name="Add").click()
            expect(page.locator("[data-destination]")).to_have_count(3)
            row = page.locator("[data-destination]").last
            expect(row).to_contain_text("slack")
            row.get_by_role("button", name="Test").click()
            expect(row.locator("[data-test-result]")).to_have_text("delivered")
            assert [r.path for r in hook.accepted()][-1] == "/slack-secret"
            page.screenshot(path=str(tmp_path / "alerts-page.png"))
            _no_secret(page)
            row.get_by_role("button", name="Remove").click()
            expect(page.locator("[data-destination]")).to_have_count(2)
            assert not errors, errors
    finally:
        hook.stop()
        store.close()


def _no_secret(page: Any) -> None:
    html = page.content()
    for secret in ("live-secret", "dead-secret", "slack-secret", "hmac-secret"):
        assert secret not in html
