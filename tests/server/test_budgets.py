"""A hostile client against a real uvicorn: each request is bounded work.

Byte caps do not bound what a request makes the server do (issue 28): these cases send
small bodies that would cost memory, CPU or rows out of proportion, and check that they
are refused (413/422/408/403) with nothing stored, or that the server keeps answering
while it works. One SQLite-backed server serves most cases; a case that needs other
settings starts its own.
"""

from __future__ import annotations

import json
import random
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

import rankwise
from rankwise.server import ServerSettings, create_app
from rankwise.store import open_store
from rankwise.stream import records as R
from rankwise.stream import streamkey
from tests.helpers.servers import serve_in_thread, subprocess_env
from tests.helpers.streams import body, records, start
from tests.helpers.wait import wait_until


@dataclass
class Server:
    url: str
    client: httpx.Client
    app: Any

    def projects(self) -> Any:
        return self.client.get("/api/v1/projects").json()

    def ingest(self, recs: list[R.AnyRecord], run: str = "r", per_frame: int = 50) -> Any:
        if isinstance(recs[0], R.StreamStart):
            run = recs[0].run_id
        q = {"project": "p", "run": run, "label": "rank-0", "incarnation": 0}
        return self.client.post("/api/v1/ingest", params=q, content=body(recs, per_frame))


def _serve(tmp: Path, **settings: Any) -> Iterator[Server]:
    store = open_store(f"sqlite:///{tmp / 'db.sqlite'}")
    store.migrate()
    token = store.create_token("admin", None, "budgets").value
    app = create_app(store, ServerSettings(**settings))
    headers = {"Authorization": f"Bearer {token}"}
    with serve_in_thread(app) as url, httpx.Client(base_url=url, headers=headers, timeout=60) as c:
        yield Server(url, c, app)
    store.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    yield from _serve(tmp_path_factory.mktemp("budgets"))


@pytest.fixture
def unchanged(server: Server) -> Iterator[None]:
    before = server.projects()
    yield
    assert server.projects() == before


# -- 1: element counts of config, summary, tags, argv, artifact metadata ----------------

FLOODS = {
    # 8 kB of msgpack, millions of objects before: one list of many empty lists
    "wide list": {"config": {"a": [[] for _ in range(20_000)]}},
    "wide map": {"config": {f"k{i}": 0 for i in range(20_000)}},
    "many small containers": {"config": {f"k{i}": [[0] * 9_000] for i in range(12)}},
    "deep": {"config": {"a": json.loads("[" * 70 + "]" * 70)}},
    "tags": {"tags": ["t"] * 20_000},
    "argv": {"argv": [""] * 20_000},
}


@pytest.mark.parametrize("fields", FLOODS.values(), ids=list(FLOODS))
def test_config_element_floods_are_413(
    server: Server, fields: dict[str, Any], unchanged: None
) -> None:
    r = server.ingest([start(run="flood", **fields)])
    assert r.status_code == 413, r.text
    assert "elements" in r.text or "items" in r.text or "levels" in r.text


def test_summary_updates_spend_one_budget_per_upload(server: Server, unchanged: None) -> None:
    """Each record under the per-record cap, together over the per-upload one."""
    recs: list[R.AnyRecord] = [start(run="flood")]
    items = {f"k{i}": [0] * 9_000 for i in range(10)}  # 90k elements per record
    for _ in range(12):
        recs.append(R.SummaryUpdate(len(recs), 1000.0, items))
    r = server.ingest(recs)
    assert r.status_code == 413 and "upload" in r.text, r.text


def test_a_streams_config_is_budgeted_across_uploads(server: Server) -> None:
    """Each update under the per-record budget, the stream's config over it: the upload
    that would pass it is 413 and nothing of it is applied."""
    half = {f"a{i}": [0] * 5_999 for i in range(10)}  # 60,010 elements
    first = [start(run="grows", config=half), R.Metrics(1, 1000.0, 0, {"loss": 1.0})]
    assert server.ingest(first).json()["acked_seq"] == 1
    more = {f"b{i}": [0] * 5_999 for i in range(10)}
    r = server.ingest([R.ConfigUpdate(2, 1001.0, more)], run="grows")
    assert r.status_code == 413 and "all its updates" in r.text, r.text
    assert server.client.get("/api/v1/projects/p/runs/grows").json()["config"] == half


