"""Security §6, rows 10-24, 26-29, against a real uvicorn server (hardened HTTP).

Every case asserts the status code and that nothing was written or leaked: the store's
projects (read through the API) are the same before and after each attack. Rows 1-9, 25
and 30 (credentials, CSRF, exposure) belong to authentication; rows 13, 14, 21, 22, 27
and 28 need the artifact routes, so here they are checked on the name validators and on
the routes that take names today (see docs/security.md, "Hardened HTTP").
"""

from __future__ import annotations

import gzip
import logging
import socket
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from rankwise.server import ServerSettings, create_app
from rankwise.server.hardening import (
    BAD_PATH,
    CSP,
    DOCS_CSP,
    HostAllowList,
    allowed_hosts_for,
    bad_param,
)
from rankwise.store import open_store
from rankwise.stream import records as R
from rankwise.stream.frames import MAGIC, encode_frame
from tests.helpers.env import need
from tests.helpers.servers import ServerProcess, serve_in_thread
from tests.helpers.streams import body, records

LIMIT = 256 * 1024  # the test server's body cap: small, so bombs are cheap to build


@dataclass
class Server:
    url: str
    db: Path
    headers: dict[str, str]
    client: httpx.Client

    @property
    def port(self) -> int:
        return int(urlsplit(self.url).port or 0)

    def projects(self) -> Any:
        return self.client.get("/api/v1/projects").json()

    def ingest(self, data: bytes, headers: dict[str, str] | None = None, **params: Any) -> Any:
        q = {"project": "p", "run": "r", "label": "rank-0", "incarnation": 0, **params}
        return self.client.post("/api/v1/ingest", params=q, content=data, headers=headers)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One real uvicorn over a SQLite store, with a small dashboard folder, and an admin
    token's headers: every attack here is made by a client that is allowed in."""
    tmp = tmp_path_factory.mktemp("hardening")
    static = tmp / "static"
    (static / "assets").mkdir(parents=True)
    (static / "index.html").write_text(
        '<!doctype html><script type="module" src="assets/a.js"></script>'
    )
    (static / "assets" / "a.js").write_text("export {};")
    db = tmp / "db.sqlite"
    store = open_store(f"sqlite:///{db}")
    store.migrate()
    token = store.create_token("admin", None, "hardening").value
    credentials = {"Authorization": f"Bearer {token}"}
    app = create_app(store, ServerSettings(static_dir=static, max_body_bytes=LIMIT))
    with serve_in_thread(app) as url, httpx.Client(base_url=url, headers=credentials) as client:
        yield Server(url, db, credentials, client)
    store.close()


@pytest.fixture
def unchanged(server: Server) -> Iterator[None]:
    """The attack in the test writes nothing: the projects are the same afterwards."""
    before = server.projects()
    yield
    assert server.projects() == before


