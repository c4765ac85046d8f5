"""The run page of a 1,024-rank run in Chromium (issue 26): the health grid (a row per
node, odd ranks first, hover and click), the rank x step heatmap (a canvas whose drifting
rank and hot node stand out, hover and click) and the rank picker (search by rank, range
and node, outliers, the cap on lines drawn).

The run (``tests.helpers.ranks1024``) goes straight into a SQLite store served by a real
``rankwise server``. With ``RANKWISE_UPDATE_DOCS=1`` the screenshots also go to
``docs/img/`` (``ranks-1024-health.png``, ``ranks-1024-heatmap.png``,
``ranks-1024-picker.png``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.browser import Page, drawn, need_browser
from tests.helpers.env import REPO
from tests.helpers.ranks1024 import (
    CRASHED,
    DRIFT,
    FAILED,
    HOT_NODE,
    KILLED,
    PROJECT,
    RUN,
    make_1024_run,
)
from tests.helpers.servers import ServerProcess, browser_login

pytestmark = pytest.mark.browser
DOCS = REPO / "docs" / "img"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    need_browser()
    tmp = tmp_path_factory.mktemp("ranks1024")
    make_1024_run(tmp / "store.db")
    with ServerProcess.db(f"sqlite:///{tmp / 'store.db'}", tmp / "server.log") as srv:
        yield srv


def _page(browser: Any, server: ServerProcess, path: str, width: int = 1400) -> Page:
    p = Page(browser, width, 900)
    assert server.token
    browser_login(p.ctx, server.url, server.token)
    p.page.goto(f"{server.url}/#/p/{PROJECT}/r/{RUN}{path}")
    return p


def _shot(page: Any, tmp: Path, name: str, target: Any = None) -> None:
    (target or page).screenshot(path=tmp / name)
    if os.environ.get("RANKWISE_UPDATE_DOCS") == "1":
        (target or page).screenshot(path=DOCS / name)


def test_health_grid_rows_by_node_odd_ranks_first(
    browser: Any, server: ServerProcess, tmp_path: Path
) -> None:
    p = _page(browser, server, "")
    page = p.page
    grid = page.locator("[data-health-grid]")
    grid.wait_for()
    nodes = grid.locator(".rh-node")
    assert nodes.count() == 128
    # Every rank once in the grid, eight local ranks a node.
    assert grid.locator(".rh-grid [data-label]").count() == 1024
    # The three nodes with odd ranks first, worst first (crashed, failed, killed), then
    # the healthy ones by node.
    first_nodes = [nodes.nth(i).get_attribute("data-node") for i in range(4)]
    assert first_nodes == [str(CRASHED // 8), str(FAILED // 8), str(KILLED[0] // 8), "0"]
    odd = page.locator("[data-health-odd] [data-odd-label]")
    assert [odd.nth(i).get_attribute("data-odd-label") for i in range(odd.count())] == [
        f"rank-{CRASHED}", f"rank-{FAILED}", f"rank-{KILLED[0]}", f"rank-{KILLED[1]}"
    ]  # fmt: skip
    cell = grid.locator(f'[data-label="rank-{FAILED}"]')
    assert cell.get_attribute("data-state") == "failed"
    cell.hover()
    card = page.locator(".rh-card")
    assert f"rank-{FAILED} · rank {FAILED} · node {FAILED // 8}" in card.inner_text()
    _shot(page, tmp_path, "ranks-1024-health.png", page.locator("[data-health-strip]"))
    cell.click()  # focuses the rank: its lines in Charts, picked in the picker
    page.wait_for_url(f"**label=rank-{FAILED}**")
    page.locator(f'[data-rank-picker] [data-chosen="rank-{FAILED}"]').wait_for()
    page.locator(drawn()).first.wait_for()
    p.check()
    p.close()


def _pixel(page: Any, x_frac: float, rank: int) -> list[int]:
    """The canvas's colour at ``x_frac`` of its width, on ``rank``'s row."""
    return list(
        page.locator("[data-heatmap-canvas]").evaluate(
            """(c, [fx, rank]) => {
                 const y = Math.floor((rank + 0.5) / 1024 * c.height);
                 const x = Math.floor(fx * c.width);
                 return Array.from(c.getContext('2d').getImageData(x, y, 1, 1).data).slice(0, 3);
               }""",
            [x_frac, rank],
        )
    )


def test_heatmap_shows_the_drifting_rank_and_the_hot_node(
    browser: Any, server: ServerProcess, tmp_path: Path
) -> None:
    p = _page(browser, server, "")
    page = p.page
    page.locator(drawn()).first.wait_for()
    page.locator("[data-heatmap-toggle]").click()
    page.locator('[data-heatmap] [data-drawn="train/loss:deviation"]').wait_for()
    assert page.locator("[data-heatmap-metric]").input_value() == "train/loss"
    assert "1,024 ranks ×" in page.locator("[data-heatmap-size]").inner_text()
    # Deviation mode: the drifting rank's row is red late in the run, the crowd pale.
    r, g, b = _pixel(page, 0.95, DRIFT)
    assert r > 150 and g < 80 and b < 80, (r, g, b)
    pale = [min(_pixel(page, f, 500)) for f in (0.2, 0.4, 0.6, 0.8, 0.95)]
    assert sorted(pale)[2] > 150, pale
    page.locator("[data-heatmap-metric]").select_option("system/gpu_temp")
    page.locator('[data-heatmap] [data-drawn="system/gpu_temp:deviation"]').wait_for()
    hot = _pixel(page, 0.5, HOT_NODE * 8 + 3)
    assert hot[0] > 150 and hot[1] < 80, hot
    _shot(page, tmp_path, "ranks-1024-heatmap.png", page.locator("[data-heatmap]"))
    # Hover says which rank and steps; a click draws the rank's lines.
    canvas = page.locator("[data-heatmap-canvas]")
    box = canvas.bounding_box()
    assert box
    y = box["y"] + (HOT_NODE * 8 + 3.5) / 1024 * box["height"]
    page.mouse.move(box["x"] + box["width"] * 0.5, y)
    tip = page.locator("[data-heatmap-tip]")
    assert f"node {HOT_NODE}" in tip.inner_text() and "step" in tip.inner_text()
    # The hovered cell's steps are its bucket's whole steps, as the reply lays them out.
    asked = page.evaluate("""() => performance.getEntriesByType('resource')
        .filter(e => e.name.includes('/heatmap?')).pop().name""")
    got = server.get(asked.split(server.url, 1)[1]).json()
    w = (got["hi"] - got["lo"]) // got["buckets"]
    assert w * got["buckets"] == got["hi"] - got["lo"]
    j = got["buckets"] // 3
    page.mouse.move(box["x"] + box["width"] * (j + 0.5) / got["buckets"], y)
    first = int(got["lo"] + j * w)
    page.wait_for_function(  # the tip follows the mouse on its next event
        "t => document.querySelector('[data-heatmap-tip]').innerText.includes(t)",
        arg=f"step {first:,}–{first + w - 1:,}",
    )
    page.mouse.click(box["x"] + box["width"] * 0.5, y)
    page.locator("[data-rank-picker] [data-chosen]").first.wait_for()
    chosen = page.locator("[data-rank-picker] [data-chosen]").first.get_attribute("data-chosen")
    assert chosen and int(chosen.split("-")[1]) // 8 == HOT_NODE
    p.check()
    p.close()


def test_picker_searches_ranks_nodes_outliers_and_caps_lines(
    browser: Any, server: ServerProcess, tmp_path: Path
) -> None:
    p = _page(browser, server, "")
    page = p.page
    page.locator(drawn()).first.wait_for()
    page.get_by_role("button", name="Ranks", exact=True).click()
    picker = page.locator("[data-rank-picker]")
    picker.wait_for()
    assert "1024 ranks: choose" in picker.locator("[data-rank-note]").inner_text()
    search = picker.locator("[data-rank-search]")
    search.fill("node 5")
    search.press("Enter")
    chips = picker.locator("[data-chosen]")
    assert [chips.nth(i).get_attribute("data-chosen") for i in range(chips.count())] == [
        f"rank-{r}" for r in range(40, 48)
    ]
    page.locator(drawn(8)).first.wait_for()  # the charts draw the eight chosen lines
    search.fill("17, 100-102")
    picker.locator("[data-rank-add]").click()
    assert chips.count() == 12
    search.fill("0-63")
    search.press("Enter")
    assert "32 more chosen are not drawn" in picker.locator("[data-rank-cap]").inner_text()
    assert chips.count() == 32
    page.locator(drawn(32)).first.wait_for()
    # The toolbar, the picker and the charts below them, for the docs.
    page.locator(".charts-tab .toolbar").evaluate("e => { e.scrollIntoView(); scrollBy(0, -56); }")
    _shot(page, tmp_path, "ranks-1024-picker.png")
    picker.locator("[data-rank-outliers-n]").fill("3")
    picker.locator("[data-rank-outliers]").click()
    page.wait_for_function(
        "() => document.querySelectorAll('[data-rank-picker] [data-chosen]').length === 3"
    )
    first = chips.first.get_attribute("data-chosen")
    assert first == f"rank-{DRIFT}"  # the drifting loss is the furthest from the median
    assert "furthest from the median of train/loss" in picker.inner_text()
    page.locator(drawn(3)).first.wait_for()
    p.check()
    p.close()
