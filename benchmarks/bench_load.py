"""How many ranks one server holds: ``loadsim`` at growing rank counts, one table.

For each store and rank count, a fresh ``rankwise server`` takes ``--seconds`` of load
from simulated ranks (``tests/helpers/loadsim.py``: real frames, the real upload protocol, a metrics
record of 50 values a second per rank, plus heartbeats, console lines and system
samples), then every point of every rank is checked to be stored exactly once. Printed
per row: ack latency p50/p99 (per acknowledged POST), the replies by status, the
offered load (50 values a second per rank) and the measured throughput (values
acknowledged within the load window over its real duration: under the offered load when
the server does not keep up) with the drain (seconds from the load's end to the last
acknowledgement),
the server's CPU (100% = one core) and peak RSS, the data lag p50/p99 (from a metrics
record's creation to the ack that covered it: what the dashboard's freshness is; then
``slag50``/``slag99``, the same of the records made in the steady window, from the
20th second to the load's end, leaving out the start's flood of new streams), the
upload interval the server advised (median and largest of the replies that carried one,
``rankwise.server.pacing``; 0: none), the client processes' own CPU, and whether the
check passed. The rank count at which p99 passes 2 s is named at the end.

    python benchmarks/bench_load.py [--ranks 100,300,1000] [--seconds 30] [--tick 1]
        [--clients 4] [--pg-workers 2] [--replicas 2] [--stores sqlite,postgres]
        [--dashboard 2] [--per-node 8]

``--per-node K`` groups the ranks in nodes of K that share one uploader, as the SDK's
``node_upload`` does: each node posts all its streams' new frames in one ``POST
/api/v1/ingest/batch`` a second (or at the interval the server asks), so the server
takes a K-th of the requests for the same records. The ack latency is then per batch.

``--dashboard S`` keeps a run page open on the run while it loads: every S seconds it
reads what the page polls (the band of 4 metrics and the health strip) and the row is
followed by how long each poll took (p50/p99).

``--tick T`` spaces each rank's steps T seconds apart (each step still writes what one
second does): the offered load is ``50 / T`` values a second per rank, for rank counts
whose simulated clients this machine cannot drive at the full rate.

PostgreSQL runs when ``RANKWISE_TEST_POSTGRES`` is set, in a database of its own
(created and dropped) with ``--workers 2``, or on a throwaway cluster of its own with
``--private-postgres`` (initdb into a temporary directory; needs PostgreSQL's server
binaries). ``--replicas N`` runs N separate server processes on that database, each
rank's uploads rotating over them (every ``--duplicate K``-th to two at once).
``--kill-server-at T`` SIGKILLs the server(s) at T seconds and restarts them (a fault
run); ``--pg-restart-at T`` stops PostgreSQL at T seconds and starts it again
``--pg-down-for`` seconds later: only on the private cluster (implies
``--private-postgres``), never on a server others use. ``--cut-network-at T`` has the
ranks post through a TCP proxy (the tests' ``TcpProxy``) that is cut at T s, every
connection reset, and restored ``--cut-for`` s later; ``--disk-full-at T`` puts the
SQLite store on a small tmpfs (``--disk-mb``; mounting needs root) and fills it at T s,
freeing it ``--full-for`` s later.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.helpers.loadsim import simulate


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


@contextmanager
def private_cluster() -> Iterator[Any]:
    """A throwaway PostgreSQL cluster (the tests' ``PrivatePostgres``), removed after."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import os as _os
    import pwd

    from tests.helpers.stores import PrivatePostgres, _postgres_bindir

    bindir = _postgres_bindir()
    if bindir is None:
        raise SystemExit("--private-postgres needs PostgreSQL's server binaries (initdb)")
    cluster = PrivatePostgres(
        bindir, pwd.getpwnam("postgres").pw_name if _os.geteuid() == 0 else None
    )
    try:
        yield cluster
    finally:
        cluster.close()


def restart_postgres(cluster: Any, at: float, down_for: float) -> Any:
    """An ``on_tick`` for ``simulate``: stop the cluster ``at`` seconds into the load
    (every session ended) and start it ``down_for`` seconds later."""
    done: set[str] = set()

    def on_tick(t: float, _server: Any) -> None:
        if t >= at and "stop" not in done:
            done.add("stop")
            cluster.stop("fast")
        if t >= at + down_for and "start" not in done:
            done.add("start")
            cluster.start()

    return on_tick


def cut_network(proxy: Any, at: float, down_for: float) -> Any:
    """An ``on_tick``: cut the proxy ``at`` s into the load, restore it ``down_for`` later."""
    done: set[str] = set()

    def on_tick(t: float, _server: Any) -> None:
        if t >= at and "cut" not in done:
            done.add("cut")
            proxy.cut()
        if t >= at + down_for and "restore" not in done:
            done.add("restore")
            proxy.restore()

    return on_tick


@contextmanager
def small_disk(mb: int) -> Iterator[Path]:
    """A tmpfs of ``mb`` MiB, mounted for the run and removed after (needs root)."""
    import subprocess

    if os.geteuid() != 0:
        raise SystemExit("--disk-full-at mounts a small tmpfs: run as root")
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp) / "disk"
        where.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={mb}m", "tmpfs", str(where)],
                       check=True)  # fmt: skip
        try:
            yield where
        finally:
            subprocess.run(["umount", "-l", str(where)], check=False)


