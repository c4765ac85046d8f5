"""The run page of a 1,024-rank run in real Chromium: first charts and the heatmap.

Builds 1,024 ranks x 50 metrics x 10,000 steps (512 million points, 128 nodes of 8)
straight into a SQLite store with ``bench_dashboard_bigrun.make_big_run`` (the layout of
record-by-record ingest, written in bulk; about 11 GB and a quarter of an hour on two
cores), serves it with ``rankwise server`` and opens the run page in headless Chromium
(Debian's ``/usr/bin/chromium`` through Playwright) at 1280x800. Prints, in ms:

* first charts: navigation to the page's ``rankwise:first-charts`` mark, cold (the
  server's first read of the run) and warm;
* heatmap: the "Heatmap" button's click to the ``rankwise:heatmap`` mark (the canvas
  drawn: request, server read of 1,024 ranks x 10,000 steps, decode, draw), of which
  the request itself (its resource timing, sent to reply read), and
  navigation to that mark when the page is opened with ``?heat=train/loss``;
* the ``GET .../heatmap`` reply alone (httpx, the same buckets the page asks for).

    .venv/bin/python benchmarks/bench_dashboard_1024.py [--ranks 1024] [--metrics 50]
        [--steps 10000] [--keep DIR] [--rounds 3]

``--keep DIR`` keeps the store in ``DIR`` and reuses it on the next run (it is rebuilt
when the sizes differ). Without it the store goes to a temporary directory, removed
afterwards. Needs the dashboard built (``make setup``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_dashboard_bigrun import PROJECT, RUN, make_big_run

from tests.helpers.browser import CHROMIUM, STATIC, Page, first_charts_ms, launch_browser
from tests.helpers.servers import ServerProcess, browser_login

HEAT = "rankwise:heatmap"


def _mark(page: Any, name: str, timeout_ms: int = 300_000) -> float:
    page.wait_for_function(f"performance.getEntriesByName('{name}').length > 0", timeout=timeout_ms)
    return float(page.evaluate(f"performance.getEntriesByName('{name}')[0].startTime"))


def heatmap_after_click(page: Any) -> tuple[float, float]:
    """ms from the Heatmap button's click to the canvas drawn, and of them the heatmap
    request's (its resource timing: request sent to reply read)."""
    t0 = float(page.evaluate("performance.now()"))
    page.locator("[data-heatmap-toggle]").click()
    drawn = _mark(page, HEAT) - t0
    reply = float(
        page.evaluate(
            """() => { const r = performance.getEntriesByType('resource')
                         .filter(e => e.name.includes('/heatmap?')).pop();
                       return r ? r.responseEnd - r.startTime : NaN; }"""
        )
    )
    return drawn, reply


def measure(
    server: str, token: str | None, rounds: int, project: str = PROJECT, run: str = RUN
) -> dict[str, list[float]]:
    """The figures of ``rounds`` page loads (``token`` None: ``rankwise ui``, no login)."""
    out: dict[str, list[float]] = {}

    def add(what: str, ms: float) -> None:
        out.setdefault(what, []).append(ms)

    base = f"{server}/#/p/{project}/r/{run}"
    with launch_browser() as browser:
        for i in range(rounds):
            p = Page(browser, 1280, 800)
            if token:
                browser_login(p.ctx, server, token)
            p.page.goto(base)
            what = "first charts, cold" if i == 0 else "first charts, warm"
            add(what, first_charts_ms(p.page, 300_000))
            drawn, reply = heatmap_after_click(p.page)
            add("heatmap, click to drawn", drawn)
            add("  of which the heatmap request (sent to read)", reply)
            p.check()
            p.close()
            p = Page(browser, 1280, 800)
            if token:
                browser_login(p.ctx, server, token)
            p.page.goto(f"{base}?heat=train/loss")
            add("first charts, page opened with the heatmap", first_charts_ms(p.page, 300_000))
            add("heatmap, navigation to drawn", _mark(p.page, HEAT))
            p.check()
            p.close()
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with httpx.Client(base_url=server, headers=headers) as c:
        for _ in range(rounds):
            t0 = time.perf_counter()
            r = c.get(f"/api/v1/projects/{project}/runs/{run}/heatmap",
                      params={"key": "train/loss", "buckets": 600}, timeout=300)  # fmt: skip
            r.raise_for_status()
            ms = (time.perf_counter() - t0) * 1000
            add(f"GET .../heatmap alone ({len(r.content) / 1e6:.1f} MB)", ms)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=1024)
    ap.add_argument("--metrics", type=int, default=50)
    ap.add_argument("--steps", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--keep", type=Path, default=None, help="keep (and reuse) the store here")
    a = ap.parse_args()
    if not CHROMIUM.exists():
        sys.exit(f"no Chromium at {CHROMIUM}: apt-get install -y chromium")
    if not (STATIC / "index.html").is_file():
        sys.exit(f"the dashboard is not built into {STATIC}: run `make setup`")
    work = a.keep or Path(tempfile.mkdtemp(prefix="bench-1024-"))
    work.mkdir(parents=True, exist_ok=True)
    db, made = work / "big.db", work / "made.json"
    sizes = {"ranks": a.ranks, "metrics": a.metrics, "steps": a.steps}
    try:
        if not (made.exists() and json.loads(made.read_text()) == sizes and db.exists()):
            for f in (db, made):
                f.unlink(missing_ok=True)
            info = make_big_run(db, **sizes)
            made.write_text(json.dumps(sizes))
            print(f"written in {info['seconds']:.0f} s")
        points = a.ranks * a.metrics * a.steps
        gb = db.stat().st_size / 1e9
        print(f"run: {a.ranks} ranks x {a.metrics} metrics x {a.steps:,} steps = "
              f"{points:,} points, {gb:.1f} GB of store")  # fmt: skip
        log = work / "server.log"
        with ServerProcess.db(f"sqlite:///{db}", log) as server:
            assert server.token
            figures = measure(server.url, server.token, a.rounds)
        print(f"Chromium 1280x800, ms ({a.rounds} rounds; median [all]):")
        for what, ms in figures.items():
            runs = ", ".join(f"{m:.0f}" for m in ms)
            print(f"  {what}: {statistics.median(ms):.0f} [{runs}]")
    finally:
        if a.keep is None:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"kept {work}")


if __name__ == "__main__":
    main()