def raw_request(
    server: Server, head: str, body: bytes = b"", timeout: float = 10.0
) -> tuple[int, bytes]:
    """Send bytes as they are (no client fixing the headers up); (status, whole reply)."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=timeout) as s:
        s.sendall(head.encode("latin-1") + b"\r\n" + body)
        reply = b""
        while b"\r\n\r\n" not in reply:
            chunk = s.recv(65536)
            if not chunk:
                break
            reply += chunk
        top, _, rest = reply.partition(b"\r\n\r\n")
        length = next(
            (int(line.split(b":")[1]) for line in top.split(b"\r\n")
             if line.lower().startswith(b"content-length:")),
            None,
        )  # fmt: skip
        while length is not None and len(rest) < length and (chunk := s.recv(65536)):
            rest += chunk
    return int(reply.split(b" ", 2)[1]), top + b"\r\n\r\n" + rest


def assert_fixed_error(r: httpx.Response, status: int, *never: str) -> None:
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == "application/json"
    err = r.json()["error"]
    assert err["status"] == status and err["message"]
    for text in never:
        assert text not in r.text


# -- rows 10-12: names ------------------------------------------------------------------

TRAVERSAL_SEGMENTS = ["..", "%2e%2e", "%252e%252e", "..%2f..%2fetc", "a%00", "%2e", "a%5cb", "CON"]


@pytest.mark.parametrize("segment", TRAVERSAL_SEGMENTS)
def test_row10_11_traversal_in_path_segments_is_400(
    server: Server, segment: str, unchanged: None
) -> None:
    for path in (f"/api/v1/projects/{segment}/runs", f"/api/v1/projects/p/runs/{segment}/metrics"):
        # Sent raw: a client would resolve ".." itself before sending.
        status, reply = raw_request(server, f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        assert status == 400 and BAD_PATH.encode() in reply and b"etc" not in reply


@pytest.mark.parametrize(
    "bad",
    [
        "../x",
        "a/../../x",
        "/etc/passwd",
        "C:\\x",
        "..\\x",
        "file:///etc/passwd",
        "//proc/self/root",
        "..%2f..%2fx",
        "%252e%252e%252f",
        "a%23/../x",
        "a;/../x",
        "a%00.png",
        "a\x00.png",
        "a\u202e.png",
    ],
)
def test_row10_11_traversal_in_ingest_names_is_400_and_writes_nothing(
    server: Server, bad: str, unchanged: None, tmp_path: Path
) -> None:
    data = body(records(steps=2))
    for param in ("project", "run", "label"):
        r = server.ingest(data, **{param: bad})
        assert_fixed_error(r, 400, "etc", "proc")
        assert r.json()["error"]["message"] == bad_param(param)


@pytest.mark.parametrize(
    "bad",
    ["..", ".", "a/b", "a\\b", "CON", "x" * 1024, "my%20proj", "my proj", "caf\u00e9", "\uff50"],
)
def test_row12_bad_ids_are_400(server: Server, bad: str, unchanged: None) -> None:
    r = server.ingest(body(records(steps=2, project=bad)), project=bad)
    assert_fixed_error(r, 400)
    assert r.json()["error"]["message"] == bad_param("project")


def test_row12_case_variants_never_alias(server: Server) -> None:
    """``Case1`` and ``case1`` are two projects; neither reads or changes the other."""
    for project, steps in (("Case1", 2), ("case1", 5)):
        assert (
            server.ingest(body(records(steps=steps, project=project)), project=project).status_code
            == 200
        )
    assert {"Case1", "case1"} <= {p["name"] for p in server.projects()["projects"]}
    upper = server.client.get("/api/v1/projects/Case1/runs/r/history").json()
    lower = server.client.get("/api/v1/projects/case1/runs/r/history").json()
    assert upper != lower


def test_row12_bad_metric_keys_in_a_body_are_refused_whole(server: Server, unchanged: None) -> None:
    recs: list[R.AnyRecord] = [*records(steps=2, finish=False, project="keys")]
    recs.append(R.Metrics(len(recs), 1002.0, 2, {"ok": 1.0, "evil\u202ekey": 2.0}))
    r = server.ingest(body(recs), project="keys")
    assert_fixed_error(r, 422, "evil")
    assert server.client.get(
        "/api/v1/ack", params={"project": "keys", "run": "r", "label": "rank-0", "incarnation": 0}
    ).json() == {"acked_seq": -1}


# -- rows 15-18: sizes and shapes -----------------------------------------------------


def test_row15_decompression_bomb_is_413_and_the_server_keeps_serving(
    server: Server, unchanged: None
) -> None:
    bomb = gzip.compress(b"\0" * (64 * LIMIT))
    assert len(bomb) < LIMIT
    r = server.ingest(bomb, headers={"Content-Encoding": "gzip"})
    assert_fixed_error(r, 413)
    zstandard = need("zstandard")
    zbomb = zstandard.ZstdCompressor().compress(b"\0" * (64 * LIMIT))
    assert_fixed_error(server.ingest(zbomb, headers={"Content-Encoding": "zstd"}), 413)
    assert server.client.get("/api/v1/projects").status_code == 200


def test_row16_huge_content_length_is_413_before_reading(server: Server, unchanged: None) -> None:
    head = (
        "POST /api/v1/ingest?project=p&run=r&label=rank-0&incarnation=0 HTTP/1.1\r\n"
        f"Host: 127.0.0.1:{server.port}\r\nContent-Length: 10737418240\r\n"
    )
    status, reply = raw_request(server, head, timeout=5.0)  # no body sent: a read would hang
    assert status == 413 and b"10737418240" not in reply


def test_row16_chunked_body_over_the_cap_is_413(server: Server, unchanged: None) -> None:
    def chunks() -> Iterator[bytes]:
        yield MAGIC
        for _ in range(LIMIT // 1024 + 8):
            yield b"\0" * 1024

    r = server.client.post(
        "/api/v1/ingest",
        params={"project": "p", "run": "r", "label": "rank-0", "incarnation": 0},
        content=chunks(),
    )
    assert_fixed_error(r, 413)


def test_row16_json_bodies_and_names_have_caps(server: Server, unchanged: None) -> None:
    big = {"name": "v", "filters": {"q": "x" * (2 * 1024 * 1024)}}
    assert_fixed_error(server.client.post("/api/v1/projects/p/views", json=big), 413)
    long_name = {"name": "n" * 1_000_000, "filters": {}}
    assert server.client.post("/api/v1/projects/p/views", json=long_name).status_code == 422
    assert server.client.get("/api/v1/projects/p/views").json()["views"] == []


MALFORMED = {
    "truncated": lambda ok: ok[:-5],
    "type byte 0xc1": lambda ok: MAGIC + encode_frame([]).replace(b"\x90", b"\xc1"),
    "trailing bytes": lambda ok: ok + b"\x01\x02",
    "length prefix past the body": lambda ok: MAGIC + b"\xff\xff\xff\x00" + ok[8:],
    "not a stream": lambda ok: b"PK\x03\x04" + ok,
    "empty": lambda ok: b"",
}


@pytest.mark.parametrize("shape", sorted(MALFORMED))
def test_row17_malformed_frames_are_422_and_write_nothing(
    server: Server, shape: str, unchanged: None
) -> None:
    ok = body(records(steps=3, project="malformed"))
    data = MALFORMED[shape](ok)
    r = server.ingest(data, project="malformed")
    if shape == "empty":
        assert r.status_code in (200, 422)  # no records: nothing to apply either way
    else:
        assert_fixed_error(r, 422)
    assert server.client.get("/api/v1/projects").status_code == 200


def test_row17_deep_nesting_and_odd_values_are_422(server: Server, unchanged: None) -> None:
    import msgspec

    head = msgspec.msgpack.encode([1, 0, 0.0, "nest", "r", "rank-0", 0])
    # 10^4 nested arrays as the config: [[1, 0, 0.0, ..., [[[...]]]]]
    start = b"\x91" + bytes([head[0] + 1]) + head[1:] + b"\x91" * 10_000 + b"\x90"
    for payload in (start, b"\x91\xc7\x01\x05x", b"\x91\x81\x01\x02", b"\x91\xcf" + b"\xff" * 8):
        frame = MAGIC + _frame(payload)
        r = server.ingest(frame, project="nest")
        assert_fixed_error(r, 422)


def _frame(payload: bytes) -> bytes:
    import struct
    import zlib

    return struct.pack("<II", len(payload), zlib.crc32(payload)) + payload


def test_row18_a_frame_with_too_many_keys_is_413(server: Server, unchanged: None) -> None:
    recs: list[R.AnyRecord] = [*records(steps=1, finish=False, project="flood")]
    recs.append(R.Metrics(len(recs), 1001.0, 1, {f"k{i}": 1.0 for i in range(10_001)}))
    assert_fixed_error(server.ingest(body(recs), project="flood"), 413)


def test_row18_a_run_past_its_key_cap_is_413_across_uploads(tmp_path: Path) -> None:
    """Keys are capped per run too, not only per record and upload: uploads that each pass
    add up, and the one that would take the run past the cap is refused whole."""
    store = open_store(f"sqlite:///{tmp_path / 'db.sqlite'}")
    store.migrate()
    app = create_app(store, ServerSettings(static_dir=tmp_path / "none", max_keys_per_run=50))
    token = store.create_token("admin", None, "cap").value
    q = {"project": "cap", "run": "r", "incarnation": 0}
    with (
        serve_in_thread(app) as url,
        httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}) as client,
    ):
        for label, first in (("rank-0", 0), ("rank-1", 30)):
            recs = [*records(steps=1, finish=False, project="cap", label=label)]
            recs.append(
                R.Metrics(len(recs), 1001.0, 1, {f"k{i}": 1.0 for i in range(first, first + 30)})
            )
            r = client.post("/api/v1/ingest", params={**q, "label": label}, content=body(recs))
            if label == "rank-0":
                assert r.status_code == 200, r.text
            else:
                assert_fixed_error(r, 413)  # 60 distinct keys in the run, over 50
        keys = client.get("/api/v1/projects/cap/runs/r/metrics").json()
        assert len(keys["keys"]) == 30 + 1  # rank 0's and its own loss key; none of rank 1's
    store.close()


# -- rows 19-20: text fields --------------------------------------------------------

SQLISH = [
    "x' OR 1=1 --",
    "'; DROP TABLE runs;--",
    "%",
    "_",
    "\\",
    "metric.loss > 0 UNION SELECT 1",
    "q" * 10_000,
]


def test_row19_sql_strings_in_filters_match_literally(server: Server) -> None:
    assert server.ingest(body(records(steps=2, project="sql")), project="sql").status_code == 200
    for text in SQLISH:
        for path, params in (
            ("/api/v1/projects/sql/runs", {"q": text}),
            ("/api/v1/projects/sql/runs", {"tag": text}),
            ("/api/v1/projects/sql/runs/r/console", {"q": text}),
        ):
            r = server.client.get(path, params=params)
            assert r.status_code in (200, 400, 422), (text, r.text)
            if r.status_code == 200:
                body_ = r.json()
                assert body_.get("runs", body_.get("lines", [])) == [], text
    assert server.client.get("/api/v1/projects/sql/runs").json()["total"] == 1


XSS = '<script>alert(1)</script><img src=x onerror=alert(1)>"><svg onload=alert(1)>'


def test_row20_text_is_stored_verbatim_and_served_as_json(server: Server) -> None:
    recs: list[R.AnyRecord] = [records(steps=1, project="xss")[0]]
    recs[0] = R.StreamStart(0, 1000.0, "xss", "r", "rank-0", 0, config={"note": XSS}, name=XSS)
    recs.append(R.Metrics(1, 1001.0, 0, {XSS: 1.0}))
    recs.append(R.Console(2, 1002.0, "stdout", [XSS + "\x1b]8;;javascript:alert(1)\x1b\\x"]))
    assert server.ingest(body(recs), project="xss").status_code == 200
    run = server.client.get("/api/v1/projects/xss/runs/r")
    assert run.headers["content-type"] == "application/json"
    assert XSS in run.json()["config"]["note"]
    assert XSS in server.client.get("/api/v1/projects/xss/runs/r/metrics").json()["keys"]


# -- rows 23-26, 28-29: headers and errors --------------------------------------------

REFLECT = "<script>alert(1)</script>"


def test_row23_headers_are_never_reflected(server: Server, unchanged: None) -> None:
    for headers in (
        {"Content-Type": "text/html" + REFLECT},
        {"Accept": REFLECT},
        {"User-Agent": REFLECT},
        {"Content-Encoding": REFLECT},
    ):
        r = server.ingest(b"bad", headers=headers)
        assert r.status_code in (415, 422)
        assert REFLECT not in r.text and "alert" not in r.text
        r = server.client.get("/api/v1/projects/nope/runs", headers=headers)
        assert "alert" not in r.text


ROUTES = ["/", "/assets/a.js", "/api/v1/projects", "/api/openapi.json", "/api/v1/no-such"]


@pytest.mark.parametrize(
    "host",
    [
        "rebind.attacker.test:{port}",
        "evil.com",
        "localhost.evil.com",
        "127.0.0.1.evil.com",
        "",
        "[::1",
    ],
)
def test_row24_foreign_host_is_400_on_every_route(
    server: Server, host: str, unchanged: None
) -> None:
    host = host.format(port=server.port)
    for path in ROUTES:
        line = f"GET {path} HTTP/1.1\r\nHost: {host}\r\n" if host else f"GET {path} HTTP/1.0\r\n"
        status, reply = raw_request(server, line)
        assert status == 400, (path, reply[:200])
        assert b"evil" not in reply and b"attacker" not in reply
    r = server.client.post("/api/v1/ingest", headers={"Host": host or "x"}, content=b"")
    assert r.status_code == 400


def test_row24_allowed_hosts_are_answered(server: Server) -> None:
    auth = server.headers["Authorization"]
    for host in (f"localhost:{server.port}", "127.0.0.1", f"[::1]:{server.port}"):
        head = f"GET /api/v1/projects HTTP/1.1\r\nHost: {host}\r\nAuthorization: {auth}\r\n"
        status, reply = raw_request(server, head)
        assert status == 200, reply[:300]


def test_security_headers_on_every_response(server: Server) -> None:
    for path in [*ROUTES, "/api/v1/projects/.."]:
        r = server.client.get(path)
        assert r.headers["content-security-policy"] == CSP
        assert "frame-ancestors 'none'" in CSP and "script-src 'self'" in CSP
        assert r.headers["x-content-type-options"] == "nosniff"
        assert r.headers["referrer-policy"] == "no-referrer"
        assert r.headers["cross-origin-opener-policy"] == "same-origin"
        assert len(r.headers["x-request-id"]) == 16


def test_the_api_docs_page_has_its_own_narrow_csp(server: Server) -> None:
    r = server.client.get("/api/docs")
    assert r.status_code == 200 and r.headers["content-security-policy"] == DOCS_CSP
    assert "frame-ancestors 'none'" in DOCS_CSP and "'unsafe-eval'" not in DOCS_CSP


def test_row26_no_cors_for_foreign_origins(server: Server, unchanged: None) -> None:
    evil = {"Origin": "https://evil.example"}
    pre = server.client.options(
        "/api/v1/ingest",
        headers={
            **evil,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization",
        },
    )
    for r in (pre, server.client.get("/api/v1/projects", headers=evil)):
        assert not any(k.lower().startswith("access-control-") for k in r.headers)


def test_row28_no_route_serves_files_by_path(server: Server) -> None:
    for path in (
        "/api/v1/download?path=etc/passwd",
        "/api/v1/projects/p/runs/r/files?path=/etc/passwd",
        "/..%2f..%2fetc/passwd",
    ):
        r = server.client.get(path)
        assert r.status_code in (400, 404) and "root:" not in r.text


def test_row29_a_failing_store_gives_a_generic_500_with_a_request_id(
    server: Server, caplog: pytest.LogCaptureFixture
) -> None:
    assert server.ingest(body(records(steps=2, project="boom")), project="boom").status_code == 200
    # A real fault: the runs table disappears under the server (as on a damaged disk).
    with sqlite3.connect(server.db) as conn:
        conn.execute("ALTER TABLE streams RENAME TO streams_gone")
    try:
        with caplog.at_level(logging.ERROR, logger="rankwise.server"):
            r = server.client.get("/api/v1/projects/boom/runs")
        assert_fixed_error(
            r, 500, "Traceback", "streams", "SELECT", str(server.db.parent), "sqlite"
        )
        request_id = r.json()["error"]["request_id"]
        assert r.headers["x-request-id"] == request_id
        assert any(request_id in rec.getMessage() and rec.exc_info for rec in caplog.records)
        # Row 8: the failing request carried a token; neither the reply nor the logged
        # traceback holds it.
        secret = server.headers["Authorization"].split()[-1]
        logged = "\n".join(logging.Formatter().format(rec) for rec in caplog.records)
        assert secret not in r.text and secret not in logged and "Traceback" in logged
    finally:
        with sqlite3.connect(server.db) as conn:
            conn.execute("ALTER TABLE streams_gone RENAME TO streams")


# -- --allowed-hosts ------------------------------------------------------------------


def test_allowed_hosts_for_a_bind_address() -> None:
    assert allowed_hosts_for("127.0.0.1") == ("localhost", "127.0.0.1", "::1")
    assert "10.1.2.3" in allowed_hosts_for("10.1.2.3")
    wildcard = allowed_hosts_for("0.0.0.0", ["Tracker", "*.cluster.internal"])
    assert socket.gethostname().lower() in wildcard and "tracker" in wildcard
    hosts = HostAllowList(wildcard)
    assert hosts.allows("tracker:8585") and hosts.allows("node7.cluster.internal")
    assert not hosts.allows("cluster.internal.evil.com") and not hosts.allows("evil.com")
    assert not hosts.allows("tracker:http") and not hosts.allows("[::1") and not hosts.allows("")
    assert HostAllowList(["*"]).allows("anything.example")


@pytest.mark.slow
def test_cli_allowed_hosts_reach_every_worker(tmp_path: Path) -> None:
    """``rankwise server --workers 2 --allowed-hosts``: each worker process answers it."""
    db = f"sqlite:///{tmp_path / 'db.sqlite'}"
    args = ["--workers", "2", "--allowed-hosts", "tracker.example,other.example"]
    with ServerProcess.db(db, tmp_path / "server.log", *args) as proc:
        port = int(urlsplit(proc.url).port or 0)
        fake = Server(proc.url, tmp_path, {}, httpx.Client())
        for _ in range(6):  # several connections: both workers answer
            for host, status in (
                ("tracker.example", 200),
                ("other.example:1", 200),
                ("evil.example", 400),
            ):
                head = f"GET /api/v1/projects HTTP/1.1\r\nHost: {host}\r\n"
                head += f"Authorization: Bearer {proc.token}\r\n"
                got, _ = raw_request(fake, head)
                assert got == status, (host, port)
        fake.client.close()


def test_the_local_reader_skips_a_stream_an_upload_could_not_store(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A stream file (not written by the SDK) whose config JSON cannot hold is not indexed;
    the other runs are, and every read still answers."""
    from rankwise.server.indexer import DirectoryTailer
    from rankwise.stream.frames import encode_frame

    root = tmp_path / "data"
    for run, config in (("good", {"lr": 0.1}), ("poison", {"a": {(1, 2): 3}})):
        (root / "p" / run / "streams").mkdir(parents=True)
        start = R.StreamStart(0, 1000.0, "p", run, "rank-0", 0, config=config)
        data = MAGIC + encode_frame([start, R.Metrics(1, 1001.0, 0, {"loss": 1.0})])
        (root / "p" / run / "streams" / "rank-0.0.rwlog").write_bytes(data)
    store = open_store(f"sqlite:///{tmp_path / 'index.db'}")
    store.migrate()
    log = logging.getLogger("rankwise")  # it does not propagate once rankwise set it up
    log.addHandler(caplog.handler)
    try:
        with caplog.at_level(logging.WARNING, logger="rankwise"):
            DirectoryTailer(root, store).poll()
        assert store.get_run("p", "good") is not None and store.get_run("p", "poison") is None
        assert any("not indexed" in r.getMessage() for r in caplog.records)
    finally:
        log.removeHandler(caplog.handler)
        store.close()


