"""The run page's first charts on a big run: 64 ranks x 50 metrics in real Chromium.

Builds the run straight into a SQLite store (``bench_dashboard_bigrun.py``: the same
layout as record-by-record ingest, written in bulk), serves it with ``rankwise server``
and opens the run page in headless Chromium (Debian's ``/usr/bin/chromium`` through
Playwright). Prints, from navigation to the page's ``rankwise:first-charts``
performance mark (the first visible charts drawn):

* 1280x800, cold (the server's first read of the run) and warm;
* 1920x1080, warm;
* after clicking "Ranks" at 1280x800: all 64 per-rank lines on the visible charts;
* scrolling to the last chart: drawn once it nears the viewport.

10,000 steps per rank (the default) is about 0.7 GB of store and a minute to write;
``--steps 100000`` is the full 100k-step run (ten times that).

    .venv/bin/python benchmarks/bench_dashboard.py [--ranks 64] [--metrics 50]
        [--steps 10000] [--dir DIR] [--keep]

Needs the dashboard built (``make setup``). The store is written under ``--dir`` (a
temporary directory by default) and removed afterwards unless ``--keep``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_dashboard_bigrun import PROJECT, RUN, make_big_run

from tests.helpers.browser import CHROMIUM, STATIC, Page, drawn, first_charts_ms, launch_browser
from tests.helpers.servers import ServerProcess, browser_login


def ranks_drawn(page: Any, charts: int, ranks: int) -> float:
    """Seconds from clicking "Ranks" until the first ``charts`` charts draw every rank."""
    t0 = time.perf_counter()
    page.get_by_role("button", name="Ranks", exact=True).click()
    page.wait_for_function(
        f"""() => {{ const d = [...document.querySelectorAll('{drawn()}')];
               return d.length >= {charts} &&
                 d.slice(0, {charts}).every(c => c.dataset.lines === '{ranks}'); }}""",
        timeout=120_000,
    )
    return time.perf_counter() - t0


def last_chart_drawn(page: Any) -> float:
    """Seconds from scrolling to the last chart until it is drawn."""
    t0 = time.perf_counter()
    last = page.locator(".chart-card").last
    if last.get_attribute("data-state") is not None:
        print("  (the last chart was drawn before scrolling: the page is not that long)")
    last.scroll_into_view_if_needed()
    last.and_(page.locator('[data-state="drawn"]')).wait_for(timeout=120_000)
    return time.perf_counter() - t0


def measure(server: str, token: str, ranks: int, shots: Path) -> dict[str, float]:
    out: dict[str, float] = {}
    with launch_browser() as browser:
        for (width, height), attempt in (((1280, 800), "cold"), ((1280, 800), "warm"),
                                         ((1920, 1080), "warm")):  # fmt: skip
            p = Page(browser, width, height)
            browser_login(p.ctx, server, token)
            p.page.goto(f"{server}/#/p/{PROJECT}/r/{RUN}")
            ms = first_charts_ms(p.page, timeout_ms=300_000)
            n = p.page.locator(drawn()).count()
            out[f"{width}x{height} {attempt}, first charts ({n} drawn)"] = ms / 1000
            if (width, attempt) == (1280, "warm"):
                out[f"{ranks} per-rank lines on the {n} visible charts, after the click"] = (
                    ranks_drawn(p.page, n, ranks)
                )
                out["last chart, after scrolling to it"] = last_chart_drawn(p.page)
                p.page.screenshot(path=shots / "big-run-ranks.png")
            p.check()
            p.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--metrics", type=int, default=50)
    ap.add_argument("--steps", type=int, default=int(os.environ.get("RANKWISE_TEST_BIG_STEPS",
                                                                    "10000")))  # fmt: skip
    ap.add_argument("--dir", type=Path, default=None, help="where the store goes")
    ap.add_argument("--keep", action="store_true", help="keep the store afterwards")
    a = ap.parse_args()
    if not CHROMIUM.exists():
        sys.exit(f"no Chromium at {CHROMIUM}: apt-get install -y chromium")
    if not (STATIC / "index.html").is_file():
        sys.exit(f"the dashboard is not built into {STATIC}: run `make setup`")

    work = Path(tempfile.mkdtemp(prefix="bench-dashboard-", dir=a.dir))
    db = work / "big.db"
    try:
        info = make_big_run(db, ranks=a.ranks, metrics=a.metrics, steps=a.steps)
        print(f"big run: {a.ranks} ranks x {a.metrics} metrics x {a.steps:,} steps = "
              f"{info['points']:,} points, written in {info['seconds']:.0f} s, "
              f"{db.stat().st_size / 1e9:.1f} GB")  # fmt: skip
        with ServerProcess.db(f"sqlite:///{db}", work / "server.log") as server:
            assert server.token
            figures = measure(server.url, server.token, a.ranks, work)
        print("run page, time from navigation (performance mark rankwise:first-charts) or click:")
        for what, seconds in figures.items():
            print(f"  {what}: {seconds * 1000:.0f} ms")
    finally:
        if a.keep:
            print(f"kept {work}")
        else:
            for f in work.iterdir():
                f.unlink()
            work.rmdir()


if __name__ == "__main__":
    main()
