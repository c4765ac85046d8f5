"""A hostile client against a real uvicorn: the low-severity findings of the attack review.

Each test is one row of ``docs/security.md``'s attack table: the answer is a 4xx (never a
500) or the refusal the document promises, and nothing a refused request names is
stored or served.
"""

from __future__ import annotations

import hashlib
import os
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from rankwise.server import ServerSettings, bodies, create_app
from rankwise.server import serve as S
from rankwise.server.routes import ingest as ingest_route
from rankwise.store import open_store
from rankwise.stream import records as R
from tests.helpers.servers import ServerProcess, admin_token, bearer, serve_in_thread
from tests.helpers.streams import body, start
from tests.helpers.wait import wait_until

STREAM = {"Content-Type": "application/x-rankwise-stream"}


@dataclass
class Server:
    url: str
    app: Any
    store: Any
    blobs: Path

    @property
    def admin(self) -> dict[str, str]:
        return bearer(admin_token(self.app))

    def token(self, role: str, project: str = "p") -> dict[str, str]:
        return bearer(self.store.create_token(role, [project], role).value)

    def ingest(
        self, recs: list[R.AnyRecord], run: str, headers: dict[str, str] | None = None
    ) -> httpx.Response:
        params = {"project": "p", "run": run, "label": "rank-0", "incarnation": 0}
        return httpx.post(
            f"{self.url}/api/v1/ingest",
            params=params,
            content=body(recs),
            headers={**STREAM, **(headers or self.admin)},
        )

    def get(self, path: str, **kw: Any) -> httpx.Response:
        headers = {**self.admin, **kw.pop("headers", {})}
        return httpx.get(self.url + path, headers=headers, **kw)

    def put_blob(self, data: bytes, headers: dict[str, str] | None = None) -> str:
        digest = hashlib.sha256(data).hexdigest()
        r = httpx.put(f"{self.url}/api/v1/blobs/p/{digest}", content=data,
                      headers=headers or self.admin)  # fmt: skip
        assert r.status_code in (200, 201), r.text
        return digest


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("hostile")
    store = open_store(f"sqlite:///{tmp / 'db.sqlite'}", crash_timeout=1.0)
    store.migrate()
    app = create_app(store, ServerSettings(static_dir=tmp / "none", token_cache_ttl=0))
    with serve_in_thread(app, token_env=False) as url:
        yield Server(url, app, store, tmp / "blobs")
    store.close()


def run_id() -> str:
    return "r" + uuid.uuid4().hex[:8]


def assert_4xx(r: httpx.Response, *statuses: int) -> None:
    assert r.status_code in statuses, (r.status_code, r.text[:300])
    assert r.json()["error"]["status"] == r.status_code


# -- 12: under TLS only the __Host- cookie -------------------------------------------------


def test_12_under_tls_the_unprefixed_session_cookie_is_refused(server: Server) -> None:
    token = server.store.create_token("read", None, "login").value
    # uvicorn trusts X-Forwarded-Proto from loopback (a TLS-terminating proxy): https.
    tls = {"X-Forwarded-Proto": "https", "Sec-Fetch-Site": "same-origin", "X-Rankwise-CSRF": "1"}
    r = httpx.post(f"{server.url}/api/v1/session", json={"token": token}, headers=tls)
    assert r.status_code == 200
    sid = r.cookies["__Host-rk_session"]
    csrf = r.cookies["__Host-rk_csrf"]
    https = {"X-Forwarded-Proto": "https"}
    ok = httpx.get(f"{server.url}/api/v1/projects",
                   headers={**https, "Cookie": f"__Host-rk_session={sid}"})  # fmt: skip
    assert ok.status_code == 200
    # The same session id under the plain name (which a sibling subdomain or a plain-HTTP
    # page could have planted): refused under TLS.
    tossed = httpx.get(f"{server.url}/api/v1/projects",
                       headers={**https, "Cookie": f"rk_session={sid}"})  # fmt: skip
    assert_4xx(tossed, 401)
    # A planted plain CSRF cookie does not pass the double submit either.
    mutate = httpx.delete(
        f"{server.url}/api/v1/projects/p/views?name=x",
        headers={**https, "Sec-Fetch-Site": "same-origin", "X-Rankwise-CSRF": "planted",
                 "Cookie": f"__Host-rk_session={sid}; rk_csrf=planted"},
    )  # fmt: skip
    assert_4xx(mutate, 403)
    assert csrf != "planted"


