"""Authentication and authorization against a real uvicorn server: one case per attack.

The rows are those of the security checklist that concern credentials (1-9, 25, 26, 30).
Each asserts the status code and that nothing was written or leaked: the store is read
back, and the captured server log, the database file and every response body are
searched for the secret.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.routing import APIRoute

from rankwise import tokens as T
from rankwise.server import ServerSettings, create_app
from rankwise.server.auth import policy_of
from rankwise.settings import Settings
from rankwise.store import open_store
from tests.helpers.servers import REPO, bearer, free_port, serve_in_thread, subprocess_env
from tests.helpers.streams import body, records
from tests.helpers.wait import wait_until

INGEST = "/api/v1/ingest"


class Srv:
    def __init__(self, url: str, store: Any, db: Path, caplog: pytest.LogCaptureFixture) -> None:
        self.url, self.store, self.db, self.caplog = url, store, db, caplog
        self.admin = store.create_token("admin", None, "admin").value
        self.ingest_a = store.create_token("ingest", ["a"], "ranks of a").value
        self.read_a = store.create_token("read", ["a"], "reader of a").value
        self.seen: list[str] = []  # every response body, for the leak check

    def req(self, method: str, path: str, token: str | None = None, **kw: Any) -> httpx.Response:
        headers = dict(kw.pop("headers", {}))
        if token is not None:
            headers.update(bearer(token))
        r = httpx.request(method, self.url + path, headers=headers, timeout=10, **kw)
        self.seen.append(r.text)
        return r

    def upload(self, token: str | None, project: str, **kw: Any) -> httpx.Response:
        params = {"project": project, "run": "r", "label": "rank-0", "incarnation": 0}
        data = body(records(steps=3, project=project))
        return self.req("POST", INGEST, token, params=params, content=data, **kw)

    def server_log(self) -> str:
        """What the server logged (the test's own httpx client logs its URLs too)."""
        mine = ("httpx", "httpcore")
        return "\n".join(r.getMessage() for r in self.caplog.records if not r.name.startswith(mine))

    def assert_nothing_leaked(self, *secrets: str) -> None:
        raw = self.db.read_bytes() + b"".join(
            p.read_bytes() for p in self.db.parent.glob(self.db.name + "-wal")
        )
        for secret in secrets:
            hidden = T.parse(secret)[2] if T.parse(secret) else secret
            assert hidden.encode() not in raw, "secret in the database file"
            assert hidden not in self.server_log(), "secret in the server log"
            assert not any(hidden in text for text in self.seen), "secret in a response"


@pytest.fixture
def srv(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> Iterator[Srv]:
    caplog.set_level(logging.DEBUG)
    db = tmp_path / "auth.db"
    store = open_store(f"sqlite:///{db}")
    store.migrate()
    settings = ServerSettings(
        static_dir=tmp_path / "no-static", token_cache_ttl=0, token_touch_interval=0
    )
    app = create_app(store, settings)
    with serve_in_thread(app, token_env=False, log_level="debug", access_log=True) as url:
        s = Srv(url, store, db, caplog)
        yield s
    # Every case, whatever it attacked: no secret in the log, the database or a reply.
    s.assert_nothing_leaked(s.admin, s.ingest_a, s.read_a)
    store.close()


def test_every_route_has_exactly_one_policy(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'r.db'}")
    store.migrate()
    app = create_app(store, ServerSettings(static_dir=tmp_path / "none"))
    public_non_api = {"/api/openapi.json", "/api/docs", "/docs/oauth2-redirect", ""}
    seen = set()
    for route in _flat_routes(app.routes):
        path = getattr(route, "path", "")
        if not isinstance(route, APIRoute) and getattr(route, "dependant", None) is None:
            assert path in public_non_api, f"{path}: a route outside the policy system"
            continue
        calls = [d.call for d in _all_dependants(route.dependant)]
        calls += [d.dependency for d in getattr(route, "dependencies", [])]
        policies = policy_of(calls)
        assert len(set(policies)) == 1, f"{route.methods} {path}: policies {policies}"
        seen.add((path, policies[0]))
        if path.startswith("/api/v1/ingest") or path == "/api/v1/ack":
            assert policies[0] == "ingest"
    assert ("/api/v1/tokens", "admin") in seen
    assert ("/api/v1/projects/{project}/runs", "read") in seen
    assert ("/api/v1/projects/{project}/views", "read") in seen
    art = "/api/v1/artifacts/{project}"
    assert (art + "/{artifact}/versions", "ingest") in seen
    assert (art + "/{artifact}/use", "ingest") in seen
    assert (art, "read") in seen
    assert (art + "/{artifact}", "read") in seen
    assert (art + "/{artifact}/{ref}", "read") in seen
    assert ("/api/v1/runs/{project}/{run}/artifacts", "read") in seen
    # a training job fetches the model it uses with its ingest token (docs/security.md)
    assert (art + "/{artifact}/{ref}/files/{path:path}", "read_or_ingest") in seen
    assert len(seen) >= 20
    store.close()


def _flat_routes(routes: Any) -> Iterator[Any]:
    """Every route, through FastAPI's included-router wrappers (0.16x builds them lazily)."""
    for route in routes:
        if hasattr(route, "effective_route_contexts"):
            yield from route.effective_route_contexts()
        else:
            yield route


def _all_dependants(dep: Any) -> Iterator[Any]:
    if dep is None:
        return
    for sub in dep.dependencies:
        yield sub
        yield from _all_dependants(sub)


def test_openapi_declares_the_security_schemes(srv: Srv) -> None:
    spec = srv.req("GET", "/api/openapi.json").json()
    schemes = spec["components"]["securitySchemes"]
    assert schemes["token"]["scheme"] == "bearer" and schemes["session"]["in"] == "cookie"
    assert spec["paths"]["/api/v1/projects"]["get"]["security"]


def test_1_unauthenticated_write_is_401_and_writes_nothing(srv: Srv) -> None:
    srv.upload(srv.ingest_a, "a")  # project a exists now
    before = srv.store.projects()
    for project in ("a", "nope"):
        r = srv.upload(None, project)
        assert r.status_code == 401
        assert r.headers["www-authenticate"].startswith("Bearer")
    # The same body whether the project exists or not.
    assert _error(srv.seen[-1]) == _error(srv.seen[-2])
    assert srv.store.projects() == before == ["a"]
    assert srv.store.acked(_key("a")) == 4


def _error(text: str) -> Any:
    """An error body without its per-request id (when the server adds one)."""
    import json

    error = json.loads(text)["error"]
    error.pop("request_id", None)
    return json.dumps(error, sort_keys=True)


def _key(project: str) -> Any:
    from rankwise.stream.identity import StreamId

    return StreamId(project, "r", "rank-0", 0)


@pytest.mark.parametrize(
    "header",
    ["Bearer", "Basic eDp5", "Bearer a b", "Bearer " + "x" * 65536, "Bearer ü"],
)
def test_2_malformed_credentials_are_401_never_500(srv: Srv, header: str) -> None:
    r = srv.req("GET", "/api/v1/projects", headers={"Authorization": header.encode("utf-8")})
    assert r.status_code in (401, 431) and r.status_code != 500  # 431: h11's header cap
    assert "eDp5" not in r.text and "x" * 100 not in r.text
    if r.status_code == 401:
        assert r.headers["www-authenticate"].startswith("Bearer")


def test_2_nul_in_header_is_refused(srv: Srv) -> None:
    import socket

    host, port = srv.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(
            b"GET /api/v1/projects HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer a\x00b\r\n\r\n"
        )
        status = s.recv(100).split(b" ")[1]
    assert status in (b"400", b"401")


def test_3_wrong_project_token_is_403_and_writes_nothing(srv: Srv) -> None:
    r = srv.upload(srv.ingest_a, "b")
    assert r.status_code == 403
    assert srv.store.projects() == []
    ack = srv.req(
        "GET", "/api/v1/ack", srv.ingest_a,
        params={"project": "b", "run": "r", "label": "x", "incarnation": 0},
    )  # fmt: skip
    assert ack.status_code == 403
    # A reader of a is refused on b the same way, whether b exists or not.
    srv.upload(srv.admin, "b")
    assert srv.req("GET", "/api/v1/projects/b/runs", srv.read_a).status_code == 403
    assert srv.req("GET", "/api/v1/projects/zz/runs", srv.read_a).status_code == 403
    body_ = {"runs": ["b/r"], "key": "loss"}
    assert srv.req("POST", "/api/v1/compare", srv.read_a, json=body_).status_code == 403
    listed = srv.req("GET", "/api/v1/projects", srv.read_a).json()["projects"]
    assert [p["name"] for p in listed] == []  # b is filtered out; a has no runs yet


def test_4_ingest_token_cannot_read(srv: Srv) -> None:
    assert srv.upload(srv.ingest_a, "a").status_code == 200
    for path in (
        "/api/v1/projects",
        "/api/v1/projects/a/runs",
        "/api/v1/projects/a/runs/r",
        "/api/v1/projects/a/runs/r/metrics",
        "/api/v1/projects/a/views",
        "/api/v1/projects/a/runs/r/console",
        "/api/v1/tokens",
    ):
        r = srv.req("GET", path, srv.ingest_a)
        assert r.status_code == 403, path
    r = srv.req("POST", "/api/v1/projects/a/views", srv.ingest_a, json={"name": "v"})
    assert r.status_code == 403
    assert srv.store.list_views("a") == []


def test_5_read_token_cannot_write(srv: Srv) -> None:
    assert srv.upload(srv.read_a, "a").status_code == 403
    assert srv.store.projects() == []
    r = srv.req("POST", "/api/v1/tokens", srv.read_a, json={"role": "admin"})
    assert r.status_code == 403
    assert len(srv.store.list_tokens()) == 3
    assert srv.req("DELETE", "/api/v1/tokens/abc", srv.read_a).status_code == 403


def test_6_revoked_token_is_401_on_the_next_request(srv: Srv) -> None:
    assert srv.upload(srv.ingest_a, "a").status_code == 200
    token_id = T.parse(srv.ingest_a)[1]
    r = srv.req("DELETE", f"/api/v1/tokens/{token_id}", srv.admin)
    assert r.status_code == 204
    assert srv.upload(srv.ingest_a, "a").status_code == 401
    # And through the store (the CLI's path), with no cache in between.
    assert srv.req("GET", "/api/v1/projects", srv.read_a).status_code == 200
    srv.store.revoke_token(T.parse(srv.read_a)[1])
    assert srv.req("GET", "/api/v1/projects", srv.read_a).status_code == 401
    assert srv.store.get_token(token_id).revoked is not None  # kept, marked


def test_7_reads_need_credentials_only_the_shell_is_public(srv: Srv) -> None:
    for path in ("/api/v1/projects", "/api/v1/projects/a/runs", "/api/v1/nope", "/api/v1/tokens"):
        r = srv.req("GET", path)
        assert r.status_code == 401, path
    assert srv.req("GET", "/").status_code == 200
    assert srv.req("GET", "/api/v1/session").status_code == 401


def test_8_query_string_tokens_are_refused_and_nothing_leaks(srv: Srv) -> None:
    for name in ("token", "write_token", "access_token"):
        r = srv.req("GET", "/api/v1/projects", params={name: srv.read_a})
        assert r.status_code == 400, r.text
        # Refused even beside a valid header: never read from the URL.
        r = srv.req("GET", "/api/v1/projects", srv.read_a, params={name: srv.read_a})
        assert r.status_code == 400
    assert "uvicorn.access" in {r.name for r in srv.caplog.records}  # the log is captured
    srv.upload(srv.ingest_a, "a")
    srv.upload(srv.ingest_a, "b")
    srv.req("GET", "/api/v1/projects/a/runs", srv.ingest_a)
    srv.req("GET", "/api/v1/projects", "rk_r_0123456789ab_" + "A" * 43)
    srv.assert_nothing_leaked(srv.admin, srv.ingest_a, srv.read_a)
    new = srv.store.create_token("read", None, "r")
    assert T.parse(new.value)[2] not in repr(new)
    assert new.value not in repr(Settings(token=new.value))
    assert "secret_hash" not in repr(new.info)


def test_9_wrong_id_and_wrong_secret_take_one_path(
    srv: Srv, monkeypatch: pytest.MonkeyPatch
) -> None:
    import hmac

    calls: list[tuple[type, type]] = []
    real = hmac.compare_digest

    def spy(a: Any, b: Any) -> bool:
        calls.append((type(a), type(b)))
        return real(a, b)

    monkeypatch.setattr(T.hmac, "compare_digest", spy)  # type: ignore[attr-defined]
    _, token_id, secret = T.parse(srv.read_a)  # type: ignore[misc]
    wrong_secret = f"rk_r_{token_id}_{'B' * len(secret)}"
    wrong_id = f"rk_r_{'f' * 12}_{secret}"
    near = f"rk_r_{token_id}_{secret[:-1]}{'A' if secret[-1] != 'A' else 'B'}"
    replies = [srv.req("GET", "/api/v1/projects", t) for t in (wrong_secret, wrong_id, near)]
    assert {r.status_code for r in replies} == {401}
    assert len({_error(r.text) for r in replies}) == 1
    assert calls == [(bytes, bytes)] * 3  # the unknown id compared too, on bytes


def test_25_csrf_on_cookie_mutations(srv: Srv) -> None:
    with httpx.Client(base_url=srv.url, timeout=10) as browser:
        same = {"Sec-Fetch-Site": "same-origin", "X-Rankwise-CSRF": "1"}
        r = browser.post("/api/v1/session", json={"token": srv.read_a}, headers=same)
        assert r.status_code == 200, r.text
        cookies = r.headers.get_list("set-cookie")
        session = next(c for c in cookies if c.startswith("rk_session="))
        for flag in ("HttpOnly", "SameSite=strict", "Path=/"):
            assert flag.lower() in session.lower()
        csrf = browser.cookies["rk_csrf"]
        view = {"name": "mine", "filters": {}}
        ok = {"Sec-Fetch-Site": "same-origin", "X-Rankwise-CSRF": csrf}
        assert browser.post("/api/v1/projects/a/views", json=view, headers=ok).status_code == 200
        bad = [
            {"Sec-Fetch-Site": "cross-site", "X-Rankwise-CSRF": csrf},
            {"Origin": "https://evil.example", "X-Rankwise-CSRF": csrf},
            {"Sec-Fetch-Site": "same-origin"},  # no custom header
            {"Sec-Fetch-Site": "same-origin", "X-Rankwise-CSRF": "guess"},
        ]
        for headers in bad:
            evil = {"name": "evil", "filters": {}}
            r = browser.post("/api/v1/projects/a/views", json=evil, headers=headers)
            assert r.status_code == 403, headers
            r = browser.request(
                "DELETE", "/api/v1/projects/a/views", params={"name": "mine"}, headers=headers
            )
            assert r.status_code == 403
        form = {"Content-Type": "application/x-www-form-urlencoded", "Sec-Fetch-Site": "cross-site"}
        r = browser.post("/api/v1/projects/a/views", content=b"name=evil", headers=form)
        assert r.status_code == 403
        # GET never mutates, and a cross-site login is refused too.
        assert browser.get("/api/v1/projects/a/views").status_code == 200
        assert [v.name for v in srv.store.list_views("a")] == ["mine"]
        r = httpx.post(
            srv.url + "/api/v1/session",
            json={"token": srv.read_a},
            headers={"Sec-Fetch-Site": "cross-site", "X-Rankwise-CSRF": "1"},
        )
        assert r.status_code == 403 and "set-cookie" not in r.headers


def test_sessions_log_out_expire_and_die_with_their_token(srv: Srv) -> None:
    hdr = {"Sec-Fetch-Site": "same-origin", "X-Rankwise-CSRF": "1"}
    with httpx.Client(base_url=srv.url, timeout=10) as b:
        assert (
            b.post("/api/v1/session", json={"token": srv.ingest_a}, headers=hdr).status_code == 403
        )
        assert (
            b.post("/api/v1/session", json={"token": "rk_r_nope"}, headers=hdr).status_code == 401
        )
        r = b.post("/api/v1/session", json={"token": srv.read_a}, headers=hdr)
        assert r.json()["role"] == "read" and r.json()["projects"] == ["a"]
        assert b.get("/api/v1/projects").status_code == 200
        assert b.get("/api/v1/session").json()["via"] == "session"
        assert b.delete("/api/v1/session", headers=hdr).status_code == 204
        assert b.get("/api/v1/projects").status_code == 401
    with httpx.Client(base_url=srv.url, timeout=10) as b:
        b.post("/api/v1/session", json={"token": srv.read_a}, headers=hdr)
        sid = b.cookies["rk_session"]
        srv.store.revoke_token(T.parse(srv.read_a)[1])
        assert b.get("/api/v1/projects").status_code == 401
        assert srv.store.get_session(sid) is None
    assert srv.store.get_session("x" * 43) is None


def test_session_idle_expiry(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 's.db'}")
    store.migrate()
    settings = ServerSettings(static_dir=tmp_path / "n", token_cache_ttl=0, session_idle=0.5)
    token = store.create_token("admin").value
    hdr = {"Sec-Fetch-Site": "same-origin", "X-Rankwise-CSRF": "1"}
    app = create_app(store, settings)
    with serve_in_thread(app, token_env=False) as url, httpx.Client(base_url=url) as b:
        assert b.post("/api/v1/session", json={"token": token}, headers=hdr).status_code == 200
        assert b.get("/api/v1/projects").status_code == 200
        time.sleep(0.8)  # unused for longer than session_idle
        assert b.get("/api/v1/projects").status_code == 401
    store.close()


def test_26_no_cors_for_foreign_origins(srv: Srv) -> None:
    r = srv.req(
        "OPTIONS",
        "/api/v1/projects",
        headers={
            "Origin": "https://evil.example",
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization",
        },
    )
    assert "access-control-allow-origin" not in r.headers
    assert "access-control-allow-credentials" not in r.headers


def _cli(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rankwise.cli", *args],
        env=subprocess_env(), cwd=REPO, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


def test_token_cli_create_list_revoke(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    out = _cli("token", "create", "--db", db, "--role", "ingest", "--project", "a", "--name", "n")
    assert out.returncode == 0, out.stderr
    token = out.stdout.strip().splitlines()[-1]
    role, token_id, _ = T.parse(token)  # type: ignore[misc]
    assert role == "ingest"
    listed = _cli("token", "list", "--db", db)
    assert token_id in listed.stdout and token not in listed.stdout and "ingest" in listed.stdout
    assert _cli("token", "revoke", "--db", db, token_id).returncode == 0
    again = _cli("token", "revoke", "--db", db, token_id)
    assert again.returncode != 0 and "token list" in again.stderr
    bad = _cli("token", "create", "--db", db, "--role", "root")
    assert bad.returncode != 0


def test_30_server_refuses_to_expose_itself_without_auth(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'exposed.db'}"
    port = str(free_port())
    out = _cli("server", "--db", db, "--host", "0.0.0.0", "--port", port)
    assert out.returncode != 0
    assert "rankwise token create" in out.stderr and "--insecure-no-auth" in out.stderr
    out = _cli("ui", "--dir", str(tmp_path), "--host", "0.0.0.0", "--port", port)
    assert out.returncode != 0 and "--insecure-no-auth" in out.stderr
    with open_store(db) as store:
        assert store.list_tokens() == []  # nothing was created behind the refusal


def test_first_loopback_start_prints_one_admin_token(tmp_path: Path) -> None:
    from tests.helpers.servers import ServerProcess

    db = f"sqlite:///{tmp_path / 'boot.db'}"
    log = tmp_path / "boot.log"
    srv = ServerProcess(["server", "--db", db], log)
    srv.start(wait=False)
    try:
        token = wait_until(lambda: _printed_token(log), timeout=30)
        # The token is printed before the socket is bound: wait for the server's line.
        wait_until(lambda: "server at" in log.read_text(), timeout=30)
        r = httpx.get(srv.url + "/api/v1/tokens", headers=bearer(token), timeout=5)
        assert r.status_code == 200 and r.json()["tokens"][0]["role"] == "admin"
    finally:
        srv.stop()
    srv.start(wait=False)
    try:
        wait_until(lambda: "server at" in log.read_text(), timeout=30)
        assert log.read_text().count("rk_a_") == 1  # printed once, on the first start only
    finally:
        srv.stop()


def _printed_token(log: Path) -> str | None:
    for line in log.read_text().splitlines():
        if line.startswith("rk_a_"):
            return line.strip()
    return None


def test_insecure_no_auth_warns_at_every_start(tmp_path: Path) -> None:
    from tests.helpers.servers import ServerProcess

    db = f"sqlite:///{tmp_path / 'open.db'}"
    log = tmp_path / "open.log"
    srv = ServerProcess.db(db, log, "--insecure-no-auth", "--host", "0.0.0.0")
    with srv:
        assert httpx.get(srv.url + "/api/v1/projects", timeout=5).status_code == 200
    with srv:
        pass
    assert log.read_text().count("authentication is OFF") == 2


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_token_and_session_store(backend: str, tmp_path: Path, request: Any) -> None:
    url = (
        f"sqlite:///{tmp_path / 't.db'}"
        if backend == "sqlite"
        else request.getfixturevalue("pg_dsn")
    )
    with open_store(url) as store:
        store.migrate()
        assert not store.has_admin_token()
        new = store.create_token("read", ["a", "b", "a"], "r")
        info = store.get_token(new.info.id)
        assert info is not None and info.projects == ("a", "b") and info.role == "read"
        assert info.secret_hash == T.digest(T.parse(new.value)[2])
        assert T.matches(info, "read", T.parse(new.value)[2])
        store.touch_tokens({info.id: 123.0})
        assert store.get_token(info.id).last_used == 123.0
        store.create_session("s" * 43, info.id)
        assert store.get_session("s" * 43).token.id == info.id
        assert store.revoke_token(info.id) and not store.revoke_token(info.id)
        assert store.get_session("s" * 43) is None
        admin = store.create_token("admin")
        assert store.has_admin_token() and admin.info.projects is None
        with pytest.raises(ValueError, match="role"):
            store.create_token("root")
        with pytest.raises(ValueError, match="projects"):
            store.create_token("read", [])
        with pytest.raises(ValueError, match="every project"):
            store.create_token("admin", ["a"])


def test_under_tls_cookies_are_secure_with_host_prefix(tmp_path: Path) -> None:
    import asyncio

    store = open_store(f"sqlite:///{tmp_path / 'tls.db'}")
    store.migrate()
    token = store.create_token("read").value
    app = create_app(store, ServerSettings(static_dir=tmp_path / "n", token_cache_ttl=0))

    async def go() -> list[str]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="https://localhost") as c:
            hdr = {"Sec-Fetch-Site": "same-origin", "X-Rankwise-CSRF": "1"}
            r = await c.post("/api/v1/session", json={"token": token}, headers=hdr)
            assert r.status_code == 200
            assert (await c.get("/api/v1/projects")).status_code == 200  # __Host- cookie read
            return r.headers.get_list("set-cookie")

    cookies = asyncio.run(go())
    session = next(c for c in cookies if c.startswith("__Host-rk_session="))
    assert "secure" in session.lower() and "httponly" in session.lower()
    assert any(c.startswith("__Host-rk_csrf=") and "secure" in c.lower() for c in cookies)
    store.close()


def test_verifier_caches_rows_and_batches_last_used(tmp_path: Path) -> None:
    from rankwise.server.auth import Verifier

    store = open_store(f"sqlite:///{tmp_path / 'v.db'}")
    store.migrate()
    token = store.create_token("ingest", ["p"]).value
    reads = 0
    real_get = store.get_token

    def counting(token_id: str) -> Any:
        nonlocal reads
        reads += 1
        return real_get(token_id)

    store.get_token = counting  # type: ignore[method-assign]
    cached = Verifier(store, ttl=60, touch_every=3600)
    for _ in range(100):
        assert cached.verify(token) is not None
    assert reads == 1  # one row read for 100 requests
    last = store.list_tokens()[0].last_used
    assert last is not None  # the first use is written at once ...
    for _ in range(10):
        cached.verify(token)
    assert store.list_tokens()[0].last_used == last  # ... later ones batched
    reads = 0
    uncached = Verifier(store, ttl=0, touch_every=3600)
    for _ in range(5):
        uncached.verify(token)
    assert reads == 5
    store.close()


def test_cached_tokens_are_checked_on_the_event_loop_as_strictly(tmp_path: Path) -> None:
    """With the token cache on (the default), a cached token is checked in memory
    (``Verifier.verify_cached``): the same answers as the database path. A wrong secret
    for a cached id is 401, a token of another project 403, an unknown id 401 (cached
    as unknown), a revoked one 401 once the TTL has passed, and ``last_used`` is still
    written (batched, through the database path)."""
    store = open_store(f"sqlite:///{tmp_path / 'c.db'}")
    store.migrate()
    settings = ServerSettings(
        static_dir=tmp_path / "n", token_cache_ttl=1.0, token_touch_interval=0.5
    )
    good = store.create_token("ingest", ["p"], "good").value
    other = store.create_token("ingest", ["q"], "other").value
    parsed = T.parse(good)
    assert parsed is not None
    _, token_id, secret = parsed
    forged = good.removesuffix(secret) + "x" * len(secret)
    unknown = good.replace(f"_{token_id}_", f"_{'0' * len(token_id)}_", 1)
    assert T.parse(forged) and T.parse(unknown)

    def used() -> Any:
        return {t.id: t.last_used for t in store.list_tokens()}[token_id]

    data = {p: body(records(steps=2, project=p)) for p in "pq"}
    params = {"project": "p", "run": "r", "label": "rank-0", "incarnation": 0}
    headers = {"Content-Type": "application/x-rankwise-stream"}

    def post(token: str, project: str = "p") -> int:
        r = httpx.post(
            url + "/api/v1/ingest",
            params={**params, "project": project},
            content=data[project],
            headers={**headers, **bearer(token)},
            timeout=10,
        )
        return r.status_code

    app = create_app(store, settings)
    with serve_in_thread(app, token_env=False) as url:
        for _ in range(3):  # the first reads the row, the others are served from memory
            assert post(good) == 200
            assert post(forged) == 401
            assert post(unknown) == 401
            assert post(other) == 403
            assert post(other, project="q") == 200
        first = wait_until(used, timeout=10)
        time.sleep(0.6)  # past token_touch_interval: the next use is written again
        assert post(good) == 200
        wait_until(lambda: used() != first, timeout=10)
        store.revoke_token(token_id)
        wait_until(lambda: post(good) == 401, timeout=10)  # within the cache's TTL
    store.close()


def test_a_cached_upload_skips_the_dependencies_and_every_answer_is_theirs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``POST /ingest`` answers its busiest case (a cached bearer token allowed to upload
    to the project, plain parameters) without solving FastAPI's dependencies; every
    answer, that case's and every case around it, equals the declared route's (the same
    app with the lean path off), sent three times so the tokens are cached."""
    import fastapi.routing

    from rankwise.server.routes import ingest as ingest_routes

    solved: list[str] = []
    solve = fastapi.routing.solve_dependencies  # type: ignore[attr-defined]

    async def counted(*args: Any, **kwargs: Any) -> Any:
        solved.append(kwargs["request"].url.path)
        return await solve(*args, **kwargs)

    monkeypatch.setattr(fastapi.routing, "solve_dependencies", counted)
    data = {p: body(records(steps=2, project=p)) for p in "pq"}

    def cases(tokens: dict[str, str]) -> list[tuple[str, Any, dict[str, str]]]:
        plain = {"project": "p", "run": "r", "label": "rank-0", "incarnation": "0"}
        out = []
        for who in ("ingest_p", "admin", "read_p", "ingest_q", "forged"):
            out.append((who, plain, bearer(tokens[who])))
        for name, params in {
            "other project": {**plain, "project": "q"},
            "incarnation -1": {**plain, "incarnation": "-1"},
            "incarnation 00": {**plain, "incarnation": "00"},
            "incarnation x": {**plain, "incarnation": "x"},
            "incarnation huge": {**plain, "incarnation": "9" * 30},
            "no label": {k: v for k, v in plain.items() if k != "label"},
            "token in the URL": {**plain, "token": "x"},
        }.items():
            out.append((name, params, bearer(tokens["ingest_p"])))
        repeated: Any = [*plain.items(), ("project", "q")]
        out.append(("repeated project", repeated, bearer(tokens["ingest_p"])))
        out.append(("basic scheme", plain, {"Authorization": "Basic " + tokens["ingest_p"]}))
        return out

    def answers(lean: bool) -> list[tuple[str, int, Any]]:
        if not lean:
            monkeypatch.setattr(
                ingest_routes._LeanRoute, "get_route_handler", APIRoute.get_route_handler
            )
        store = open_store(f"sqlite:///{tmp_path / f'lean-{lean}.db'}")
        store.migrate()
        tokens = {
            "ingest_p": store.create_token("ingest", ["p"], "p").value,
            "ingest_q": store.create_token("ingest", ["q"], "q").value,
            "read_p": store.create_token("read", ["p"], "r").value,
            "admin": store.create_token("admin", None, "a").value,
        }
        parsed = T.parse(tokens["ingest_p"])
        assert parsed is not None
        secret = parsed[2]
        tokens["forged"] = tokens["ingest_p"].removesuffix(secret) + "x" * len(secret)
        settings = ServerSettings(static_dir=tmp_path / "n", token_touch_interval=60.0)
        out = []
        with serve_in_thread(create_app(store, settings), token_env=False) as url:
            for _ in range(3):
                for name, params, auth_header in cases(tokens):
                    project = dict(params).get("project", "p")
                    r = httpx.post(
                        url + INGEST,
                        params=params,
                        content=data[project if project in data else "p"],
                        headers={"Content-Type": "application/x-rankwise-stream", **auth_header},
                        timeout=10,
                    )
                    reply = r.json()
                    reply.get("error", {}).pop("request_id", None)
                    out.append((name, r.status_code, reply))
        store.close()
        return out

    solved.clear()
    lean = answers(lean=True)
    lean_solved = solved.count(INGEST)
    solved.clear()
    declared = answers(lean=False)
    assert lean == declared
    statuses = {name: status for name, status, _ in lean}
    assert statuses["ingest_p"] == statuses["admin"] == 200
    assert statuses["read_p"] == statuses["ingest_q"] == statuses["other project"] == 403
    assert statuses["forged"] == 401 and statuses["token in the URL"] == 400
    assert statuses["incarnation -1"] == statuses["no label"] == 422
    # The declared route solves every request. The lean one skips at least the plain
    # uploads of the cached ingest_p and admin tokens (ingest_p, admin, incarnation 00)
    # once the first round has cached them: 3 cases x 2 rounds.
    assert solved.count(INGEST) == len(declared)
    assert lean_solved <= len(declared) - 3 * 2, (lean_solved, len(declared))