def fill_disk(where: Path, at: float, full_for: float) -> Any:
    """An ``on_tick``: fill ``where`` to the last byte ``at`` s in, free it ``full_for`` later."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.helpers.stores import fill_up

    filler = where / "filler"
    done: set[str] = set()

    def on_tick(t: float, _server: Any) -> None:
        if t >= at and "full" not in done:
            done.add("full")
            fill_up(filler)
        if t >= at + full_for and "freed" not in done:
            done.add("freed")
            filler.unlink()

    return on_tick


def row(store: str, got: dict[str, object]) -> str:
    statuses = " ".join(f"{k}:{v}" for k, v in sorted(got["statuses"].items()))  # type: ignore[attr-defined]
    return (
        f"{store:9s} {got['ranks']:5d} {got['ack_p50_s']:8.3f} {got['ack_p99_s']:8.3f} "
        f"{got['points_offered_per_s']:9,d} {got['throughput_per_s']:6,d} {got['drain_s']:7.1f}"
        f" {got['server_cpu_pct']:6.1f} {got['server_rss_max_mb']:7.1f}"
        f" {got['lag_p50_s']:6.2f} {got['lag_p99_s']:6.2f}"
        f" {got['lag_p50_steady_s']:6.2f} {got['lag_p99_steady_s']:6.2f}"
        f" {got['advised_p50_s']:5.1f} {got['advised_max_s']:5.1f} {got['clients_cpu_pct']:6.1f}"
        f"  {'yes' if got['verified'] else 'NO'}   {statuses}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", default="100,300,1000")
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument(
        "--tick", type=float, default=1.0, help="seconds between a rank's steps (1: 50 values/s)"
    )
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument(
        "--per-node",
        type=int,
        default=0,
        help="ranks per node sharing one uploader (POST /ingest/batch; 0: each rank posts)",
    )
    ap.add_argument("--stores", default="sqlite,postgres")
    ap.add_argument("--pg-workers", type=int, default=2)
    ap.add_argument("--max-inflight", type=int, default=None)
    ap.add_argument("--max-upload-interval", type=float, default=None, help="0: no pacing")
    ap.add_argument("--kill-server-at", type=float, default=None)
    ap.add_argument("--replicas", type=int, default=1, help="PostgreSQL: server processes")
    ap.add_argument("--duplicate", type=int, default=0)
    ap.add_argument("--private-postgres", action="store_true")
    ap.add_argument("--pg-restart-at", type=float, default=None)
    ap.add_argument("--pg-down-for", type=float, default=3.0)
    ap.add_argument("--cut-network-at", type=float, default=None)
    ap.add_argument("--cut-for", type=float, default=3.0)
    ap.add_argument("--disk-full-at", type=float, default=None, help="SQLite only; needs root")
    ap.add_argument("--full-for", type=float, default=3.0)
    ap.add_argument("--disk-mb", type=int, default=256)
    ap.add_argument("--json", default=None, help="also write every row here (JSON lines)")
    ap.add_argument(
        "--dashboard", type=float, default=None, help="poll the run page every S seconds"
    )
    args = ap.parse_args()
    counts = [int(n) for n in args.ranks.split(",")]
    dsn = os.environ.get("RANKWISE_TEST_POSTGRES")
    private = args.private_postgres or args.pg_restart_at is not None
    with private_cluster() if private and "postgres" in args.stores else _nothing() as cluster:
        if cluster is not None:
            dsn = cluster.dsn.rsplit("/", 1)[0] + "/postgres"
        _rows(args, counts, dsn, cluster)


def _rows(args: argparse.Namespace, counts: list[int], dsn: str | None, cluster: Any) -> None:
    print(f"{args.seconds:g} s of load per row; ack latency per acknowledged POST")
    print(
        "store     ranks  p50 (s)  p99 (s) offered/s thru/s drain s  cpu %  rss MB"
        "  lag50  lag99 slag50 slag99 pace50 pacemx clicpu  exact  replies"
    )
    broke: dict[str, int | None] = {}
    for store in args.stores.split(","):
        if store == "postgres" and not dsn:
            print("postgres  skipped: set RANKWISE_TEST_POSTGRES=postgresql://... to measure it")
            continue
        for n in counts:
            extra = []
            if args.max_inflight is not None:
                extra += ["--max-inflight", str(args.max_inflight)]
            if args.max_upload_interval is not None:
                extra += ["--max-upload-interval", str(args.max_upload_interval)]
            full = args.disk_full_at is not None and store == "sqlite"
            with (
                tempfile.TemporaryDirectory() as tmp,
                pg_database(dsn) if store == "postgres" and dsn else _nothing() as pg,
                small_disk(args.disk_mb) if full else _nothing() as disk,
                _proxy(args.cut_network_at) as (proxy, port),
            ):
                replicas, ticks = 1, []
                if store == "postgres":
                    db, extra = pg, [*extra, "--workers", str(args.pg_workers)]
                    replicas = args.replicas
                    if args.pg_restart_at is not None:
                        ticks.append(
                            restart_postgres(cluster, args.pg_restart_at, args.pg_down_for)
                        )
                else:
                    db = f"sqlite:///{disk or tmp}/load.db"
                if disk is not None:
                    ticks.append(fill_disk(disk, args.disk_full_at, args.full_for))
                if proxy is not None:
                    ticks.append(cut_network(proxy, args.cut_network_at, args.cut_for))
                got = simulate(
                    n,
                    args.seconds,
                    db,
                    clients=args.clients,
                    server_args=tuple(extra),
                    kill_server_at=args.kill_server_at,
                    replicas=replicas,
                    duplicate=args.duplicate,
                    tick=args.tick,
                    on_tick=_all(ticks),
                    port=port,
                    via=proxy.url if proxy is not None else None,
                    dashboard=args.dashboard,
                    per_node=args.per_node,
                )
            print(row(store if replicas == 1 else f"{store}x{replicas}", got), flush=True)
            if got.get("page_reads"):
                print(f"  run page polled {got['page_reads']} times: {got['page_p50_s']:.3f} s "
                      f"at p50, {got['page_p99_s']:.3f} s at p99", flush=True)  # fmt: skip
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


@contextmanager
def _proxy(cut_at: float | None) -> Iterator[tuple[Any, int | None]]:
    """A cuttable proxy in front of the server's port when ``cut_at`` is set."""
    if cut_at is None:
        yield None, None
        return
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.helpers.proxy import TcpProxy
    from tests.helpers.servers import free_port

    port = free_port()
    proxy = TcpProxy(port)
    try:
        yield proxy, port
    finally:
        proxy.close()


def _all(ticks: list[Any]) -> Any:
    if not ticks:
        return None

    def on_tick(t: float, server: Any) -> None:
        for tick in ticks:
            tick(t, server)

    return on_tick


if __name__ == "__main__":
    main()