# -- 13 / 14: artifact manifests ------------------------------------------------------------


def commit(server: Server, name: str, entries: list[dict[str, Any]], headers: dict[str, str]):
    req = {"type": "model", "client_id": uuid.uuid4().hex, "manifest": {"entries": entries}}
    return httpx.post(f"{server.url}/api/v1/artifacts/p/{name}/versions", json=req,
                      headers=headers)  # fmt: skip


def test_13_an_ingest_token_cannot_read_media_by_naming_its_digest(server: Server) -> None:
    secret = b"\x89PNG a run's private image " + os.urandom(8)
    digest = server.put_blob(secret)
    run = run_id()
    item = R.MediaItem(kind="image", digest=digest, size=len(secret), format="png")
    media = R.Media(1, 1001.0, 1, "samples", [item])
    assert server.ingest([start("p", run), media], run).status_code == 200
    ingest = server.token("ingest")
    entry = {"path": "loot.png", "digest": digest, "size": len(secret),
             "chunks": [[digest, len(secret)]]}  # fmt: skip
    r = commit(server, "loot", [entry], ingest)
    assert r.status_code == 201, r.text
    got = httpx.get(f"{server.url}/api/v1/artifacts/p/loot/latest/files/loot.png", headers=ingest)
    assert_4xx(got, 403)
    assert secret not in got.content
    # A read token reads the project's media anyway; its own artifact files still download.
    read = server.token("read")
    assert httpx.get(f"{server.url}/api/v1/artifacts/p/loot/latest/files/loot.png",
                     headers=read).content == secret  # fmt: skip
    mine = b"weights " + os.urandom(8)
    own = server.put_blob(mine, ingest)
    entry = {"path": "w.bin", "digest": own, "size": len(mine), "chunks": [[own, len(mine)]]}
    assert commit(server, "weights", [entry], ingest).status_code == 201
    fetched = httpx.get(f"{server.url}/api/v1/artifacts/p/weights/latest/files/w.bin",
                        headers=ingest)  # fmt: skip
    assert fetched.status_code == 200 and fetched.content == mine


def test_14_manifest_sizes_must_match_the_stored_chunks(server: Server) -> None:
    data = b"twelve bytes"
    digest = server.put_blob(data)
    for size in (len(data) + 1000, len(data) - 1):
        entry = {"path": "f.bin", "digest": digest, "size": size, "chunks": [[digest, size]]}
        assert_4xx(commit(server, "liar", [entry], server.admin), 422)
    assert server.get("/api/v1/artifacts/p/liar").status_code == 404  # nothing stored
    entry = {"path": "f.bin", "digest": digest, "size": len(data),
             "chunks": [[digest, len(data)]]}  # fmt: skip
    assert commit(server, "liar", [entry], server.admin).status_code == 201
    r = server.get("/api/v1/artifacts/p/liar/latest/files/f.bin")
    assert r.content == data and r.headers["content-length"] == str(len(data))


# -- 15: every server option reaches the workers ---------------------------------------------


def test_15_settings_survive_the_trip_to_the_workers() -> None:
    """Every field but the blob store, changed from its default, arrives unchanged."""
    import dataclasses

    changed: dict[str, Any] = {}
    for f in dataclasses.fields(ServerSettings):
        value = getattr(ServerSettings(), f.name)
        if f.name == "blobs":
            continue
        if isinstance(value, bool):
            changed[f.name] = not value
        elif isinstance(value, (int, float)):
            changed[f.name] = value + 7
        elif isinstance(value, tuple):
            changed[f.name] = ("tracker.example", "*.cluster.internal")
        elif dataclasses.is_dataclass(value):  # the alert settings, one field of each kind
            changed[f.name] = dataclasses.replace(
                value,
                public_url="https://rankwise.example",
                allow_private_webhooks=True,
                retry_base=1.5,
            )
        else:  # paths
            changed[f.name] = Path("/srv/rankwise") / f.name
    settings = ServerSettings(**changed)
    assert S.settings_from_env(S.settings_to_env(settings)) == settings


