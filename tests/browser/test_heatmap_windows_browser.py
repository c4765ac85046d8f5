"""The heatmap of a run of more ranks than one reply holds (1,024), in Chromium: the run
page shows it a window of 1,024 ranks at a time, and the second window's ranks are drawn.

A 1,100-rank run with few steps (``tests.helpers.ranks1024``, its drifting loss moved to
rank 1,050, in the second window) goes straight into a SQLite store served by a real
``rankwise server``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.helpers.browser import Page, drawn, need_browser
from tests.helpers.ranks1024 import PROJECT, RUN, make_1024_run
from tests.helpers.servers import ServerProcess, browser_login

pytestmark = pytest.mark.browser
RANKS, DRIFT = 1100, 1050


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    need_browser()
    tmp = tmp_path_factory.mktemp("ranks1100")
    make_1024_run(tmp / "store.db", steps=40, ranks=RANKS, drift=DRIFT)
    with ServerProcess.db(f"sqlite:///{tmp / 'store.db'}", tmp / "server.log") as srv:
        yield srv


def _pixel(page: Any, x_frac: float, row: int, rows: int) -> list[int]:
    """The canvas's colour at ``x_frac`` of its width, on the window's ``row`` of ``rows``."""
    return list(
        page.locator("[data-heatmap-canvas]").evaluate(
            """(c, [fx, row, rows]) => {
                 const y = Math.floor((row + 0.5) / rows * c.height);
                 const x = Math.floor(fx * c.width);
                 return Array.from(c.getContext('2d').getImageData(x, y, 1, 1).data).slice(0, 3);
               }""",
            [x_frac, row, rows],
        )
    )


def _red(rgb: list[int]) -> bool:
    return rgb[0] > 150 and rgb[1] < 80 and rgb[2] < 80


def test_heatmap_pages_through_rank_windows(browser: Any, server: ServerProcess) -> None:
    p = Page(browser, 1400, 900)
    assert server.token
    browser_login(p.ctx, server.url, server.token)
    page = p.page
    page.goto(f"{server.url}/#/p/{PROJECT}/r/{RUN}")
    page.locator(drawn()).first.wait_for()
    page.locator("[data-heatmap-toggle]").click()
    heat = page.locator("[data-heatmap]")
    heat.locator('[data-drawn="train/loss:deviation"][data-drawn-rows="0-1023"]').wait_for()
    label = heat.locator("[data-heatmap-window-label]")
    assert label.inner_text() == "ranks 0–1,023 shown of 1,100"
    assert "1,024 ranks ×" in heat.locator("[data-heatmap-size]").inner_text()
    assert heat.locator("[data-heatmap-prev]").is_disabled()
    windows = heat.locator("[data-heatmap-window] option")
    assert [windows.nth(i).inner_text() for i in range(windows.count())] == [
        "0–1,023",
        "1,024–1,099",
    ]
    # No rank of the first window drifts: its last bucket has no red row.
    col = heat.locator("[data-heatmap-canvas]").evaluate(
        """c => { const x = Math.floor(0.95 * c.width);
                  const d = c.getContext('2d').getImageData(x, 0, 1, c.height).data;
                  let red = 0;
                  for (let i = 0; i < d.length; i += 4)
                    red += d[i] > 150 && d[i + 1] < 80 && d[i + 2] < 80;
                  return red; }"""
    )
    assert col == 0

    heat.locator("[data-heatmap-next]").click()
    heat.locator('[data-drawn-rows="1024-1099"]').wait_for()
    assert label.inner_text() == "ranks 1,024–1,099 shown of 1,100"
    assert "76 ranks ×" in heat.locator("[data-heatmap-size]").inner_text()
    assert heat.locator("[data-heatmap-next]").is_disabled()
    assert heat.locator("[data-heatmap-window]").input_value() == "1"
    assert heat.locator(".heatmap-y").inner_text().split() == ["rank", "1024", "rank", "1099"]
    # The drifting rank of the second window is red late in the run, its neighbours not.
    rows = RANKS - 1024
    assert _red(_pixel(page, 0.95, DRIFT - 1024, rows))
    assert not _red(_pixel(page, 0.95, DRIFT - 1024 - 10, rows))
    assert not _red(_pixel(page, 0.95, DRIFT - 1024 + 10, rows))
    # Hover names the second window's rank; a click draws its lines.
    canvas = heat.locator("[data-heatmap-canvas]")
    canvas.scroll_into_view_if_needed()
    box = canvas.bounding_box()
    assert box
    y = box["y"] + (DRIFT - 1024 + 0.5) / rows * box["height"]
    page.mouse.move(box["x"] + box["width"] * 0.9, y)
    tip = page.locator("[data-heatmap-tip]").inner_text()
    hovered = int(tip.split(" · ")[0].removeprefix("rank-"))
    assert abs(hovered - DRIFT) <= 1, tip  # a rank row is 1.3 CSS pixels high
    assert f"rank-{hovered} · rank {hovered} · node {hovered // 8}" in tip
    page.mouse.click(box["x"] + box["width"] * 0.9, y)
    page.locator(f'[data-rank-picker] [data-chosen="rank-{hovered}"]').wait_for()

    # Back to the first window, through the window list.
    heat.locator("[data-heatmap-window]").select_option("0")
    heat.locator('[data-drawn-rows="0-1023"]').wait_for()
    assert label.inner_text() == "ranks 0–1,023 shown of 1,100"
    assert not heat.locator("[data-heatmap-prev]").is_enabled()
    p.check()
    p.close()