def test_an_ordinary_config_passes(server: Server) -> None:
    config = {"model": {"layers": [{"width": 64, "act": "relu"}] * 48}, "lr": 3e-4}
    r = server.ingest([start(run="ordinary", config=config), *records(steps=3)[1:]])
    assert r.status_code == 200, r.text
    got = server.client.get("/api/v1/projects/p/runs/ordinary").json()
    assert got["config"] == config


def test_the_local_reader_skips_an_element_flood(tmp_path: Path) -> None:
    from rankwise.server.indexer import DirectoryTailer
    from rankwise.stream.frames import MAGIC, encode_frame

    root = tmp_path / "data"
    half = {f"a{i}": [0] * 5_999 for i in range(10)}  # 60,010 elements: two are too many
    for run, config, more in (
        ("good", {"lr": 0.1}, {}),
        ("flood", FLOODS["wide list"]["config"], {}),
        ("grows", half, {f"b{i}": v for i, v in enumerate(half.values())}),
    ):
        (root / "p" / run / "streams").mkdir(parents=True)
        first = R.StreamStart(0, 1000.0, "p", run, "rank-0", 0, config=config)
        recs = [first, R.ConfigUpdate(1, 1000.0, more), R.Metrics(2, 1001.0, 0, {"loss": 1.0})]
        (root / "p" / run / "streams" / "rank-0.0.rwlog").write_bytes(MAGIC + encode_frame(recs))
    store = open_store(f"sqlite:///{tmp_path / 'index.db'}")
    store.migrate()
    try:
        tailer = DirectoryTailer(root, store)
        tailer.poll()
        tailer.poll()  # a stream refused once is not read again
        assert store.get_run("p", "good") is not None
        assert store.get_run("p", "flood") is None and store.get_run("p", "grows") is None
        assert all(t.done for t in tailer._tails.values() if "good" not in str(t.path))
    finally:
        store.close()


def _commit(server: Server, name: str, manifest: dict[str, Any], **extra: Any) -> httpx.Response:
    req = {"type": "dataset", "client_id": f"c{time.monotonic_ns()}", "manifest": manifest}
    return server.client.post(
        f"/api/v1/artifacts/p/{name}/versions",
        content=json.dumps({**req, **extra}),
        headers={"Content-Type": "application/json"},
    )


def test_artifact_metadata_over_the_budget_is_413(server: Server) -> None:
    r = _commit(server, "meta", {"entries": []}, metadata={"a": [[] for _ in range(20_000)]})
    assert r.status_code == 413, r.text
    assert server.client.get("/api/v1/artifacts/p").json()["artifacts"] == []


# -- 3: an artifact manifest is validated in linear time, off the event loop ------------


def _pings_during(server: Server, work: Any) -> tuple[Any, list[float]]:
    """Run ``work()`` in a thread, sending /projects requests meanwhile; its result and
    when (``time.monotonic()``) each request was answered."""
    done = threading.Event()
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(work())
        finally:
            done.set()

    thread = threading.Thread(target=run)
    answered: list[float] = []
    with httpx.Client(base_url=server.url, headers=server.client.headers, timeout=60) as c:
        thread.start()
        while not done.is_set():
            assert c.get("/api/v1/projects").status_code == 200
            answered.append(time.monotonic())
    thread.join()
    return out[0], answered


def test_a_deep_manifest_is_refused_and_never_stalls_the_server(server: Server) -> None:
    """5,000 paths 500 directories deep: quadratic to check before (every prefix of
    every path joined, on the event loop). Refused now, the server answering throughout."""
    deep = "/".join(["d"] * 499)
    entries = [
        {"path": f"{deep}/f{i}", "digest": "0" * 64, "size": 1, "chunks": [["0" * 64, 1]]}
        for i in range(5000)
    ]
    r = _commit(server, "deep", {"entries": entries})
    assert r.status_code == 422 and "directories deep" in r.text, r.text


