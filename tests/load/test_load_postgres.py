"""PostgreSQL under load: the database restarted mid-ingest, and two server processes on
one database. A few tens of simulated ranks (``tests/helpers/loadsim.py``: real frames, the
real upload protocol) against real ``rankwise server`` processes; each run ends with every
point of every rank stored exactly once and every client still training.

The restart takes down a cluster of the test's own (``private_postgres``), never the
shared server other tests use. Full-size runs: ``benchmarks/bench_load.py
--private-postgres --pg-restart-at T`` and ``--replicas 2``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.helpers import loadsim
from tests.helpers.runs import assert_exact
from tests.helpers.servers import postgres_dsn
from tests.helpers.stores import PrivatePostgres, private_postgres

__all__ = ["private_postgres"]  # the fixture, used by name below

RANKS, SECONDS = 24, 8.0


@pytest.fixture
def pg_database() -> Iterator[str]:
    yield from postgres_dsn()


def assert_trained(got: dict[str, Any]) -> None:
    """Every rank kept its training loop's pace (a tick a second) through the fault."""
    assert got["steps_min"] >= got["seconds"] - 1, got


def test_postgres_restarted_mid_ingest(private_postgres: PrivatePostgres) -> None:
    """PostgreSQL stops (every session ended, transactions in flight rolled back) and
    comes back 4 s later: meanwhile uploads get 503 with Retry-After (after waiting at
    most the pool's 3 s for a connection), then the server's pool reconnects and the
    ranks resend from their files."""
    pg = private_postgres
    state: dict[str, float] = {}

    def on_tick(t: float, _server: Any) -> None:
        if t >= 2.5 and "down" not in state:
            pg.stop("fast")
            state["down"] = t
        if t >= 6.5 and "up" not in state:
            pg.start()
            state["up"] = t

    got = loadsim.simulate(RANKS, SECONDS, pg.dsn, clients=2, on_tick=on_tick)
    assert set(state) == {"down", "up"}
    assert got["statuses"].get("503", 0) > 0, got  # told to come back, not failed silently
    assert got["statuses"].get("500", 0) == 0, got
    assert_exact(got)
    assert_trained(got)


def test_postgres_crashed_mid_ingest(private_postgres: PrivatePostgres) -> None:
    """The same with no shutdown at all (``immediate``: a crash, recovery on start):
    transactions whose commit was never acknowledged are resent, none is doubled."""
    pg = private_postgres
    state: dict[str, float] = {}

    def on_tick(t: float, _server: Any) -> None:
        if t >= 2.5 and "down" not in state:
            pg.stop("immediate")
            state["down"] = t
        if t >= 6.5 and "up" not in state:  # down longer than the pool's 3 s wait
            pg.start()
            state["up"] = t

    got = loadsim.simulate(RANKS, SECONDS, pg.dsn, clients=2, on_tick=on_tick)
    assert set(state) == {"down", "up"}
    assert got["statuses"].get("503", 0) > 0, got
    assert_exact(got)
    assert_trained(got)


def test_two_servers_on_one_postgres(pg_database: str) -> None:
    """Two server processes on one database; each rank's uploads alternate between them
    and every third goes to both at once (a retry crossing the request it repeats, as a
    load balancer may do): nothing doubled, nothing lost."""
    got = loadsim.simulate(RANKS, 6.0, pg_database, clients=2, replicas=2, duplicate=3)
    assert got["replicas"] == 2
    assert_exact(got)
    assert_trained(got)
    assert min(got["served"]) > RANKS * 6.0 / 4, got  # both took their share
