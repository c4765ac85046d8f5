"""The one artifact client (``rankwise.artifacts.remote.RemoteArtifacts``) waits as the
stream uploader does: a 503/429's ``Retry-After`` is the floor of its backoff, and a
reply's pacing header spaces its next request.

A small real HTTP server (stdlib, on a loopback port) plays a busy rankwise server: it
answers what the test scripts, so the waits are measured on the wire.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from rankwise._http import UPLOAD_INTERVAL_HEADER
from rankwise.artifacts.remote import RemoteArtifacts
from rankwise.errors import ServerError

Reply = tuple[int, dict[str, str]]


class Busy:
    """Answers each GET with the next scripted (status, headers); records arrival times."""

    def __init__(self, script: list[Reply]) -> None:
        self.script = list(script)
        self.times: list[float] = []
        busy = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                busy.times.append(time.monotonic())
                status, headers = busy.script.pop(0) if busy.script else (200, {})
                body = json.dumps(
                    {"versions": []} if status == 200 else {"error": {"message": "busy"}}
                ).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def gaps(self) -> list[float]:
        return [b - a for a, b in zip(self.times, self.times[1:], strict=False)]


@pytest.fixture
def busy(request: pytest.FixtureRequest) -> Iterator[Busy]:
    server = Busy(request.param)
    thread = threading.Thread(target=server.httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.httpd.shutdown()
        server.httpd.server_close()
        thread.join(5)


@pytest.mark.parametrize("busy", [[(503, {"Retry-After": "1"}), (200, {})]], indirect=True)
def test_retry_after_is_the_floor_of_the_wait(busy: Busy) -> None:
    with RemoteArtifacts(busy.url, "p", backoff=0.01) as client:
        assert client.versions("net") == []
    assert len(busy.times) == 2
    # backoff alone would wait ~0.01 s; the server asked for 1 s (and at most 1.5 s of it)
    assert 1.0 <= busy.gaps()[0] < 10.0


@pytest.mark.parametrize("busy", [[(429, {"Retry-After": "0"})] * 3], indirect=True)
def test_a_server_busy_past_the_retries_is_a_server_error(busy: Busy) -> None:
    client = RemoteArtifacts(busy.url, "p", backoff=0.01, retries=3)
    with client, pytest.raises(ServerError, match=r"after 3 attempts.*429"):
        client.versions("net")
    assert len(busy.times) == 3


@pytest.mark.parametrize(
    "busy", [[(200, {UPLOAD_INTERVAL_HEADER: "0.6"}), (200, {})]], indirect=True
)
def test_the_pacing_header_spaces_the_next_request(busy: Busy) -> None:
    with RemoteArtifacts(busy.url, "p") as client:
        client.versions("net")
        client.versions("net")
    assert len(busy.times) == 2
    assert busy.gaps()[0] >= 0.6