# -- the per-route policy table (rankwise.server.route_policy) ------------------------


def _served_api_routes(routes: Any) -> dict[str, set[str]]:
    """Every route under /api/ with its methods, through FastAPI's included routers."""
    out: dict[str, set[str]] = {}
    for route in routes:
        if hasattr(route, "effective_route_contexts"):
            inner = list(route.effective_route_contexts())
        else:
            inner = [route]
        for r in inner:
            path = getattr(r, "path", "")
            if path.startswith("/api/"):
                out.setdefault(path, set()).update(getattr(r, "methods", None) or ())
    return out


def test_the_route_policy_table_covers_every_api_route_and_no_other(tmp_path: Path) -> None:
    from rankwise.server.route_policy import ROUTES

    store = open_store(tmp_path / "db.sqlite")
    try:
        app = create_app(store, ServerSettings(static_dir=tmp_path / "no-static"))
        served = _served_api_routes(app.routes)
    finally:
        store.close()
    assert len(served) >= 30  # the walk found the API
    assert set(served) - set(ROUTES) == set(), "API routes with no entry in ROUTES"
    assert set(ROUTES) - set(served) == set(), "ROUTES names routes the app lacks"
    for template, policy in ROUTES.items():
        assert set(policy.caps) <= served[template], f"{template}: a cap for a method it lacks"
        if policy.file_param is not None:
            assert f"{{{policy.file_param}:path}}" in template


