"""The runs table and run filters over a project of 10,000 runs.

Creates ``--runs`` runs (one stream each: start with a config, ``--steps`` logged steps,
a summary, finish) in a fresh store (SQLite in a temporary folder, or ``--db URL``) and
times, server side (the HTTP API in-process over ASGI, so JSON encoding included):

* the runs table's first page, ``GET /api/v1/projects/p/runs?limit=50`` (what the
  dashboard asks for on navigation);
  the first request after the ingest builds the run index (``run_index``) of every
  run, later ones only refresh what changed;
* searches with filters (``POST /api/v1/projects/p/runs/search``), index warm: the median
  of ``--repeat``.

    python benchmarks/bench_runs_filter.py [--runs 10000] [--db postgresql://...]

``--filled``: the store at ``--db`` already holds the runs (a copy of one this script
filled and nothing read yet, e.g. ``CREATE DATABASE b TEMPLATE filled``): no ingest, so
runs on a busy machine compare the reads alone.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from rankwise.server.app import create_app
from rankwise.server.config import ServerSettings
from rankwise.store import open_store
from rankwise.stream import records as R
from rankwise.stream.identity import StreamId

FILTERS: list[dict[str, Any]] = [
    {"state": "finished"},
    {"config.lr": {"$gt": 0.005}},
    {"$and": [{"config.opt": "adam"}, {"summary.loss": {"$lt": 0.5}}]},
    {"tags": {"$in": ["t3", "t7"]}},
    {"$or": [{"group": "g1"}, {"display_name": {"$regex": "^run-1"}}]},
    {"summary_cross_rank.loss.mean": {"$lt": 0.3}, "state": {"$ne": "crashed"}},
]


def fill(store: Any, runs: int, steps: int) -> None:
    batch: list[tuple[StreamId, list[R.AnyRecord]]] = []
    t0 = 1.7e9
    for i in range(runs):
        rid = f"r{i:05d}"
        key = StreamId("p", rid, "rank-0", 0)
        cfg = {"lr": 10 ** -(1 + i % 4), "opt": ("adam", "sgd")[i % 2], "layers": i % 8}
        recs: list[R.AnyRecord] = [
            R.StreamStart(
                0,
                t0 + i,
                "p",
                rid,
                "rank-0",
                0,
                name=f"run-{i}",
                group=f"g{i % 10}",
                tags=[f"t{i % 10}"],
                config=cfg,
                host="bench",
                pid=0,
            )
        ]
        for s in range(steps):
            loss = 1.0 / (1 + s + i % 13)
            recs.append(R.Metrics(len(recs), t0 + i + s * 1e-3, s, {"loss": loss}))
        recs.append(R.Finish(len(recs), t0 + i + 1, "finished", last_step=steps - 1))
        batch.append((key, recs))
        if len(batch) == 500:
            store.ingest(batch)
            batch = []
    if batch:
        store.ingest(batch)


def timed(app: Any, method: str, url: str, **kw: Any) -> tuple[float, Any]:
    async def go() -> tuple[float, Any]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as c:
            t = time.perf_counter()
            r = await c.request(method, url, **kw)
            took = time.perf_counter() - t
            assert r.status_code == 200, r.text
            return took, r.json()

    return asyncio.run(go())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10_000)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--db", default=None, help="a database URL (default: SQLite in a temp dir)")
    ap.add_argument("--filled", action="store_true", help="--db holds the runs: no ingest")
    ap.add_argument(
        "--browser",
        action="store_true",
        help="also open the runs table in Chromium through `rankwise server`: time from "
        "navigation to its first page of rows (cold, then warm)",
    )
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = args.db or f"sqlite:///{Path(tmp) / 'bench.db'}"
        store = open_store(url)
        store.migrate()
        t = time.perf_counter()
        if not args.filled:
            fill(store, args.runs, args.steps)
            took = time.perf_counter() - t
            print(f"{args.runs} runs ingested in {took:.1f} s ({url.split(':')[0]})")
        app = create_app(store, ServerSettings(auth=False, static_dir=Path(tmp) / "none"))
        page = "/api/v1/projects/p/runs"
        took, got = timed(app, "GET", page, params={"limit": 50})
        print(f"runs table, first page, first request after ingest (builds the run index "
              f"of every run): {took * 1e3:.0f} ms ({got['total']} runs)")  # fmt: skip
        for limit in (50, 500):  # 500: what the dashboard's runs table asks for
            times = [
                timed(app, "GET", page, params={"limit": limit})[0] for _ in range(args.repeat)
            ]
            print(f"runs table, first page (GET .../runs?limit={limit}), index warm: median "
                  f"{statistics.median(times) * 1e3:.0f} ms")  # fmt: skip
        search = "/api/v1/projects/p/runs/search"
        for flt in FILTERS:
            times = []
            for _ in range(args.repeat):
                took, got = timed(app, "POST", search, json={"filters": flt, "limit": 50})
                times.append(took)
            print(f"filter {flt}: median {statistics.median(times) * 1e3:.0f} ms, "
                  f"{got['total']} runs")  # fmt: skip
        times = []
        for _ in range(args.repeat):
            took, got = timed(app, "POST", search, json={"filters": {}, "limit": 50,
                                                         "order": "-summary.loss"})  # fmt: skip
            times.append(took)
        print(f"no filter, order by -summary.loss: median {statistics.median(times) * 1e3:.0f} ms")
        store.close()
        if args.browser:
            in_browser(url, Path(tmp), args.repeat)


def in_browser(url: str, tmp: Path, repeat: int) -> None:
    """The runs table of project ``p`` in headless Chromium, served by ``rankwise
    server``: ms from navigation until its first page of rows is in the table (the
    first visit is the server process's first read of the project; then ``repeat``
    visits in fresh pages, their median)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.helpers.browser import CHROMIUM, STATIC, Page, launch_browser
    from tests.helpers.servers import ServerProcess, browser_login

    if not CHROMIUM.exists() or not (STATIC / "index.html").is_file():
        sys.exit("--browser needs Chromium at /usr/bin/chromium and the dashboard built")
    rows = "document.querySelectorAll('table.runs tbody tr[data-run]').length >= 50"
    with ServerProcess.db(url, tmp / "server.log") as server, launch_browser() as browser:
        assert server.token
        times = []
        for _ in range(1 + repeat):
            p = Page(browser, 1280, 800)
            browser_login(p.ctx, server.url, server.token)
            p.page.goto(f"{server.url}/#/p/p")
            p.page.wait_for_function(rows, timeout=120_000)
            times.append(p.page.evaluate("performance.now()"))
            p.check()
            p.close()
    print(f"runs table in Chromium, navigation to 50 rows drawn: first visit {times[0]:.0f} ms, "
          f"then median {statistics.median(times[1:]):.0f} ms of {repeat}")  # fmt: skip


if __name__ == "__main__":
    main()
