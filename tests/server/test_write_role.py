"""The ``write`` role against a real uvicorn server, on SQLite and PostgreSQL.

A write token (``rk_w_``) of project ``p`` reads ``p`` as a read token does, logs in to
the dashboard, saves and deletes reports and edits runs of ``p``; it gets 403 on project
``q``, on every upload route and on token and alert-destination management, and nothing
is written by a refused request. A read token still cannot save a report or edit a run.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from rankwise import tokens as T
from rankwise.cli import main as cli_main
from rankwise.server import ServerSettings, create_app
from rankwise.store import open_store
from rankwise.stream.identity import StreamId
from tests.helpers.servers import bearer, serve_in_thread
from tests.helpers.stores import open_sql_store
from tests.helpers.streams import body, records

REPORT = {"title": "Weekly", "blocks": [{"type": "text", "text": "# Results"}], "base": 0}
LOGIN = {"Sec-Fetch-Site": "same-origin", "X-Rankwise-CSRF": "1"}


class World:
    def __init__(self, url: str, store: Any) -> None:
        self.url, self.store = url, store
        self.write_p = store.create_token("write", ["p"], "alice").value
        self.read_p = store.create_token("read", ["p"], "bob").value
        self.ingest_p = store.create_token("ingest", ["p"], "ranks").value

    def req(self, method: str, path: str, token: str, **kw: Any) -> httpx.Response:
        return httpx.request(method, self.url + path, headers=bearer(token), timeout=10, **kw)


@pytest.fixture(params=["sqlite", "postgres"])
def world(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[World]:
    store = open_sql_store(request.param, tmp_path, request)
    store.migrate()
    for project in ("p", "q"):
        recs = records(steps=3, project=project, run="r1")
        store.ingest([(StreamId(project, "r1", "rank-0", 0), recs)])
    settings = ServerSettings(
        static_dir=tmp_path / "no-static", token_cache_ttl=0, token_touch_interval=0
    )
    app = create_app(store, settings)
    with serve_in_thread(app, token_env=False) as url:
        yield World(url, store)
    store.close()


def test_a_write_token_reads_and_edits_its_project_only(world: World) -> None:
    w, tok = world, world.write_p
    assert T.parse(tok) is not None and T.parse(tok)[0] == "write"
    assert tok.startswith("rk_w_")
    # reads its project like a read token; sees only it
    assert w.req("GET", "/api/v1/projects", tok).json()["projects"][0]["name"] == "p"
    assert [p["name"] for p in w.req("GET", "/api/v1/projects", tok).json()["projects"]] == ["p"]
    r = w.req("GET", "/api/v1/projects/p/runs", tok)
    assert r.status_code == 200 and [x["id"] for x in r.json()["runs"]] == ["r1"]
    assert w.req("GET", "/api/v1/projects/p/runs/r1", tok).status_code == 200
    assert w.req("GET", "/api/v1/projects/p/reports", tok).status_code == 200
    view = {"name": "mine", "filters": {"state": ["finished"]}}
    assert w.req("POST", "/api/v1/projects/p/views", tok, json=view).status_code == 200
    # saves, reads back and deletes a report of its project; the author is its name
    r = w.req("POST", "/api/v1/projects/p/reports/weekly", tok, json=REPORT)
    assert r.status_code == 200, r.text
    assert r.json()["author"] == "alice" and r.json()["version"] == 1
    assert w.req("GET", "/api/v1/projects/p/reports/weekly", tok).json()["title"] == "Weekly"
    # edits a run of its project, and tags a selection
    edit = {"name": "renamed", "tags": ["best"], "notes": "kept", "group": "g", "job_type": "t"}
    r = w.req("POST", "/api/v1/projects/p/runs/r1/edits", tok, json=edit)
    assert r.status_code == 200, r.text
    got = r.json()
    assert (got["name"], got["tags"], got["notes"], got["group"]) == (
        "renamed",
        ["best"],
        "kept",
        "g",
    )
    r = w.req("POST", "/api/v1/projects/p/runs/tags", tok, json={"runs": ["r1"], "add": ["x"]})
    assert r.status_code == 200 and r.json()["edited"] == ["r1"]
    hist = w.req("GET", "/api/v1/projects/p/runs/r1/edits", tok).json()["edits"]
    assert {e["who"] for e in hist} == {"alice"}
    assert w.req("DELETE", "/api/v1/projects/p/reports/weekly", tok).status_code == 204
    assert w.store.get_report("p", "weekly", None) is None


def test_a_write_token_cannot_touch_another_project_upload_or_administer(world: World) -> None:
    w, tok = world, world.write_p
    for method, path, kw in [
        ("GET", "/api/v1/projects/q/runs", {}),
        ("GET", "/api/v1/projects/q/runs/r1", {}),
        ("POST", "/api/v1/projects/q/reports/weekly", {"json": REPORT}),
        ("POST", "/api/v1/projects/q/runs/r1/edits", {"json": {"name": "no"}}),
        ("POST", "/api/v1/projects/q/runs/tags", {"json": {"runs": ["r1"], "add": ["no"]}}),
    ]:
        r = w.req(method, path, tok, **kw)
        assert r.status_code == 403, (method, path, r.text)
    assert w.store.get_report("q", "weekly", None) is None
    run = w.store.get_run("q", "r1")
    assert run is not None and run.name != "no" and "no" not in run.tags
    # no uploads: streams, acks, blobs, artifact versions
    params = {"project": "p", "run": "r2", "label": "rank-0", "incarnation": 0}
    data = body(records(steps=3, project="p", run="r2"))
    r = w.req("POST", "/api/v1/ingest", tok, params=params, content=data)
    assert r.status_code == 403 and "ingest token" in r.json()["error"]["message"]
    assert w.store.get_run("p", "r2") is None  # nothing written
    assert w.req("GET", "/api/v1/ack", tok, params=params).status_code == 403
    digest = "0" * 64
    r = w.req("POST", "/api/v1/blobs/p/missing", tok, json={"digests": [digest]})
    assert r.status_code == 403
    commit = {"type": "model", "manifest": {"entries": []}, "client_id": "c"}
    assert w.req("POST", "/api/v1/artifacts/p/m/versions", tok, json=commit).status_code == 403
    # no token or alert-destination management
    assert w.req("GET", "/api/v1/tokens", tok).status_code == 403
    r = w.req("POST", "/api/v1/tokens", tok, json={"role": "read", "projects": ["p"]})
    assert r.status_code == 403
    assert len(w.store.list_tokens()) == 3
    assert w.req("GET", "/api/v1/alerts/destinations", tok).status_code == 403
    # The ingest token of p still uploads and still edits p's runs (as before the role).
    r = w.req("POST", "/api/v1/ingest", w.ingest_p, params=params, content=data)
    assert r.status_code == 200, r.text
    r = w.req("POST", "/api/v1/projects/p/runs/r1/edits", w.ingest_p, json={"add_tags": ["i"]})
    assert r.status_code == 200, r.text
    # ... but neither reads nor saves reports
    assert w.req("POST", "/api/v1/projects/p/reports/x", w.ingest_p, json=REPORT).status_code == 403


def test_a_read_token_still_cannot_save_a_report_or_edit_a_run(world: World) -> None:
    w, tok = world, world.read_p
    r = w.req("POST", "/api/v1/projects/p/reports/weekly", tok, json=REPORT)
    assert r.status_code == 403 and "write token" in r.json()["error"]["message"]
    r = w.req("POST", "/api/v1/projects/p/runs/r1/edits", tok, json={"name": "no"})
    assert r.status_code == 403 and "--role write" in r.json()["error"]["message"]
    r = w.req("POST", "/api/v1/projects/p/runs/tags", tok, json={"runs": ["r1"], "add": ["no"]})
    assert r.status_code == 403
    assert w.store.get_report("p", "weekly", None) is None
    run = w.store.get_run("p", "r1")
    assert run is not None and run.name != "no" and "no" not in run.tags


def test_a_write_token_logs_in_and_its_session_edits(world: World) -> None:
    w = world
    with httpx.Client(base_url=w.url, timeout=10) as b:
        r = b.post("/api/v1/session", json={"token": w.write_p}, headers=LOGIN)
        assert r.status_code == 200, r.text
        assert (r.json()["role"], r.json()["projects"], r.json()["via"]) == (
            "write",
            ["p"],
            "session",
        )
        assert b.get("/api/v1/session").json()["role"] == "write"
        assert b.get("/api/v1/projects/p/runs").status_code == 200
        assert b.get("/api/v1/projects/q/runs").status_code == 403
        csrf = {**LOGIN, "X-Rankwise-CSRF": b.cookies["rk_csrf"]}
        r = b.post("/api/v1/projects/p/reports/weekly", json=REPORT, headers=csrf)
        assert r.status_code == 200, r.text
        r = b.post("/api/v1/projects/p/runs/r1/edits", json={"name": "via-ui"}, headers=csrf)
        assert r.status_code == 200 and r.json()["name"] == "via-ui"
        # the session's mutations are CSRF-checked like any other
        r = b.post("/api/v1/projects/p/runs/r1/edits", json={"name": "forged"}, headers=LOGIN)
        assert r.status_code == 403
    run = w.store.get_run("p", "r1")
    assert run is not None and run.name == "via-ui"
    hist = w.store.run_edits("p", "r1")
    assert hist is not None and {(e.source, e.who) for e in hist} == {("ui", "alice")}


def test_write_tokens_are_created_by_the_cli_and_the_admin_api(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    argv = ["token", "create", "--db", db, "--role", "write", "--project", "p", "--name", "al"]
    assert cli_main(argv) == 0
    out = capsys.readouterr().out
    assert "created write token" in out and "for p" in out
    value = out.strip().splitlines()[-1]
    assert value.startswith("rk_w_")
    store = open_store(db)
    store.migrate()
    info = store.get_token(T.parse(value)[1])
    assert info is not None and (info.role, info.projects) == ("write", ("p",))
    with pytest.raises(SystemExit) as exit_:
        cli_main(["token", "create", "--db", db, "--role", "writer"])
    assert exit_.value.code == 2 and "'write'" in capsys.readouterr().err
    admin = store.create_token("admin", None, "ops").value
    app = create_app(store, ServerSettings(static_dir=tmp_path / "none", token_cache_ttl=0))
    with serve_in_thread(app, token_env=False) as url:
        r = httpx.post(
            url + "/api/v1/tokens",
            headers=bearer(admin),
            json={"role": "write", "projects": ["p"], "name": "bo"},
            timeout=10,
        )
        assert r.status_code == 200, r.text
        assert r.json()["role"] == "write" and r.json()["token"].startswith("rk_w_")
    store.close()