def test_a_large_manifest_is_checked_off_the_event_loop(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A legitimate but large manifest (20,000 files 60 directories deep, seconds of CPU
    to check): other requests are answered while it is checked, not after it."""
    from rankwise.server.routes import artifacts as route

    real = route.check_commit  # type: ignore[attr-defined]
    span: list[float] = []

    def check_commit(name: str, req: Any) -> str:
        # The real check, then held to at least a second of CPU the same way (bytecode
        # holding the GIL between switches), so the window is wide on any machine.
        span.append(time.monotonic())
        digest = real(name, req)
        while time.monotonic() - span[0] < 1.0:
            sum(range(1000))
        span.append(time.monotonic())
        return digest

    monkeypatch.setattr(route, "check_commit", check_commit)
    deep = "/".join(f"d{i}" for i in range(60))
    entries = [
        {"path": f"{deep}/f{i}", "digest": "a" * 64, "size": 1, "chunks": [["a" * 64, 1]]}
        for i in range(20_000)
    ]
    manifest = {"entries": entries}
    raw = json.dumps({"type": "dataset", "client_id": "c0", "manifest": manifest}).encode()
    headers = {"Content-Type": "application/json"}
    url = "/api/v1/artifacts/p/large/versions"  # encoded above: this process only sends
    r, answered = _pings_during(
        server, lambda: server.client.post(url, content=raw, headers=headers)
    )
    assert r.status_code == 409, r.text  # valid; its chunk is not uploaded
    assert len(span) == 2, span
    # On the event loop no request can be answered while the check runs; off it they are.
    inside = [t for t in answered if span[0] < t < span[1]]
    assert inside, (span, answered)


def test_manifest_checks_are_linear_and_still_refuse_a_file_under_a_file() -> None:
    from rankwise.artifacts.manifest import Chunk, Entry, Manifest, validate_manifest
    from rankwise.errors import UsageError

    def entry(path: str) -> Entry:
        return Entry(path=path, digest="a" * 64, size=1, chunks=[Chunk("a" * 64, 1)])

    for paths, message in (
        (["a", "a-b", "a/b"], "lies under 'a'"),
        (["x/y/z", "x/y"], "lies under 'x/y'"),
        (["a.txt", "a.txt"], "appears twice"),
    ):
        with pytest.raises(UsageError, match=message):
            validate_manifest(Manifest(entries=[entry(p) for p in paths]))
    validate_manifest(Manifest(entries=[entry(p) for p in ("a/b", "a/c", "ab", "a-b/c")]))


# -- 2: media keys in bytes; one failing upload fails alone on PostgreSQL --------------


def test_a_media_key_of_four_byte_characters_is_422(server: Server, unchanged: None) -> None:
    key = "\U0001f600" * 1024  # 1,024 characters, 4,096 bytes
    item = R.MediaItem(kind="image", digest="a" * 64, size=1, format="png")
    r = server.ingest([start(run="emoji"), R.Media(1, 1000.0, 0, key, [item])])
    assert r.status_code == 422 and "bytes" in r.text, r.text


def test_only_connection_errors_make_the_store_unavailable() -> None:
    import psycopg
    import psycopg.errors as E

    from rankwise.server.group_commit import store_unavailable

    assert store_unavailable(psycopg.OperationalError("connection lost"))  # no SQLSTATE
    for cls in (E.AdminShutdown, E.CannotConnectNow, E.ConnectionFailure, E.DiskFull):
        assert store_unavailable(cls()), cls
    for cls in (E.ProgramLimitExceeded, E.StatementTooComplex, E.UniqueViolation):  # type: ignore[assignment]
        assert not store_unavailable(cls()), cls


def test_a_failing_upload_fails_alone_in_a_postgres_batch(pg_dsn: str) -> None:
    """One group-commit batch on real PostgreSQL: good uploads of project ``a`` and one of
    project ``b`` whose media key overflows the btree entry (SQLSTATE 54000, what the
    route now refuses first). Only ``b``'s upload fails; ``a``'s land."""
    from concurrent.futures import Future

    import psycopg

    from rankwise.server.group_commit import GroupCommit
    from rankwise.store.postgres import PostgresStore
    from rankwise.stream.identity import StreamId

    store = PostgresStore(pg_dsn)
    store.migrate()
    commit = GroupCommit(store)
    try:
        good = [StreamId("a", f"r{i}", "rank-0", 0) for i in range(5)]
        bad = StreamId("b", "r", "rank-0", 0)
        item = R.MediaItem(kind="image", digest="a" * 64, size=1, format="png")
        # 1,024 random 4-byte characters: 4 kB that PostgreSQL cannot compress below the
        # 2,704 bytes of a btree entry (a repeated one compresses to a few bytes).
        spread = random.Random(28)
        key = "".join(chr(0x20000 + spread.randrange(40_000)) for _ in range(1024))
        huge = R.Media(1, 1000.0, 0, key, [item])
        batch: list[Any] = []
        for k in good:
            batch.append((k, records(run=k.run_id, project="a", steps=3), None, Future()))
        batch.insert(2, (bad, [start("b", "r"), huge], None, Future()))
        commit._waiting += len(batch)  # as submit() counts them
        commit._commit(batch)  # one batch, as the committer thread makes it
        for key, recs, _, fut in batch:
            if key == bad:
                assert isinstance(fut.exception(), psycopg.errors.ProgramLimitExceeded)
            else:
                assert fut.result() == recs[-1].seq
        assert store.acked(bad) == -1
    finally:
        store.close()


# -- 4: connections before authentication --------------------------------------------


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def _status(sock: socket.socket, wait: float) -> int | None:
    """The status of the reply ``sock`` gets within ``wait`` seconds (None: no reply)."""
    sock.settimeout(wait)
    reply = b""
    try:
        while b"\r\n" not in reply:  # the status line may come in pieces on a loaded machine
            chunk = sock.recv(4096)
            if not chunk:
                break
            reply += chunk
    except TimeoutError:
        if not reply:
            return None
    parts = reply.split(b"\r\n", 1)[0].split(b" ", 2)
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0


def test_half_sent_requests_are_closed_at_the_header_deadline(tmp_path: Path) -> None:
    """Idle half-requests held sockets forever: now 408 and closed after the deadline,
    on new connections and on kept-alive ones alike, and the server goes on answering."""
    from rankwise.server.guard import guarded

    store = open_store(f"sqlite:///{tmp_path / 'db.sqlite'}")
    store.migrate()
    app = create_app(store, ServerSettings(auth=False))
    half = b"GET /api/v1/projects HTTP/1.1\r\nHost: 127.0.0.1\r\n"  # no blank line
    try:
        with serve_in_thread(app, http=guarded(1.0, 1000)) as url:
            socks = [socket.create_connection(("127.0.0.1", _port(url))) for _ in range(30)]
            for s in socks:
                s.sendall(half)
            kept = socket.create_connection(("127.0.0.1", _port(url)))
            kept.sendall(half + b"\r\n")
            assert _status(kept, 10) == 200
            kept.sendall(half)  # a next request on the kept-alive connection, never ended
            socks.append(kept)
            try:
                first = _status(socks[0], 10)  # the others are due at the same moment
                assert [first] + [_status(s, 3) for s in socks[1:]] == [408] * len(socks)
            finally:
                for s in socks:
                    s.close()
            assert httpx.get(url + "/api/v1/projects").status_code == 200
    finally:
        store.close()


def test_connections_past_the_cap_are_closed_at_once(tmp_path: Path) -> None:
    from rankwise.server.guard import guarded

    store = open_store(f"sqlite:///{tmp_path / 'db.sqlite'}")
    store.migrate()
    app = create_app(store, ServerSettings(auth=False))
    try:
        with serve_in_thread(app, http=guarded(30.0, 20)) as url:
            socks = [socket.create_connection(("127.0.0.1", _port(url))) for _ in range(25)]
            try:
                got = [_status(s, 0.1 if i < 20 else 10) for i, s in enumerate(socks)]
                assert got == [None] * 20 + [503] * 5
            finally:
                for s in socks:
                    s.close()
            wait_until(lambda: httpx.get(url + "/api/v1/projects").status_code == 200)
    finally:
        store.close()


_FD_STARVED = """
import os, resource, sys
from rankwise.server import ServerSettings, create_app
from rankwise.server.serve import _Server, uvicorn_config
from rankwise.store import open_store

store = open_store(sys.argv[1])
store.migrate()
app = create_app(store, ServerSettings(auth=False))
resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))