@pytest.mark.slow
def test_15_max_table_cells_reaches_every_worker(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'server.db'}"
    srv = ServerProcess.db(db, tmp_path / "server.log", "--workers", "2", "--max-table-cells", "10")
    table = R.TableRec(1, 1001.0, 1, "t", "a" * 64, 100, 100, 1, ["x"], ["int"])
    run = run_id()
    with srv:
        for i in range(6):  # several connections: both workers answer
            r = httpx.post(
                f"{srv.url}/api/v1/ingest",
                params={"project": "p", "run": f"{run}{i}", "label": "rank-0", "incarnation": 0},
                content=body([start("p", f"{run}{i}"), table]),
                headers={**STREAM, **srv.headers, "Connection": "close"},
            )
            assert_4xx(r, 413)


# -- 16: out-of-range input is a 4xx ---------------------------------------------------------


@pytest.mark.parametrize(
    "make",
    [
        lambda: R.Metrics(1, 1001.0, 2**63, {"loss": 1.0}),  # a step past int64
        lambda: R.Metrics(1, 1001.0, 1, {"loss": 2**64 - 1}),  # a value msgpack allows
        lambda: R.Metrics(1, float("nan"), 1, {"loss": 1.0}),  # a NaN time
        lambda: R.Heartbeat(1, 1001.0, last_step=2**63),
        lambda: R.Dropped(1, 1001.0, 2**64 - 1),
        lambda: R.Console(1, 1001.0, "stdout", ["x"], [float("inf")]),
    ],
    ids=["step", "value", "nan-time", "heartbeat", "dropped", "console-time"],
)
def test_16_out_of_range_numbers_at_ingest_are_422(server: Server, make: Any) -> None:
    run = run_id()
    assert_4xx(server.ingest([start("p", run), make()], run), 422)
    assert server.get(f"/api/v1/projects/p/runs/{run}").status_code == 404


def test_16_out_of_range_read_parameters_are_422(server: Server) -> None:
    run = run_id()
    system = R.System(2, 1001.0, {"gpu/0/util_percent": 5.0})
    assert server.ingest([start("p", run), R.Metrics(1, 1001.0, 1, {"loss": 1.0}), system],
                         run).status_code == 200  # fmt: skip
    base = f"/api/v1/projects/p/runs/{run}"
    for value in ("nan", "inf", "-inf", "1e300"):
        for path in ("/series?key=loss&", "/system/series?key=gpu/util_percent&", "/console?"):
            for name in ("from", "to"):
                assert_4xx(server.get(f"{base}{path}{name}={value}"), 422)
        assert_4xx(server.get(f"{base}/console?at={value}"), 422)
        r = httpx.post(f"{server.url}/api/v1/compare", headers=server.admin,
                       content=f'{{"runs": ["p/{run}"], "key": "loss", "from": {value}}}'.replace(
                           "nan", "NaN").replace("inf", "Infinity"))  # fmt: skip
        assert_4xx(r, 422)
    for name in ("after", "before", "offset"):
        assert_4xx(server.get(f"{base}/console?{name}=99999999999999999999"), 422)


def test_16_deeply_nested_artifact_metadata_is_422(server: Server) -> None:
    meta = "{}"
    for _ in range(5000):
        meta = '{"a":' + meta + "}"
    req = ('{"type":"model","client_id":"abc","manifest":{"entries":[]},"metadata":'
           + meta + "}")  # fmt: skip
    r = httpx.post(f"{server.url}/api/v1/artifacts/p/deep/versions", content=req,
                   headers={**server.admin, "Content-Type": "application/json"})  # fmt: skip
    assert_4xx(r, 422)


