"""What the dashboard lays out where, in Chromium, on stream files made record by record.

One 12-rank run whose ranks 9-11 stall at nearly the same step, whose ranks 3-8 log NaN
at steps 20-22 and whose rank 1 fails with a long traceback, plus 40 small runs for a
long runs table. ``rankwise ui`` serves them; the checks are on what the page draws:

* stall labels at nearly the same step merge ("3 stalls") instead of overprinting, and
  the Ranks view's NaN labels collapse ("6 NaN") instead of forming a band;
* no chart's readout is cut for its metric's name, and the last x tick label fits;
* the Streams tab's long traceback scrolls inside its box, within the table's card;
* the Columns menu stays inside the window; the sidebar's panel reaches the bottom of a
  long table in a full-page capture.

The stream files are written with the SDK's own record types and frame encoder
(``tests/helpers/streams.py``): the layout needs exact steps and times that a real job
would give only by chance.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rankwise.stream import records as R
from rankwise.stream.files import stream_filename
from tests.helpers.browser import Page, need_browser
from tests.helpers.servers import ServerProcess
from tests.helpers.streams import body, start
from tests.helpers.wait import wait_until

pytestmark = pytest.mark.browser

RANKS = 12
STEPS = 31  # steps 0..30,000: the last x tick ("30,000") sits on the right edge
LONG = "train/a_rather_long_metric_name_for_one_chart_header"
STALLED = (9, 10, 11)
NAN = {3: 20, 4: 20, 5: 21, 6: 21, 7: 22, 8: 22}  # rank -> the step it logged NaN at
TRACEBACK = (
    "Traceback (most recent call last):\n"
    + "".join(
        f'  File "/very/long/path/to/some/deeply/nested/package/module_{i}.py", line {i}, in '
        f"function_with_a_long_name_{i}\n    result = call_something(argument_{i}, "
        + ", ".join(f"keyword_{j}=value_{j}" for j in range(12))
        + ")\n"
        for i in range(40)
    )
    + "ValueError: boom"
)


def _write(root: Path, project: str, run: str, label: str, recs: list[R.AnyRecord]) -> None:
    d = root / project / run / "streams"
    d.mkdir(parents=True, exist_ok=True)
    (d / stream_filename(label, 0)).write_bytes(body(recs))


def _rank(r: int) -> list[R.AnyRecord]:
    label = f"rank-{r}"
    recs: list[R.AnyRecord] = [
        start("layout", "labels", label, world_size=RANKS, run_mode="shared", pid=0)
    ]
    for step in range(STEPS):
        loss = float("nan") if NAN.get(r) == step else 1.0 / (step + 1) + 0.01 * r
        # 1,000-step strides: tick labels like "29,000" at the right edge
        recs.append(R.Metrics(len(recs), 1000.0 + step, step * 1000, {"loss": loss, LONG: 0.5}))
        if r in STALLED and step == 15 + (r == 11):
            # no log() for 5 s from just after this step, then logging resumed
            began = 1000.0 + step + 0.2
            recs.append(R.Stall(len(recs), began + 5.0, idle_seconds=5.0, where="all_reduce"))
            recs.append(R.Stall(len(recs), began + 5.5, idle_seconds=5.5, cleared=True))
    if r == 1:
        recs.append(
            R.Finish(len(recs), 1000.0 + STEPS, "failed", exit_code=1, error_type="ValueError",
                     error_message="boom", traceback=TRACEBACK, last_step=(STEPS - 1) * 1000)
        )  # fmt: skip
    else:
        recs.append(R.Finish(len(recs), 1000.0 + STEPS, "finished", last_step=(STEPS - 1) * 1000))
    return recs


@pytest.fixture(scope="module")
def ui(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    need_browser()
    root = tmp_path_factory.mktemp("layout") / "data"
    for r in range(RANKS):
        _write(root, "layout", "labels", f"rank-{r}", _rank(r))
    for i in range(40):
        recs: list[R.AnyRecord] = [start("long", f"run-{i:02d}", "rank-0", world_size=1, pid=0)]
        recs.append(R.Metrics(1, 1000.0, 0, {"loss": 1.0, "accuracy_on_a_long_named_set": 0.5}))
        recs.append(R.Finish(2, 1001.0, "finished", last_step=0))
        _write(root, "long", f"run-{i:02d}", "rank-0", recs)
    with ServerProcess.ui(root, root.parent / "server.log") as server:
        yield server.url


def _canvas(page: Any, metric: str) -> Any:
    el = page.locator(f'.chart-card[data-metric="{metric}"] .chart-canvas')
    el.wait_for()
    wait_until(lambda: el.get_attribute("data-xticks") not in (None, "[]"))
    return el


def test_close_stall_and_nan_labels_merge(browser: Any, ui: str) -> None:
    p = Page(browser, width=1280, height=900)
    page = p.page
    page.goto(f"{ui}/#/p/layout/r/labels")
    loss = _canvas(page, "loss")
    wait_until(lambda: loss.get_attribute("data-stall-labels") is not None)
    assert json.loads(loss.get_attribute("data-stall-labels")) == ["3 stalls"]
    page.get_by_role("button", name="Ranks").click()
    wait_until(lambda: "NaN" in (loss.get_attribute("data-nonfinite-labels") or ""))
    assert json.loads(loss.get_attribute("data-nonfinite-labels")) == ["6 NaN"]
    p.check()
    p.close()


def test_chart_headers_and_ticks_fit(browser: Any, ui: str) -> None:
    p = Page(browser, width=1280, height=900)
    page = p.page
    page.goto(f"{ui}/#/p/layout/r/labels")
    for metric in ("loss", LONG):
        canvas = _canvas(page, metric)
        assert int(canvas.get_attribute("data-xclip")) <= 0, canvas.get_attribute("data-xticks")
        readout = page.locator(f'.chart-card[data-metric="{metric}"] .readout')
        wait_until(lambda r=readout: "at step" in r.inner_text())  # type: ignore[misc]
        # the whole readout shows: nothing cut to "at ste…"
        assert readout.evaluate("e => e.scrollWidth <= e.clientWidth"), readout.inner_text()
    p.check()
    p.close()


def test_a_long_traceback_scrolls_inside_its_card(browser: Any, ui: str) -> None:
    p = Page(browser, width=1280, height=900)
    page = p.page
    page.goto(f"{ui}/#/p/layout/r/labels?tab=streams")
    page.locator("button.ending").first.click()
    pre = page.locator("pre.traceback")
    pre.wait_for()
    card = page.locator(".streams-tab .table-wrap")
    box, frame = pre.bounding_box(), card.bounding_box()
    assert box is not None and frame is not None
    assert box["x"] + box["width"] <= frame["x"] + frame["width"], (box, frame)
    assert pre.evaluate("e => e.scrollWidth > e.clientWidth")  # it scrolls, in itself
    # neither the table's card nor the page scrolls sideways for it
    assert card.evaluate("e => e.scrollWidth <= e.clientWidth")
    assert page.evaluate("document.scrollingElement.scrollWidth <= innerWidth")
    p.check()
    p.close()


def test_columns_menu_stays_in_the_window(browser: Any, ui: str) -> None:
    # At this width the filters fit on one line: Columns is the last, near the right edge.
    width = 1440
    p = Page(browser, width=width, height=800)
    page = p.page
    page.goto(f"{ui}/#/p/long")
    page.locator('tr[data-run="run-39"]').wait_for()
    page.locator("details[data-columns] > summary").click()
    menu = page.locator("details[data-columns] .menu")
    menu.wait_for()
    box = menu.bounding_box()
    assert box is not None
    assert box["x"] >= 0 and box["x"] + box["width"] <= width, box
    p.check()
    p.close()


def test_the_sidebar_panel_reaches_the_bottom_of_a_long_table(browser: Any, ui: str) -> None:
    from PIL import Image

    p = Page(browser, width=1280, height=600)
    page = p.page
    page.goto(f"{ui}/#/p/long")
    page.locator('tr[data-run="run-00"]').wait_for()
    shot = Image.open(io.BytesIO(page.screenshot(full_page=True))).convert("RGB")
    assert shot.height > 1200  # the table is longer than the window
    panel = shot.getpixel((100, 100))  # the sidebar, near the top
    assert shot.getpixel((100, shot.height - 20)) == panel  # and at the very bottom
    assert shot.getpixel((600, shot.height - 20)) != panel  # the page's background beside it
    p.check()
    p.close()