def ready(url):
    held = []
    try:
        while True:
            held.append(os.open(os.devnull, os.O_RDONLY))
    except OSError:
        pass
    for fd in held[:4]:  # four descriptors left for connections
        os.close(fd)
    print(url, flush=True)

_Server(uvicorn_config(app, "127.0.0.1", 0, "warning"), ready).run()
"""


@pytest.mark.slow
def test_accept_errors_are_logged_once_per_interval(tmp_path: Path) -> None:
    """A server out of file descriptors (real sockets, the served app of ``rankwise
    server``): one log line for its failed accepts, not a traceback per attempt."""
    import subprocess
    import sys

    from tests.helpers.servers import subprocess_env

    proc = subprocess.Popen(
        [sys.executable, "-c", _FD_STARVED, f"sqlite:///{tmp_path / 'db.sqlite'}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=subprocess_env(),
    )  # fmt: skip
    socks = []
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://"), proc.stderr.read() if proc.stderr else ""
        for _ in range(40):
            socks.append(socket.create_connection(("127.0.0.1", _port(url)), timeout=5))
        time.sleep(4.5)  # asyncio retries a failed accept every second
    finally:
        for s in socks:
            s.close()
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    # asyncio's own report (a traceback each) is once per failed attempt, ~4 here.
    assert "out of system resource" not in err, err[-3000:]
    assert err.count("cannot accept connections") == 1, err[-3000:]


def test_the_served_apps_use_the_guarded_protocol() -> None:
    from rankwise.server.guard import GuardedH11Protocol
    from rankwise.server.serve import uvicorn_config

    assert uvicorn_config(object(), "127.0.0.1", 0, "warning").http is GuardedH11Protocol


# -- 5: a body still arriving holds no admission slot ----------------------------------


def test_slow_bodies_take_no_admission_slots(tmp_path: Path) -> None:
    """Past --max-inflight (4) bodies still arriving: another project's upload is still
    answered 200; the slow ones get 408 at the body deadline."""
    for srv in _serve(tmp_path, max_inflight=4, body_deadline=3.0):
        store = srv.app.state.store
        slow_token = store.create_token("ingest", ["slow"], "slow").value
        socks = []
        for i in range(6):
            s = socket.create_connection(("127.0.0.1", int(srv.url.rsplit(":", 1)[1])))
            s.sendall(
                (
                    f"POST /api/v1/ingest?project=slow&run=r{i}&label=rank-0&incarnation=0 "
                    "HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-rankwise-stream\r\n"
                    f"Authorization: Bearer {slow_token}\r\nContent-Length: 1000\r\n\r\nRWL"
                ).encode()
            )
            socks.append(s)
        try:
            time.sleep(0.5)  # let the server read their headers
            r = srv.ingest(records(steps=3))
            assert r.status_code == 200, r.text
            for s in socks:
                s.settimeout(30)
                reply = s.recv(4096)
                status = int(reply.split(b" ", 2)[1])
                assert status in (408, 429), reply  # 2 over the per-token cap: 429 at once
        finally:
            for s in socks:
                s.close()


# -- 11: console lines --------------------------------------------------------------------


def test_console_line_floods_are_413(server: Server, unchanged: None) -> None:
    one = [start(run="lines"), R.Console(1, 1000.0, "stdout", [""] * 10_001)]
    assert server.ingest(one).status_code == 413
    many: list[R.AnyRecord] = [start(run="lines")]
    for _ in range(101):
        many.append(R.Console(len(many), 1000.0, "stdout", [""] * 9_901))
    r = server.ingest(many, per_frame=10)
    assert r.status_code == 413 and "console lines" in r.text, r.text


def test_console_past_a_streams_budget_is_dropped_and_the_stream_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rankwise.store import health

    monkeypatch.setattr(health, "MAX_CONSOLE_BYTES", 1000)
    for srv in _serve(tmp_path):
        recs = records(steps=4, finish=False)
        lines = [f"line {i:03d} " + "x" * 20 for i in range(100)]  # 29 characters each
        recs.append(R.Console(len(recs), 1001.0, "stdout", lines[:50]))
        assert srv.ingest(recs).status_code == 200
        more: list[R.AnyRecord] = [R.Console(len(recs), 1002.0, "stdout", lines[50:])]
        more.append(R.Finish(len(recs) + 1, 1003.0, "finished", last_step=3))
        r = srv.ingest([*recs, *more])
        assert r.status_code == 200 and r.json()["acked_seq"] == more[-1].seq
        page = srv.client.get("/api/v1/projects/p/runs/r/console", params={"limit": 1000})
        texts = [line["text"] for line in page.json()["lines"]]
        assert texts[:33] == lines[:33]  # 33 lines of 29 characters (+1) fit in 1,000
        assert len(texts) == 34 and "not stored" in texts[-1], texts[30:]
        assert srv.client.get("/api/v1/projects/p/runs/r").json()["state"] == "finished"


# -- 6: another holder of the ingest token cannot silently take over a live stream ------


def test_a_forged_mark_is_refused_when_the_real_records_reach_it(server: Server) -> None:
    """A second process with the project's ingest token reads the mark, pushes the
    stream on and finishes it; the rank's own records at that mark then get 409 (were
    200 and silently dropped), and the rank goes on from there. A replay of what was
    stored is still 200."""
    store = server.app.state.store
    forger = {"Authorization": "Bearer " + store.create_token("ingest", ["p"], "forger").value}
    real = records(steps=12, run="forged", finish=False)  # seq 0..12
    q = {"project": "p", "run": "forged", "label": "rank-0", "incarnation": 0}

    def post(recs: list[R.AnyRecord], headers: dict[str, str] | None = None) -> httpx.Response:
        return server.client.post("/api/v1/ingest", params=q, content=body(recs), headers=headers)

    assert post(real[:6]).json()["acked_seq"] == 5
    assert post(real[:6]).json()["acked_seq"] == 5  # a replay: the same records
    mark = server.client.get("/api/v1/ack", params=q, headers=forger).json()["acked_seq"]
    fake: list[R.AnyRecord] = [R.Metrics(mark + 1 + i, 2000.0, 99, {"loss": 0.0}) for i in range(3)]
    fake.append(R.Finish(mark + 4, 2001.0, "finished", last_step=99))
    assert post(fake, forger).json()["acked_seq"] == 9
    r = post(real[6:])  # seq 6..12: its seq 9 is not the forger's
    assert r.status_code == 409 and r.json()["error"]["acked_seq"] == 9, r.text
    assert post(real[10:]).json()["acked_seq"] == 12  # the rank goes on from the mark


_RANK = """
import pathlib, sys, time
import rankwise

