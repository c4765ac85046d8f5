"""Runs of one process each, as the dashboard names them (Chromium, a real ``rankwise ui``).

* ``run_mode="new"`` under torchrun (2 CPU ranks): one run per rank, in one group. Each
  says which rank it is next to its name in the runs table, on the group page's legend
  and in its own header's mode.
* W&B's default, rank 0 alone calling ``init`` under torchrun: the mode says so ("rank-0
  only, of 2 ranks") instead of a bare "shared".
* A run passed to an ``mp.Process`` (W&B's guide): the children are rank 0's processes,
  so the run is "1 × 1", and no two health cells read alike ("0", "0c1", "0c2"); its
  metric logged once at step 0 gets an x axis around step 0, not 0..100.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.browser import Page, need_browser
from tests.helpers.jobs import job_env, run_job, torchrun
from tests.helpers.servers import ServerProcess
from tests.helpers.wait import wait_until

pytestmark = [pytest.mark.browser, pytest.mark.torchrun]

SCRIPTS = Path(__file__).parents[1] / "scripts"
PER_RANK = """
import rankwise
run = rankwise.init(project="pp", run_mode="new", id="per")
for step in range(3):
    run.log({"loss": 1.0 / (step + 1) + run.rank}, step=step)
run.finish()
"""
RANK0_ONLY = """
import os
import rankwise.wandb as wandb
if os.environ["RANK"] == "0":
    run = wandb.init(project="pp", id="zero-only")
    run.log({"loss": 1.0})
    run.finish()
"""


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    need_browser()
    tmp = tmp_path_factory.mktemp("per-process")
    root = tmp / "rankwise-runs"  # run_job's jobs write under their cwd's ./rankwise-runs
    for name, code in (("per_rank.py", PER_RANK), ("rank0_only.py", RANK0_ONLY)):
        (tmp / name).write_text(code)
        run_job([*torchrun(), "--standalone", "--nproc-per-node=2", str(tmp / name)], tmp)
    out = subprocess.run(
        [sys.executable, str(SCRIPTS / "wandb_process.py"), "fork"],
        env=job_env(RANKWISE_DIR=str(root)), cwd=tmp, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    (tmp / "child-run").write_text(re.search(r"RUN (\S+)", out.stdout).group(1))
    return root


@pytest.fixture(scope="module")
def ui(data: Path) -> Iterator[str]:
    with ServerProcess.ui(data, data.parent / "server.log") as server:
        yield server.url


def test_per_process_runs_say_which_rank_they_are(browser: Any, ui: str) -> None:
    p = Page(browser)
    page = p.page
    page.goto(f"{ui}/#/p/pp")
    page.locator('tr[data-run="per-rank-1"]').wait_for()
    for rank in (0, 1):
        row = page.locator(f'tr[data-run="per-rank-{rank}"]')
        assert row.locator("[data-rank-of]").inner_text() == f"rank-{rank}"
    # The W&B rank-0-only run holds one rank of two: it says which one.
    assert page.locator('tr[data-run="zero-only"] [data-rank-of]').inner_text() == "rank-0"

    page.goto(f"{ui}/#/p/pp/g/per")
    legend = page.locator(".run-legend")
    legend.locator("[data-rank-of]").nth(1).wait_for()
    assert sorted(legend.locator("[data-rank-of]").all_inner_texts()) == ["rank-0", "rank-1"]

    page.goto(f"{ui}/#/p/pp/r/per-rank-1")
    assert page.locator("[data-mode]").inner_text() == "new: one run per process (this is rank-1)"
    page.goto(f"{ui}/#/p/pp/r/zero-only")
    assert page.locator("[data-mode]").inner_text() == "rank-0 only, of 2 ranks"
    p.check()
    p.close()


def test_a_child_processs_stream_is_not_a_second_rank(browser: Any, ui: str, data: Path) -> None:
    run_id = (data.parent / "child-run").read_text()
    p = Page(browser)
    page = p.page
    page.goto(f"{ui}/#/p/guide-process/r/{run_id}")
    cells = page.locator("[data-health-strip] .rh-cell")
    cells.nth(2).wait_for()
    assert cells.all_inner_texts() == ["0", "0c1", "0c2"]
    assert page.locator("[data-ranks]").inner_text() == "1 × 1"
    assert page.locator("[data-mode]").inner_text() == "shared: every rank"
    # A metric logged once, at step 0: an axis around that step, not 0..100.
    chart = page.locator('.chart-card[data-metric="init_child_metric"] .chart-canvas')
    chart.wait_for()
    wait_until(lambda: chart.get_attribute("data-xticks") not in (None, "[]"))
    ticks = [float(t.replace(",", "")) for t in json.loads(chart.get_attribute("data-xticks"))]
    assert min(ticks) >= -1 and max(ticks) <= 1 and 0 in ticks, ticks
    p.check()
    p.close()