def test_16_a_huge_gpu_index_does_not_break_the_system_series(server: Server) -> None:
    run = run_id()
    system = R.System(1, 1001.0, {"gpu/99999999999999999999999/util_percent": 5.0,
                                  "gpu/1/util_percent": 7.0})  # fmt: skip
    assert server.ingest([start("p", run), system], run).status_code == 200
    base = f"/api/v1/projects/p/runs/{run}/system"
    keys = server.get(base).json()["keys"]
    assert "gpu/util_percent" in keys
    for key in keys:
        for accept in ("application/json", "application/msgpack"):
            r = server.get(f"{base}/series", params={"key": key}, headers={"Accept": accept})
            assert r.status_code == 200, (key, accept, r.text[:200])


def test_16_a_table_record_naming_a_non_parquet_blob_is_422(server: Server) -> None:
    """Refused at upload (the Parquet footer is checked there), with no server path."""
    junk = b"not a parquet file " + os.urandom(8)
    digest = server.put_blob(junk)
    run = run_id()
    table = R.TableRec(1, 1001.0, 1, "preds", digest, len(junk), 3, 1, ["x"], ["int"])
    r = server.ingest([start("p", run), table], run)
    assert_4xx(r, 422)
    assert "parquet" in r.text.lower(), r.text
    assert str(server.blobs) not in r.text and "/tmp" not in r.text  # no server path
    assert server.get(f"/api/v1/projects/p/runs/{run}").status_code == 404  # nothing stored


# -- 17: gzip is inflated off the event loop --------------------------------------------------