here = pathlib.Path(sys.argv[1])
run = rankwise.init(project="p", id="bound", dir=str(here / "data"), server=sys.argv[2],
                    settings={"upload_interval": 0.1, "flush_interval": 0.05})
for s in range(10):
    run.log({"loss": float(s)}, step=s)
(here / "half").touch()
while not (here / "go").exists():
    time.sleep(0.05)
for s in range(10, 30):
    run.log({"loss": float(s)}, step=s)
run.finish(exit_code=3)  # "failed": a forged Finish would say "finished"
"""


def test_a_bound_stream_refuses_another_token_holder(server: Server, tmp_path: Path) -> None:
    """A live rank streams through its SDK; a second holder of the project's ingest
    token reads the mark, pushes it far ahead and finishes the stream: 403, nothing of
    it applied (before: 200, and every later record of the rank was acknowledged and
    dropped, the run "finished"). The rank's records all land, each once."""
    store = server.app.state.store
    rank_token = store.create_token("ingest", ["p"], "rank").value
    forger = {"Authorization": "Bearer " + store.create_token("ingest", ["p"], "forger").value}
    (tmp_path / "rank.py").write_text(_RANK)
    env = subprocess_env(RANKWISE_TOKEN=rank_token)
    proc = subprocess.Popen(
        [sys.executable, str(tmp_path / "rank.py"), str(tmp_path), server.url], env=env
    )
    q = {"project": "p", "run": "bound", "label": "rank-0", "incarnation": 0}

    def mark() -> int:
        return int(server.client.get("/api/v1/ack", params=q, headers=forger).json()["acked_seq"])

    try:
        wait_until(lambda: (tmp_path / "half").exists() and mark() >= 10, timeout=60)
        at = mark()
        fake: list[R.AnyRecord] = [
            R.Metrics(at + 1 + i, 2000.0, 1000 + i, {"loss": -1.0}) for i in range(500)
        ]
        fake.append(R.Finish(at + 501, 2001.0, "finished", last_step=10**9))
        for headers in (forger, {**forger, "X-Rankwise-Stream-Key": "guessed"}):
            r = server.client.post("/api/v1/ingest", params=q, content=body(fake), headers=headers)
            assert r.status_code == 403, r.text
            assert r.json()["error"]["stream_key"] is True, r.text
            assert "X-Rankwise-Stream-Key" in r.json()["error"]["message"], r.text
        assert mark() == at  # nothing of it applied
        (tmp_path / "go").touch()
        assert proc.wait(120) == 0
    finally:
        proc.kill()
        proc.wait()
    sidecar = tmp_path / "data/p/bound/streams/rank-0.0.rwlog.key"
    secret = sidecar.read_text()
    assert sidecar.stat().st_mode & 0o777 == 0o600
    read = server.client.headers["Authorization"].removeprefix("Bearer ")
    remote = rankwise.Api(server=server.url, token=read).run("p/bound")
    assert remote.state == "failed"  # the rank's own Finish, not the forger's
    rows = remote.history(keys=["loss"])
    assert sorted((r["step"], r["loss"]) for r in rows) == [(s, float(s)) for s in range(30)]
    # The read API holds no secret (the server never had one).
    reply = server.client.get("/api/v1/projects/p/runs/bound").text
    assert secret not in reply and streamkey.digest(secret) not in reply


