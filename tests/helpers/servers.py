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
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest
import uvicorn

from .env import REPO as REPO  # re-exported: many tests import it from here
from .env import clean_env, free_port, in_ci
from .wait import wait_until as wait_until  # re-exported: tests import it from here too


def srv_get(url: str, path: str, **params: str) -> dict:
    """GET ``path`` of the server at ``url`` as its admin (``RANKWISE_TOKEN``): the JSON."""
    headers = {"Authorization": f"Bearer {os.environ['RANKWISE_TOKEN']}"}  # the server's admin
    with httpx.Client(base_url=url, headers=headers) as client:
        r = client.get(path, params=params)
    assert r.status_code == 200, r.text
    return r.json()


def admin_token(app: Any) -> str:
    """An admin token of ``app``'s store, created once per app."""
    token = getattr(app.state, "test_admin_token", None)
    if token is None:
        token = app.state.store.create_token("admin", None, "tests").value
        app.state.test_admin_token = token
    return str(token)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def call(
    app: Any, method: str, url: str, *, as_admin: bool = True, **kwargs: Any
) -> httpx.Response:
    """One request to ``app`` in-process (httpx ``ASGITransport``), as an admin unless
    ``as_admin=False`` or the request brings its own ``Authorization``."""
    headers = dict(kwargs.pop("headers", None) or {})
    if as_admin and not any(k.lower() == "authorization" for k in headers):
        headers.update(bearer(admin_token(app)))
    kwargs["headers"] = headers

    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            return await client.request(method, url, **kwargs)

    return asyncio.run(go())


@dataclass
class AppServer:
    """What the ``app_server`` fixture serves: the URL, the app, its store, its blob
    directory and an admin token."""

    url: str
    app: Any
    store: Any
    root: Path  # the blob directory
    token: str


@contextmanager
def serve_in_thread(app: Any, *, token_env: bool = True, **config: Any) -> Iterator[str]:
    """A real uvicorn serving ``app`` on a free loopback port, in this process.

    With auth on, an admin token of its store is in ``RANKWISE_TOKEN`` meanwhile (clients
    in this process and children made with ``subprocess_env`` use it), unless
    ``token_env=False``.
    """
    before = os.environ.get("RANKWISE_TOKEN")
    if token_env and app.state.settings.auth:
        os.environ["RANKWISE_TOKEN"] = admin_token(app)
    port = free_port()
    uv_config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        **{
            "log_level": "warning",
            "http": "h11",
            "ws": "none",
            "lifespan": "off",
            **config,
        },
    )
    server = uvicorn.Server(uv_config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_until(lambda: server.started or not thread.is_alive(), timeout=20)
    assert server.started, "uvicorn did not start"
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
        if before is None:
            os.environ.pop("RANKWISE_TOKEN", None)
        else:
            os.environ["RANKWISE_TOKEN"] = before


def subprocess_env(**extra: str) -> dict[str, str]:
    """``clean_env()`` keeping the ``RANKWISE_TEST_*`` knobs and this test server's token."""
    env = clean_env()
    env.update({k: v for k, v in os.environ.items() if k.startswith("RANKWISE_TEST_")})
    if os.environ.get("RANKWISE_TOKEN"):  # set by the server helpers for their server
        env["RANKWISE_TOKEN"] = os.environ["RANKWISE_TOKEN"]
    env.update(extra)
    return env


class ServerProcess:
    """``rankwise server --db URL`` (or ``rankwise ui --dir DIR``) in a subprocess.

    A ``server`` runs with authentication, as it does for users: ``token`` is an admin
    token made in its store before the first start, ``headers`` carry it, and ``env()``
    is a child environment pointing an SDK at this server with it.
    """

    def __init__(
        self, args: list[str], log: Path, port: int | None = None, token: str | None = None
    ) -> None:
        self.args = args
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None
        self.token = token
        self.extra_env: dict[str, str] = {}  # more of the server process's environment

    @classmethod
    def db(cls, url: str, log: Path, *extra: str, port: int | None = None) -> ServerProcess:
        token = None
        if "--insecure-no-auth" not in extra:
            from rankwise.store import open_store

            with open_store(url) as store:
                store.migrate()
                token = store.create_token("admin", None, "tests").value
        return cls(["server", "--db", url, *extra], log, port=port, token=token)

    @property
    def headers(self) -> dict[str, str]:
        return bearer(self.token) if self.token else {}

    def env(self, **extra: str) -> dict[str, str]:
        more = {"RANKWISE_SERVER": self.url, **extra}
        if self.token:
            more.setdefault("RANKWISE_TOKEN", self.token)
        return subprocess_env(**more)

    def get(self, path: str, **kwargs: Any) -> httpx.Response:
        return httpx.get(self.url + path, headers=self.headers, **kwargs)

    @classmethod
    def ui(cls, root: Path, log: Path) -> ServerProcess:
        return cls(["ui", "--dir", str(root)], log)

    def start(self, wait: bool = True) -> ServerProcess:
        if self.token:  # for Api(server=...) here and subprocess_env() children; this
            # server's token, never one a server started earlier left behind
            os.environ["RANKWISE_TOKEN"] = self.token
        cmd = [sys.executable, "-m", "rankwise.cli", *self.args, "--port", str(self.port)]
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                cmd,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=subprocess_env(**self.extra_env),
                cwd=self.log.parent,
            )
        if wait:
            try:  # a loaded machine starts --workers N slowly: a bound, not a pace
                wait_until(self.ready, timeout=90, every=0.1)
            except BaseException:
                self.stop()  # never left serving for the rest of the session
                raise
        return self

    def ready(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            pytest.fail(f"server exited with {self.proc.returncode}:\n{self.log.read_text()}")
        try:
            return self.get("/api/v1/projects", timeout=1.0).status_code == 200
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
        if in_ci():
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


def browser_login(context: Any, url: str, token: str) -> None:
    """Log a Playwright browser context in to the dashboard (its session cookie)."""
    r = context.request.post(
        url + "/api/v1/session",
        data={"token": token},
        headers={"X-Rankwise-CSRF": "1", "Sec-Fetch-Site": "same-origin"},
    )
    assert r.status == 200, r.text()
