"""A shared run whose loss turned NaN on every rank, told right in the Mean view.

A real torchrun job (3 CPU ranks, gloo) logs a loss that is +Inf on rank 1 at step 4 and
NaN on every rank from step 7. ``rankwise ui`` serves it; headless Chromium checks that
the chart of the cross-rank mean marks steps 7–9 as NaN, that hovering step 4 says one
rank was ∞, and that the header and Config & summary say NaN. Both readers
(``Api(dir=)`` from the files, the store from its aggregates) and ``rankwise show`` agree.
"""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

import rankwise
from tests.helpers.browser import Page, launch_browser, need_browser
from tests.helpers.env import need
from tests.helpers.jobs import job_env, torchrun
from tests.helpers.servers import ServerProcess
from tests.helpers.wait import wait_until

need("torch")

STEPS = 10

JOB = """
import argparse, math
import torch.distributed as dist
import rankwise

p = argparse.ArgumentParser()
p.add_argument("--dir", required=True)
a = p.parse_args()
dist.init_process_group("gloo")
rank = dist.get_rank()
run = rankwise.init(project="nan", id="job", dir=a.dir, run_mode="shared")
for step in range(STEPS):
    loss = 2.0 / (1 + step) + 0.1 * rank
    if step == 4 and rank == 1:
        loss = math.inf
    if step >= 7:
        loss = math.nan  # the loss diverged on every rank
    run.log({"loss": loss, "lr": 0.1}, step=step)
    dist.barrier()
run.finish()
dist.destroy_process_group()
""".replace("STEPS", str(STEPS))


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Equal, NaN equal to NaN."""
    if a.keys() != b.keys():
        return False
    for k in a:
        x, y = a[k], b[k]
        if isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y):
            continue
        if x != y:
            return False
    return True


def _check_page(url: str) -> None:
    need_browser()
    with launch_browser() as browser:
        p = Page(browser, width=1280, height=760)
        page = p.page
        page.goto(f"{url}/#/p/nan/r/job")
        page.locator('.chart-card[data-metric="loss"][data-state="drawn"]').wait_for()
        card = page.locator('.chart-card[data-metric="loss"]')
        canvas = card.locator(".chart-canvas")
        # The Mean view (no rank lines): steps 7..9 had no finite value on any rank.
        assert card.get_attribute("data-lines") == "0"
        assert canvas.get_attribute("data-marks") == "7:NaN 8:NaN 9:NaN"
        # ... and the marks are on the canvas: the dashed tick's colour at step 8's x.
        over = card.locator(".u-over").bounding_box()
        assert over is not None
        lo, hi = float(card.get_attribute("data-xmin")), float(card.get_attribute("data-xmax"))

        def x_of(step: float) -> float:
            return over["x"] + (step - lo) / (hi - lo) * over["width"]

        lit = page.evaluate(
            """([el, x, y0, h]) => {
                 const c = el.querySelector('canvas'), r = devicePixelRatio;
                 const box = c.getBoundingClientRect(), ctx = c.getContext('2d');
                 let red = 0;
                 for (let dx = -2; dx <= 2; dx++) for (let y = y0; y < y0 + h; y += 2) {
                   const d = ctx.getImageData(Math.round((x + dx - box.left) * r),
                                              Math.round((y - box.top) * r), 1, 1).data;
                   if (d[3] > 0 && d[0] > 120 && d[1] < 100) red++;
                 }
                 return red; }""",
            [canvas.element_handle(), x_of(8), over["y"] + 20, over["height"] - 40],
        )  # fmt: skip
        assert lit > 0, "no NaN mark drawn at step 8"
        readout = card.locator(".readout")
        text = readout.inner_text()
        assert "NaN at step 9" in text and "NaN on 3" in text, text

        # Hover at step 4: the mean of the two finite ranks, and rank 1's ∞ said.
        def hover(step: float) -> bool:
            # The chart is scrolled into view and its box read again at each try: the
            # divergence banner above it moves it down, below the first screen.
            card.scroll_into_view_if_needed()
            box = card.locator(".u-over").bounding_box()
            assert box is not None
            page.mouse.move(
                box["x"] + (step - lo) / (hi - lo) * box["width"], box["y"] + box["height"] / 2
            )
            return f"step {step:g}" in readout.inner_text()

        wait_until(lambda: hover(4), timeout=10, every=0.3)
        hovered = readout.inner_text()
        assert "(2 ranks)" in hovered and "∞ on 1" in hovered, hovered
        wait_until(lambda: hover(8), timeout=10, every=0.3)
        assert "NaN on 3" in readout.inner_text(), readout.inner_text()
        # Per-rank view: each rank's own marks (rank 1's ∞ at step 4), the all-NaN steps once.
        page.get_by_role("button", name="Ranks", exact=True).click()
        wait_until(lambda: card.get_attribute("data-lines") == "3", timeout=30)
        wait_until(lambda: "4:∞" in (canvas.get_attribute("data-marks") or ""), timeout=10)
        assert canvas.get_attribute("data-marks") == "7:NaN 8:NaN 9:NaN 4:∞"
        page.get_by_role("tab", name="Config & summary").click()
        cross = page.locator('[data-cross="loss"]')
        assert cross.inner_text().startswith("NaN"), cross.inner_text()
        p.check()
        p.close()


@pytest.mark.torchrun
@pytest.mark.browser
def test_shared_run_turned_nan_is_marked_in_the_mean_view(tmp_path: Path) -> None:
    data = tmp_path / "data"
    script = tmp_path / "nan_job.py"
    script.write_text(JOB)
    job = subprocess.run(
        [*torchrun(), "--standalone", "--nproc-per-node=3", str(script), "--dir", str(data)],
        env=job_env(), cwd=tmp_path, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert job.returncode == 0, job.stdout + job.stderr
    local = rankwise.Api(dir=data).run("job", project="nan")
    last = local.summary_cross_rank["loss"]
    assert (last["step"], last["n"], last["nan"]) == (STEPS - 1, 0, 3)
    assert math.isnan(last["mean"]) and math.isnan(last["wmean"])
    with ServerProcess.ui(data, tmp_path / "ui.log") as ui:
        base = f"{ui.url}/api/v1/projects/nan/runs/job"
        import httpx

        band = wait_until(
            lambda: (lambda b: b if b and len(b["x"]) == STEPS else None)(
                httpx.get(f"{base}/series", params={"key": "loss", "streams": "none"}).json()[
                    "band"
                ]
            ),
            timeout=60,
        )
        assert band["n"] == [3, 3, 3, 3, 2, 3, 3, 0, 0, 0]
        assert band["nan"] == [0] * 7 + [3] * 3
        assert band["posinf"] == [0, 0, 0, 0, 1, 0, 0, 0, 0, 0]
        remote = rankwise.Api(server=ui.url).run("job", project="nan")
        for key in ("loss", "lr"):
            assert _same(
                msgspec.structs.asdict(remote.summary_cross_rank[key]),
                msgspec.structs.asdict(local.summary_cross_rank[key]),
            ), key
        _check_page(ui.url)
    shown = subprocess.run(
        [sys.executable, "-m", "rankwise.cli", "show", "job", "--dir", str(data),
         "--project", "nan"],
        env=job_env(), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    line = [
        ln for ln in shown.stdout.splitlines() if ln.strip().startswith("loss") and "step" in ln
    ]
    assert line and "NaN at step 9, 0 values" in line[0] and "NaN on 3" in line[0], shown.stdout