def test_a_stream_key_is_fixed_by_its_first_start(server: Server) -> None:
    """An upload that starts a bound stream must present its secret; a later StreamStart
    cannot rebind it; a stream without a digest keeps today's rules."""
    q = {"project": "p", "run": "rebind", "label": "rank-0", "incarnation": 0}
    recs = records(steps=6, run="rebind", finish=False)
    first = recs[0]
    assert isinstance(first, R.StreamStart)
    first.key_digest = streamkey.digest("mine")

    def post(rs: list[R.AnyRecord], key: str | None) -> httpx.Response:
        headers = {} if key is None else {"X-Rankwise-Stream-Key": key}
        return server.client.post("/api/v1/ingest", params=q, content=body(rs), headers=headers)

    assert post(recs[:3], None).status_code == 403
    assert post(recs[:3], "other").status_code == 403
    assert post(recs[:3], "mine").json()["acked_seq"] == 2
    again = msgspec.structs.replace(first, seq=3, key_digest=streamkey.digest("theirs"))
    assert post([again], "theirs").status_code == 403  # cannot rebind
    assert post(recs[3:], "mine").json()["acked_seq"] == 6
    # An unbound stream (an older SDK, another writer): any holder of the token, as before.
    assert server.ingest(records(steps=3, run="unbound")).status_code == 200