def test_each_request_gets_its_routes_policy() -> None:
    from rankwise.server.route_policy import RoutePolicies

    p = RoutePolicies()
    digest = "a" * 64
    assert p.match("/api/v1/ingest").cap("POST") == "upload"
    assert p.match("/api/v1/artifacts/p/n/versions").cap("POST") == "upload"
    assert p.match("/api/v1/artifacts/p/n/v3").cap("POST") == "json"
    assert p.match(f"/api/v1/blobs/p/{digest}").cap("PUT") == "blob"
    assert p.match("/api/v1/blobs/p/missing").cap("POST") == "json"
    assert p.match("/api/v1/blobs/p/missing").policy.csp == "blob"
    files = p.match("/api/v1/artifacts/p/n/v0/files/dir/a.txt")
    assert (files.policy.csp, files.file_from) == ("artifact", 8)
    # "files" as an alias is a version read, not a file path
    assert p.match("/api/v1/artifacts/p/n/files").policy.csp == "app"
    assert p.match("/api/docs").policy.csp == "docs"
    assert p.match("/api/v1/nothing/here").cap("POST") == "json"
    assert p.match("/assets/app.js").policy.csp == "app"


def test_blob_and_artifact_file_replies_carry_their_csp(server: Server) -> None:
    from rankwise.server.hardening import ARTIFACT_CSP, BLOB_CSP

    r = server.client.get(f"/api/v1/blobs/p/{'b' * 64}")
    assert r.headers["content-security-policy"] == BLOB_CSP
    assert r.headers["x-frame-options"] == "SAMEORIGIN"
    r = server.client.get("/api/v1/artifacts/p/n/v0/files/a.txt")
    assert r.headers["content-security-policy"] == ARTIFACT_CSP
    assert r.headers["x-frame-options"] == "DENY"
    r = server.client.get("/api/v1/artifacts/p/n/v0/files/..%2F..%2Fetc")
    assert r.status_code == 400
    r = server.client.get("/api/v1/projects")
    assert r.headers["content-security-policy"] == CSP
