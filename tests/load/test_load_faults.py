"""Faults under load: a few tens of simulated ranks (``tests/helpers/loadsim.py``: real
frames, the real upload protocol) against a real ``rankwise server``; each fault ends
with every point of every rank stored exactly once and every client still running.

The full-size runs are ``benchmarks/bench_load.py --kill-server-at T``. PostgreSQL
restarted or crashed under load, and two servers on one database, are in
``tests/load/test_load_postgres.py``.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import loadsim
from tests.helpers.env import free_port, skip_or_fail
from tests.helpers.proxy import TcpProxy
from tests.helpers.runs import assert_exact
from tests.helpers.stores import fill_up

RANKS, SECONDS = 24, 8.0


def test_server_sigkilled_and_restarted_under_load(tmp_path: Path) -> None:
    got = loadsim.simulate(
        RANKS, SECONDS, f"sqlite:///{tmp_path / 'load.db'}", clients=2,
        kill_server_at=3.0, down_for=1.5,
    )  # fmt: skip
    assert_exact(got)
    failed = sum(v for k, v in got["statuses"].items() if not k.isdigit())
    assert failed > 0, got  # the ranks did see the server go away


def test_network_cut_mid_upload(tmp_path: Path) -> None:
    """The ranks post through a proxy that is cut (every connection reset, uploads in
    flight included) and restored twice."""
    port = free_port()
    proxy = TcpProxy(port)
    events = {3.0: proxy.cut, 4.5: proxy.restore, 5.5: proxy.cut, 6.5: proxy.restore}

    def on_tick(t: float, _server: Any) -> None:
        for at in sorted(events):
            if t >= at:
                events.pop(at)()

    try:
        got = loadsim.simulate(
            RANKS, SECONDS, f"sqlite:///{tmp_path / 'load.db'}", clients=2, port=port,
            via=proxy.url, on_tick=on_tick,
        )  # fmt: skip
    finally:
        proxy.close()
    assert proxy.cuts >= 2
    assert_exact(got)
    failed = sum(v for k, v in got["statuses"].items() if not k.isdigit())
    assert failed > 0, got


@pytest.fixture
def small_disk(tmp_path: Path):
    if os.geteuid() != 0:
        skip_or_fail("mounting a small tmpfs needs root (CI runs as root)")
    where = tmp_path / "disk"
    where.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(where)], check=True)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def test_disk_full_for_the_store(small_disk: Path) -> None:
    """The store's filesystem fills up under load: uploads get a clear 503 (nothing
    applied, Retry-After), the database stays whole, and ingest resumes once space
    returns."""
    filler = small_disk / "filler"
    state: dict[str, bool] = {}

    def on_tick(t: float, _server: Any) -> None:
        if t >= 2.5 and "full" not in state:
            state["full"] = True
            fill_up(filler)
        if t >= 5.5 and "freed" not in state:
            state["freed"] = True
            filler.unlink()

    db = small_disk / "load.db"
    got = loadsim.simulate(RANKS, SECONDS, f"sqlite:///{db}", clients=2, on_tick=on_tick)
    assert state == {"full": True, "freed": True}
    assert got["statuses"].get("503", 0) > 0, got  # told, not failed silently
    assert_exact(got)
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