# -- 7: compare --------------------------------------------------------------------------


def test_compare_dedupes_runs_and_budgets_points(server: Server) -> None:
    assert server.ingest(records(steps=5, run="cmp")).status_code == 200
    same = {"runs": ["p/cmp"] * 64, "key": "loss", "max_points": 100_000}
    r = server.client.post("/api/v1/compare", json=same)
    assert r.status_code == 200 and len(r.json()["runs"]) == 1, r.text
    many = {"runs": [f"p/r{i}" for i in range(64)], "key": "loss", "max_points": 100_000}
    r = server.client.post("/api/v1/compare", json=many)
    assert r.status_code == 413 and "points" in r.text, r.text


def test_compare_counts_every_stream_up_front_and_streams_its_reply(server: Server) -> None:
    """The budget counts each run's streams before a byte is sent (runs x max_points alone
    would pass), and a reply within it is streamed (chunked, no Content-Length), equal in
    JSON and MessagePack."""
    for run in ("wide0", "wide1", "wide2"):
        for rank in range(8):
            q = {"project": "p", "run": run, "label": f"rank-{rank}", "incarnation": 0}
            recs = records(label=f"rank-{rank}", steps=5, run=run)
            posted = server.client.post("/api/v1/ingest", params=q, content=body(recs))
            assert posted.status_code == 200
    # 3 x 100,000 fits runs x max_points; with 8 streams and a band each it is 2.7M.
    wide = {"runs": ["p/wide0", "p/wide1", "p/wide2"], "key": "loss", "max_points": 100_000}
    r = server.client.post("/api/v1/compare", json=wide)
    assert r.status_code == 413 and "points" in r.text, r.text
    ask = {"runs": ["p/wide0", "p/cmp2"], "key": "loss", "max_points": 50}
    assert server.ingest(records(steps=3, run="cmp2")).status_code == 200
    with server.client.stream("POST", "/api/v1/compare", json=ask) as r:
        assert r.status_code == 200 and "content-length" not in r.headers, r.headers
        assert r.headers.get("transfer-encoding") == "chunked"
        got = json.loads(r.read())
    assert [c["run"] for c in got["runs"]] == ["wide0", "cmp2"] and got["key"] == "loss"
    assert len(got["runs"][0]["series"]) == 8 and len(got["runs"][1]["series"]) == 1
    packed = server.client.post(
        "/api/v1/compare", json=ask, headers={"Accept": "application/msgpack"}
    )
    assert msgspec.msgpack.decode(packed.content) == got


# -- 8: table filters ---------------------------------------------------------------------


