"""The dashboard's login in headless Chromium against a real ``rankwise server``.

A visitor without a session sees the login page; a bad token and an ingest token are
refused with a message; a read token logs in (an HttpOnly, SameSite=Strict cookie the
page cannot read), the runs show, a reload keeps the session, and logging out ends it
on the server too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from rankwise.store import open_store
from tests.helpers.browser import launch_browser
from tests.helpers.servers import ServerProcess, bearer
from tests.helpers.streams import body, records

pytestmark = pytest.mark.browser


def test_login_see_runs_logout(tmp_path: Path) -> None:
    from playwright.sync_api import expect

    db = f"sqlite:///{tmp_path / 'login.db'}"
    with open_store(db) as store:
        store.migrate()
        read = store.create_token("read", ["vis"], "viewer").value
        ingest = store.create_token("ingest", ["vis"], "ranks").value
    with ServerProcess.db(db, tmp_path / "server.log") as srv:
        params = {"project": "vis", "run": "seen-run", "label": "rank-0", "incarnation": 0}
        data = body(records(steps=5, project="vis", run="seen-run"))
        up = httpx.post(srv.url + "/api/v1/ingest", params=params, content=data,
                        headers=bearer(ingest))  # fmt: skip
        assert up.status_code == 200, up.text
        with launch_browser() as browser:
            ctx = browser.new_context()
            page = ctx.new_page()
            page.set_default_timeout(20_000)
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(srv.url + "/#/p/vis")
            token_box = page.get_by_label("Token")
            expect(token_box).to_be_visible()
            expect(page.locator("text=seen-run")).to_have_count(0)

            _submit(page, "rk_r_000000000000_" + "A" * 43)
            expect(page.get_by_role("alert")).to_contain_text("not valid")
            _submit(page, ingest)
            expect(page.get_by_role("alert")).to_contain_text("read, write or admin")

            _submit(page, read)
            expect(page.locator("text=seen-run").first).to_be_visible()
            cookies = {c["name"]: c for c in ctx.cookies()}
            session = cookies["rk_session"]
            assert session["httpOnly"] and session["sameSite"] == "Strict"
            assert session["path"] == "/"
            assert page.evaluate("document.cookie").find("rk_session") == -1
            assert read not in page.content()  # the token is not kept in the page

            page.reload()
            expect(page.locator("text=seen-run").first).to_be_visible()

            page.get_by_role("button", name="Log out").click()
            expect(page.get_by_label("Token")).to_be_visible()
            gone = httpx.get(
                srv.url + "/api/v1/projects",
                cookies={"rk_session": session["value"]},
                timeout=5,
            )
            assert gone.status_code == 401  # revoked on the server, not just forgotten
            page.goto(srv.url + "/#/p/vis/r/seen-run")
            expect(page.get_by_label("Token")).to_be_visible()
            assert not errors, errors


def _submit(page: Any, token: str) -> None:
    box = page.get_by_label("Token")
    box.fill(token)
    page.get_by_role("button", name="Log in").click()
