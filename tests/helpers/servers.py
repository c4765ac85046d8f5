"""Real servers for tests: uvicorn in a thread or ``rankwise server`` in a subprocess.

Every server binds 127.0.0.1 on a free port. ``ServerProcess`` can be SIGKILLed and
started again on the same port and database, which is how the outage tests cut the
network without mocking it. ``call`` drives an app in-process through httpx's
``ASGITransport`` for unit tests.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest
import uvicorn

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(predicate: Callable[[], Any], timeout: float = 20.0, every: float = 0.05) -> Any:
    """Poll ``predicate`` until it returns something truthy; fail the test after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"condition not met within {timeout}s: {predicate}")
        time.sleep(every)


def call(app: Any, method: str, url: str, **kwargs: Any) -> httpx.Response:
    """One request to ``app`` in-process (httpx ``ASGITransport``)."""

    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            return await client.request(method, url, **kwargs)

    return asyncio.run(go())


@contextmanager
def serve_in_thread(app: Any) -> Iterator[str]:
    """A real uvicorn serving ``app`` on a free loopback port, in this process."""
    port = free_port()
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        http="h11",
        ws="none",
        lifespan="off",
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_until(lambda: server.started or not thread.is_alive(), timeout=20)
    assert server.started, "uvicorn did not start"
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


def subprocess_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RANKWISE_")}
    env.update({k: v for k, v in os.environ.items() if k.startswith("RANKWISE_TEST_")})
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


class ServerProcess:
    """``rankwise server --db URL`` (or ``rankwise ui --dir DIR``) in a subprocess."""

    def __init__(self, args: list[str], log: Path, port: int | None = None) -> None:
        self.args = args
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None

    @classmethod
    def db(cls, url: str, log: Path, *extra: str) -> ServerProcess:
        return cls(["server", "--db", url, *extra], log)

    @classmethod
    def ui(cls, root: Path, log: Path) -> ServerProcess:
        return cls(["ui", "--dir", str(root)], log)

    def start(self, wait: bool = True) -> ServerProcess:
        cmd = [sys.executable, "-m", "rankwise.cli", *self.args, "--port", str(self.port)]
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, env=subprocess_env(), cwd=self.log.parent
            )
        if wait:
            wait_until(self.ready, timeout=30, every=0.1)
        return self

    def ready(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            pytest.fail(f"server exited with {self.proc.returncode}:\n{self.log.read_text()}")
        try:
            return httpx.get(self.url + "/api/v1/projects", timeout=1.0).status_code == 200
        except httpx.HTTPError:
            return False

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs, as when a node dies."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def postgres_dsn() -> Iterator[str]:
    """A fresh PostgreSQL database for one test; dropped afterwards.

    Reads ``RANKWISE_TEST_POSTGRES``; skips without it, but fails in CI (``CI=true``).
    """
    base = os.environ.get("RANKWISE_TEST_POSTGRES")
    if not base:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("RANKWISE_TEST_POSTGRES is not set in CI: PostgreSQL tests must run")
        pytest.skip("set RANKWISE_TEST_POSTGRES=postgresql://... to run PostgreSQL tests")
    import psycopg

    name = f"rw_server_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    parts = urlsplit(base)
    try:
        yield urlunsplit(parts._replace(path="/" + name))
    finally:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
