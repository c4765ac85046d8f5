"""Shared fixtures, skips and markers. Every test writes under tmp_path only.

The tests live in rooms that mirror the package (``unit/``, ``store/``, ``server/``,
``sdk/``, ``e2e/``, ``integrations/``, ``browser/``, ``load/``); their helpers in
``helpers/``, the programs they start in ``scripts/``. A test in ``load/`` is marked
``load`` and one that takes a ``browser`` is marked ``browser`` here, so ``make
test-fast`` (``-m "not torchrun and not browser and not load and not slow"``) leaves them
out without each module saying so.

Optional dependencies follow one rule (``tests.helpers.env.in_ci``): a test that needs
one skips without it locally and fails under CI, where ``.ci/run`` installs all of
them. Tests marked ``torchrun`` or ``torch`` need torch; the ``browser`` fixture needs
Chromium; ``pg_dsn`` needs ``RANKWISE_TEST_POSTGRES``.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rankwise.store.sql import SQLStore
from tests.helpers.browser import launch_browser
from tests.helpers.env import in_ci
from tests.helpers.servers import AppServer
from tests.helpers.stores import open_sql_store

TESTS = Path(__file__).parent


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:
        return False


def pytest_runtest_setup(item: pytest.Item) -> None:
    needs_torch = item.get_closest_marker("torchrun") or item.get_closest_marker("torch")
    if needs_torch and not _installed("torch"):
        if in_ci():
            pytest.fail("CI is set but torch is not installed: torch tests must run")
        pytest.skip("needs torch (make setup installs the CPU build)")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The markers a test's room or fixtures imply: ``load`` for ``tests/load/``,
    ``browser`` for a test that takes the ``browser`` fixture."""
    load = TESTS / "load"
    for item in items:
        if load in item.path.parents:
            item.add_marker(pytest.mark.load)
        if "browser" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.browser)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Chromium, shared by a module's tests (skips without it, fails in CI). Not
    by the session's: while Playwright's sync API is open, ``asyncio.run`` (``call``,
    httpx's ASGI transport) refuses to run in that process."""
    with launch_browser() as b:
        yield b


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh RANKWISE_DIR; the current run of this process is finished afterwards."""
    d = tmp_path / "data"
    monkeypatch.setenv("RANKWISE_DIR", str(d))
    for name in list(os.environ):
        if (
            name.startswith("RANKWISE_")
            and name != "RANKWISE_DIR"
            and not name.startswith("RANKWISE_TEST_")
        ):
            monkeypatch.delenv(name)
    yield d
    import rankwise

    rankwise.finish()


@pytest.fixture(autouse=True)
def _no_token_from_outside() -> Iterator[None]:
    """A developer's RANKWISE_TOKEN never reaches a test; none leaks out of one."""
    saved = os.environ.pop("RANKWISE_TOKEN", None)
    yield
    os.environ.pop("RANKWISE_TOKEN", None)
    if saved is not None:
        os.environ["RANKWISE_TOKEN"] = saved


@pytest.fixture
def fast() -> dict[str, float]:
    """Settings that make writer activity visible quickly in tests."""
    return {"flush_interval": 0.02, "heartbeat_interval": 0.2, "finish_timeout": 10.0}


@pytest.fixture
def pg_dsn() -> Iterator[str]:
    """A PostgreSQL DSN whose ``search_path`` is a fresh schema, dropped afterwards.

    The server comes from ``RANKWISE_TEST_POSTGRES``; without it the test skips, except
    under ``CI=true``, where PostgreSQL tests must run and the test fails instead.
    """
    base = os.environ.get("RANKWISE_TEST_POSTGRES")
    if not base:
        if in_ci():
            pytest.fail("CI=true but RANKWISE_TEST_POSTGRES is unset: PostgreSQL tests must run")
        pytest.skip("set RANKWISE_TEST_POSTGRES=postgresql://... to run PostgreSQL tests")
    import uuid

    import psycopg

    schema = f"rw_test_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        if "://" in base:  # keep a URL a URL, so open_store() takes it too
            sep = "&" if "?" in base else "?"
            yield f"{base}{sep}options=-csearch_path%3D{schema}"
        else:
            yield psycopg.conninfo.make_conninfo(base, options=f"-csearch_path={schema}")
    finally:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


@pytest.fixture(params=["sqlite", "postgres"])
def kind(request: pytest.FixtureRequest) -> str:
    """Which SQL store a test runs on: every store test runs on both."""
    return str(request.param)


@pytest.fixture
def raw_store(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[SQLStore]:
    """A store of ``kind`` on an empty database, not migrated (``helpers.stores``)."""
    st = open_sql_store(kind, tmp_path, request)
    yield st
    st.close()


@pytest.fixture
def sql_store(raw_store: SQLStore) -> SQLStore:
    """A migrated store of ``kind``: SQLite under ``tmp_path``, or PostgreSQL in the
    ``pg_dsn`` fixture's own schema."""
    raw_store.migrate()
    return raw_store


@pytest.fixture
def store(sql_store: SQLStore) -> SQLStore:
    """The store suites' name for ``sql_store`` (a module may define its own)."""
    return sql_store


@pytest.fixture
def app_server(tmp_path: Path) -> Iterator[AppServer]:
    """A real uvicorn over a migrated SQLite store (``server.db``) and a local blob
    directory (``server-blobs``) under ``tmp_path``, authentication on, its admin token in
    ``RANKWISE_TOKEN`` while it serves."""
    from rankwise.server import ServerSettings, create_app
    from rankwise.store import open_store
    from rankwise.store.blobs import LocalBlobStore
    from tests.helpers.servers import admin_token, serve_in_thread

    store = open_store(f"sqlite:///{tmp_path / 'server.db'}")
    store.migrate()
    root = tmp_path / "server-blobs"
    settings = ServerSettings(static_dir=tmp_path / "none", blobs=LocalBlobStore(root))
    app = create_app(store, settings)
    try:
        with serve_in_thread(app) as url:
            yield AppServer(url, app, store, root, admin_token(app))
    finally:
        store.close()