def test_number_filters_are_short_and_parse_without_backtracking() -> None:
    from rankwise.server.tables import _CMP, _RANGE, MAX_FILTER, TableQueryError, where

    with pytest.raises(TableQueryError, match="at most"):
        where("c", "int", "1" * (MAX_FILTER + 1))
    assert where("c", "float", ">=1.5e3") == ('"c" >= ?', [1500.0])
    assert where("c", "int", "1..20") == ('"c" BETWEEN ? AND ?', [1, 20])
    # 15,000 digits that do not match: quadratic before; linear now, whatever the cap.
    text = "1" * 15_000 + "x"
    started = time.monotonic()
    assert _CMP.fullmatch(text) is None and _RANGE.fullmatch(text) is None
    assert time.monotonic() - started < 1.0  # was 7 s on one core; linear is ~1 ms


# -- 9: table pages ----------------------------------------------------------------------


def _parquet(rows: int) -> bytes:
    import io

    import pyarrow as pa  # type: ignore[import-untyped]
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    buf = io.BytesIO()
    pq.write_table(pa.table({"id": list(range(rows))}), buf)
    return buf.getvalue()


def _table(seq: int, key: str, data: bytes, nrows: int) -> R.TableRec:
    import hashlib

    digest = hashlib.sha256(data).hexdigest()
    return R.TableRec(
        seq, 1000.0, 0, key, digest, len(data), nrows, 1, ["id"], ["int"]
    )  # fmt: skip


def test_a_tables_parquet_footer_is_checked_at_upload(tmp_path: Path) -> None:
    """A small file declared 10 rows that holds 100,000: 413 past --max-table-cells, 422
    under it (the pager trusts the declared count); a true one is paged."""
    for srv in _serve(tmp_path, max_table_cells=50_000):
        big, small = _parquet(100_000), _parquet(10)
        recs: list[R.AnyRecord] = [start(run="t")]
        for data in (big, small):
            rec = _table(1, "t", data, 10)
            assert srv.client.put(f"/api/v1/blobs/p/{rec.digest}", content=data).is_success
        r = srv.ingest([*recs, _table(1, "lying", big, 10)])
        assert r.status_code == 413 and "100000 rows" in r.text, r.text
        r = srv.ingest([*recs, _table(1, "lying", _parquet(10), 9)])
        assert r.status_code == 422 and "10 rows" in r.text, r.text
        assert srv.ingest([*recs, _table(1, "true", small, 10)]).status_code == 200
        q = {"key": "true", "sort": "id"}
        r = srv.client.get("/api/v1/projects/p/runs/t/tables", params=q)
        assert r.status_code == 200 and r.json()["total"] == 10, r.text
        r = srv.client.get("/api/v1/projects/p/runs/t/tables", params={**q, "offset": 10**7 + 1})
        assert r.status_code == 422, r.text
        pager = srv.app.state.table_pager
        limit = pager._db.execute("SELECT current_setting('memory_limit')").fetchone()[0]
        number, unit = limit.split()
        units = {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}
        assert float(number) * units[unit] <= 2**30  # DuckDB's default: 80 % of the RAM


# -- 10: no-auth servers refuse cross-site writes -----------------------------------------


def test_a_server_without_auth_refuses_cross_site_writes(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'db.sqlite'}")
    store.migrate()
    app = create_app(store, ServerSettings(auth=False))
    q = "?project=p&run=r&label=rank-0&incarnation=0"
    data = body(records(steps=2))
    try:
        with serve_in_thread(app) as url, httpx.Client(base_url=url) as c:
            for headers in (
                {"Content-Type": "text/plain"},  # a simple POST: no preflight
                {"Content-Type": "application/x-www-form-urlencoded"},
                {},
                {"Content-Type": "application/x-rankwise-stream", "Sec-Fetch-Site": "cross-site"},
                {"Content-Type": "application/x-rankwise-stream", "Origin": "http://evil.test"},
            ):
                r = c.post("/api/v1/ingest" + q, content=data, headers=headers)
                assert r.status_code == 403, (headers, r.text)
            assert c.get("/api/v1/projects").json()["projects"] == []
            view = {"name": "v", "filters": {}, "columns": []}
            r = c.post("/api/v1/projects/p/views", content=json.dumps(view),
                       headers={"Content-Type": "text/plain"})  # fmt: skip
            assert r.status_code == 403
            ok = {"Content-Type": "application/x-rankwise-stream"}  # what the SDK sends
            assert c.post("/api/v1/ingest" + q, content=data, headers=ok).status_code == 200
            same = {"Content-Type": "application/json", "Sec-Fetch-Site": "same-origin"}
            r = c.post("/api/v1/projects/p/views", content=json.dumps(view), headers=same)
            assert r.status_code in (200, 201), r.text
    finally:
        store.close()