def test_17_gzip_bodies_are_decoded_off_the_event_loop(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A spy around the real decoder: it must run where no event loop runs (a thread of
    the pool), so a body inflating to the cap stalls no other request."""
    import asyncio
    import gzip

    seen: list[bool] = []
    real = bodies.decode_body

    def spy(raw: bytes, encoding: str, limit: int) -> bytes:
        try:
            asyncio.get_running_loop()
            seen.append(True)
        except RuntimeError:
            seen.append(False)
        return real(raw, encoding, limit)

    monkeypatch.setattr(ingest_route, "decode_body", spy)
    run = run_id()
    data = gzip.compress(body([start("p", run), R.Metrics(1, 1001.0, 1, {"loss": 1.0})]))
    r = httpx.post(
        f"{server.url}/api/v1/ingest",
        params={"project": "p", "run": run, "label": "rank-0", "incarnation": 0},
        content=data,
        headers={**STREAM, **server.admin, "Content-Encoding": "gzip"},
    )
    assert r.status_code == 200, r.text
    assert seen == [False]


# -- 19: no pid oracle ------------------------------------------------------------------------


def test_19_an_uploaded_pid_is_never_looked_up_in_the_servers_process_table(
    server: Server,
) -> None:
    """A stream claiming this host and a live pid of it (the server's own) is judged by
    its records alone: silent past the crash timeout, it reads as crashed."""
    import socket

    import psutil

    me = psutil.Process(os.getpid())
    run = run_id()
    claim = start("p", run, host=socket.gethostname(), pid=os.getpid(),
                  pid_start_time=me.create_time(), heartbeat_interval=0.2)  # fmt: skip
    claim = msgspec.structs.replace(claim, time=time.time())
    assert server.ingest([claim], run).status_code == 200
    state = wait_until(
        lambda: (
            (s := server.get(f"/api/v1/projects/p/runs/{run}").json()["state"]) == "crashed" and s
        ),
        timeout=15,
    )
    assert state == "crashed"


# -- 23 / 24: aliases and enumerated fields ---------------------------------------------------


def test_23_an_ingest_token_cannot_move_a_protected_alias(server: Server) -> None:
    data = b"model v1 " + os.urandom(8)
    ingest = server.token("ingest")
    digest = server.put_blob(data, ingest)
    entry = {"path": "m.bin", "digest": digest, "size": len(data),
             "chunks": [[digest, len(data)]]}  # fmt: skip

    def with_aliases(aliases: list[str], headers: dict[str, str]) -> httpx.Response:
        req = {"type": "model", "client_id": uuid.uuid4().hex, "aliases": aliases,
               "manifest": {"entries": [entry]}}  # fmt: skip
        return httpx.post(f"{server.url}/api/v1/artifacts/p/deploy/versions", json=req,
                          headers=headers)  # fmt: skip

    assert_4xx(with_aliases(["production"], ingest), 403)
    assert server.get("/api/v1/artifacts/p/deploy").status_code == 404  # nothing stored
    assert with_aliases(["best"], ingest).status_code == 201  # other aliases still move
    assert with_aliases(["production"], server.admin).status_code in (200, 201)
    got = server.get("/api/v1/artifacts/p/deploy/production")
    assert got.status_code == 200 and "production" in got.json()["aliases"]


@pytest.mark.parametrize(
    "recs",
    [
        lambda run: [start("p", run), R.Finish(1, 1001.0, "bogus")],
        lambda run: [start("p", run), R.Console(1, 1001.0, "stdin", ["x"])],
        lambda run: [start("p", run, group="../odd group")],
    ],
    ids=["finish-state", "console-stream", "group"],
)
def test_24_values_outside_their_set_are_422(server: Server, recs: Any) -> None:
    run = run_id()
    assert_4xx(server.ingest(recs(run), run), 422)
    assert server.get(f"/api/v1/projects/p/runs/{run}").status_code == 404


# -- 18: /api/docs from the package -----------------------------------------------------------

WATCH_CSP = """
window.__violations = [];
document.addEventListener('securitypolicyviolation',
  (e) => window.__violations.push(e.violatedDirective + ' ' + e.blockedURI));
"""


@pytest.mark.browser
def test_18_api_docs_load_nothing_from_outside_the_origin(tmp_path: Path) -> None:
    """Swagger UI renders the API document in Chromium under the page's real CSP, and
    every request the page makes goes to this server."""
    from tests.helpers.browser import STATIC, launch_browser

    store = open_store(f"sqlite:///{tmp_path / 'db.sqlite'}")
    store.migrate()
    app = create_app(store, ServerSettings(static_dir=STATIC))
    try:
        with serve_in_thread(app) as url:
            r = httpx.get(f"{url}/api/docs")
            csp = r.headers["content-security-policy"]
            assert r.status_code == 200 and "http" not in csp and "unsafe" not in csp
            assert "cdn." not in r.text and "<script>" not in r.text  # no inline script
            with launch_browser() as browser:
                page = browser.new_page()
                requested: list[str] = []
                errors: list[str] = []
                page.on("request", lambda req: requested.append(req.url))
                page.on("pageerror", lambda e: errors.append(str(e)))
                page.add_init_script(WATCH_CSP)
                page.goto(f"{url}/api/docs")
                page.wait_for_selector(".opblock", timeout=30_000)  # operations rendered
                assert page.locator(".opblock").count() > 20
                violations = page.evaluate("window.__violations")
                page.close()
    finally:
        store.close()
    assert not errors, errors
    assert not violations, violations
    outside = [u for u in requested if not u.startswith(url) and not u.startswith("data:")]
    assert not outside, outside
    assert f"{url}/api/openapi.json" in requested


# -- 21: every method is authenticated first ------------------------------------------------


def test_21_any_method_on_api_is_authenticated_before_routing(server: Server) -> None:
    for method in ("PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"):
        for path in ("/api/v1/projects", "/api/v1/projects/p/runs", "/api/v1/no-such"):
            r = httpx.request(method, server.url + path)
            assert r.status_code == 401, (method, path, r.status_code)
    # With a token the answer is what the route table says: 405 with Allow, or 404.
    r = httpx.delete(f"{server.url}/api/v1/projects", headers=server.admin)
    assert_4xx(r, 405)
    assert r.headers["allow"] == "GET"
    assert_4xx(httpx.delete(f"{server.url}/api/v1/no-such", headers=server.admin), 404)
    ingest = server.token("ingest")
    r = httpx.put(f"{server.url}/api/v1/ingest", headers=ingest)
    assert_4xx(r, 405)
    assert r.headers["allow"] == "POST"
