"""Shared fixtures. Every test writes under tmp_path only."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PYTHON = sys.executable


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
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
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
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
