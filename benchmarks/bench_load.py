"""How many ranks one server holds: ``loadsim`` at growing rank counts, one table.

For each store and rank count, a fresh ``rankwise server`` takes ``--seconds`` of load
from simulated ranks (``loadsim.py``: real frames, the real upload protocol, a metrics
record of 50 values a second per rank, plus heartbeats, console lines and system
samples), then every point of every rank is checked to be stored exactly once. Printed
per row: ack latency p50/p99 (per acknowledged POST), the replies by status, points/s,
the server's CPU (100% = one core) and peak RSS, and whether the check passed. The
rank count at which p99 passes 2 s is named at the end.

    python benchmarks/bench_load.py [--ranks 100,300,1000] [--seconds 30]
        [--clients 4] [--pg-workers 2] [--stores sqlite,postgres]

PostgreSQL runs when ``RANKWISE_TEST_POSTGRES`` is set, in a database of its own
(created and dropped) with ``--workers 2``. ``--kill-server-at T`` SIGKILLs the server at
T seconds and restarts it (a fault run); ``--pg-restart-at T`` restarts PostgreSQL
itself (``pg_ctlcluster``; never in the test suite, it would disturb other tests).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit, urlunsplit

from loadsim import simulate


@contextmanager
def pg_database(base: str) -> Iterator[str]:
    import psycopg

    name = f"rw_load_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield urlunsplit(urlsplit(base)._replace(path="/" + name))
    finally:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def restart_postgres_later(at: float) -> threading.Thread:
    def go() -> None:
        time.sleep(at)
        clusters = subprocess.run(["pg_lsclusters", "-h"], capture_output=True, text=True)
        version, name = clusters.stdout.split()[:2]
        subprocess.run(["pg_ctlcluster", version, name, "restart"], check=False)

    t = threading.Thread(target=go, daemon=True)
    t.start()
    return t


def row(store: str, got: dict[str, object]) -> str:
    statuses = " ".join(f"{k}:{v}" for k, v in sorted(got["statuses"].items()))  # type: ignore[attr-defined]
    return (
        f"{store:9s} {got['ranks']:5d} {got['ack_p50_s']:8.3f} {got['ack_p99_s']:8.3f} "
        f"{got['points_per_s']:9,d} {got['server_cpu_pct']:6.1f} {got['server_rss_max_mb']:7.1f}"
        f"  {'yes' if got['verified'] else 'NO'}   {statuses}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", default="100,300,1000")
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--stores", default="sqlite,postgres")
    ap.add_argument("--pg-workers", type=int, default=2)
    ap.add_argument("--max-inflight", type=int, default=None)
    ap.add_argument("--kill-server-at", type=float, default=None)
    ap.add_argument("--pg-restart-at", type=float, default=None)
    ap.add_argument("--json", default=None, help="also write every row here (JSON lines)")
    args = ap.parse_args()
    counts = [int(n) for n in args.ranks.split(",")]
    dsn = os.environ.get("RANKWISE_TEST_POSTGRES")
    print(f"{args.seconds:g} s of load per row; ack latency per acknowledged POST")
    print("store     ranks  p50 (s)  p99 (s)  points/s  cpu %  rss MB  exact  replies")
    broke: dict[str, int | None] = {}
    for store in args.stores.split(","):
        if store == "postgres" and not dsn:
            print("postgres  skipped: set RANKWISE_TEST_POSTGRES=postgresql://... to measure it")
            continue
        for n in counts:
            extra = []
            if args.max_inflight is not None:
                extra += ["--max-inflight", str(args.max_inflight)]
            with (
                tempfile.TemporaryDirectory() as tmp,
                pg_database(dsn) if store == "postgres" and dsn else _nothing() as pg,
            ):
                if store == "postgres":
                    db, extra = pg, [*extra, "--workers", str(args.pg_workers)]
                    if args.pg_restart_at is not None:
                        restart_postgres_later(args.pg_restart_at)
                else:
                    db = f"sqlite:///{tmp}/load.db"
                got = simulate(
                    n,
                    args.seconds,
                    db,
                    clients=args.clients,
                    server_args=tuple(extra),
                    kill_server_at=args.kill_server_at,
                )
            print(row(store, got), flush=True)
            if args.json:
                with open(args.json, "a") as f:
                    f.write(json.dumps({"store": store, **got}) + "\n")
            if got["ack_p99_s"] > 2.0 and broke.get(store) is None:  # type: ignore[operator]
                broke[store] = n
    for store, n in broke.items():
        print(f"{store}: ack p99 passes 2 s at {n} ranks")


@contextmanager
def _nothing() -> Iterator[None]:
    yield None


if __name__ == "__main__":
    main()
