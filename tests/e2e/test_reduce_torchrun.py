"""``define_metric(reduce=)`` in a real 3-process torchrun job uploading to a real server.

Each rank logs different values (``tests/scripts/reduce_job.py``); the test computes each
metric's line from the stream files' rows with numpy and asks for it everywhere it is
shown: the series API's band (``reduce`` and its column, at every step), the run reply's
cross-rank summary (``reduce``/``value``), ``Api(dir=)`` and ``Api(server=)``.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import rankwise
from rankwise.metric_defs import reduce_of
from tests.helpers.browser import Page, launch_browser
from tests.helpers.runs import FAST_ENV
from tests.helpers.servers import ServerProcess, srv_get, subprocess_env
from tests.helpers.wait import wait_until

pytestmark = pytest.mark.torchrun

WORLD, STEPS = 3, 6
LINES = {
    "samples_per_s": "sum",
    "mem/peak_gb": "max",
    "mem/free_gb": "min",
    "lat": "min",
    "loss": "wmean",
    "acc": "mean",
}


def _truth(run: rankwise.RunInfo, key: str) -> np.ndarray:
    """The line of ``key`` at every step, from the logged rows (numpy, not the store)."""
    values = np.full((WORLD, STEPS), np.nan)
    weights = np.full((WORLD, STEPS), np.nan)
    for row in run.history(keys=[key]):
        rank = int(row["label"].split("-")[1])
        values[rank, row["step"]] = row[key]
        weights[rank, row["step"]] = row["weight"]
    assert not np.isnan(values).any()
    how = LINES[key]
    if how == "wmean":
        return (values * weights).sum(axis=0) / weights.sum(axis=0)
    return getattr(values, how)(axis=0)


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, ServerProcess]]:
    """The job, run once: its data directory, and the server it uploaded to."""
    tmp = tmp_path_factory.mktemp("reduce")
    data = tmp / "data"
    data.mkdir()
    with ServerProcess.db(f"sqlite:///{tmp / 'db.sqlite'}", tmp / "server.log") as srv:
        env = subprocess_env(
            **FAST_ENV, RANKWISE_DIR=str(data), RANKWISE_SERVER=srv.url,
            RANKWISE_RUN_ID="dm", OMP_NUM_THREADS="1",
        )  # fmt: skip
        script = Path(__file__).parents[1] / "scripts" / "reduce_job.py"
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               f"--nproc-per-node={WORLD}", str(script), "--steps", str(STEPS)]  # fmt: skip
        out = subprocess.run(cmd, env=env, cwd=tmp, capture_output=True, text=True, timeout=240)
        assert out.returncode == 0, out.stdout + out.stderr
        yield data, srv


def test_define_metric_reduce_is_the_line_everywhere(
    job: tuple[Path, ServerProcess], monkeypatch: pytest.MonkeyPatch
) -> None:
    data, srv = job
    monkeypatch.setenv("RANKWISE_TOKEN", srv.token or "")  # the job's server's admin
    local = rankwise.Api(dir=data).run("dm", project="reduce")
    remote = rankwise.Api(server=srv.url).run("dm", project="reduce")
    assert remote.state == local.state == "finished" and len(remote.streams) == WORLD
    # The definitions, kept with the run: the primary's, and every rank's exact one.
    for run in (local, remote):
        assert run.defined_metrics == local.defined_metrics
        assert set(run.defined_metrics) == {
            "samples_per_s",
            "mem/*",
            "lat",
            "loss",
            "mem/free_gb",
        }
        assert run.defined_metrics["lat"].goal == "minimize"
        assert run.defined_metrics["loss"].summary == "min"
        assert {k: run.reduce_of(k) for k in LINES} == LINES

    for key, how in LINES.items():
        truth = _truth(local, key)
        reply = srv_get(srv.url, "/api/v1/projects/reduce/runs/dm/series", key=key,
                        streams="none")  # fmt: skip
        band = reply["band"]
        assert band["reduce"] == how, key
        assert band["x"] == list(range(STEPS)) and band["n"] == [WORLD] * STEPS
        np.testing.assert_allclose(band[how], truth, rtol=1e-12, err_msg=key)
        # The band itself is unchanged: min..max of the ranks, and the sum column.
        np.testing.assert_allclose(band["sum"], _sum(local, key), rtol=1e-12)
        # The summary's cross-rank value is that line's at the last step, everywhere.
        sent = srv_get(srv.url, "/api/v1/projects/reduce/runs/dm")["summary_cross_rank"][key]
        assert sent["reduce"] == how and sent[how] == pytest.approx(truth[-1], rel=1e-12)
        for run in (local, remote):
            value = run.summary_cross_rank[key]
            assert value.reduce == how and value.step == STEPS - 1
            assert value.value == pytest.approx(truth[-1], rel=1e-12), (key, how)
    # The job's total throughput at the last step: 100+200+300 plus 3 x step 5.
    assert local.summary_cross_rank["samples_per_s"].value == pytest.approx(615.0)


@pytest.mark.browser
def test_the_chart_draws_the_defined_sum(job: tuple[Path, ServerProcess], tmp_path: Path) -> None:
    """Real Chromium on ``rankwise ui`` over the job's files: the throughput card draws the
    job's total (its readout quotes it, at the last step and where the pointer is), the
    card's line setting offers the others, and the summary quotes the sum."""
    data, _ = job
    with ServerProcess.ui(data, tmp_path / "ui.log") as ui, launch_browser() as browser:
        p = Page(browser, width=1280, height=900)
        page = p.page
        page.goto(f"{ui.url}/#/p/reduce/r/dm")
        card = page.locator('.chart-card[data-metric="samples_per_s"]')
        page.locator('.chart-card[data-metric="samples_per_s"][data-state="drawn"]').wait_for()
        line = card.locator("select.line-kind")
        assert line.input_value() == "sum" and line.get_attribute("data-defined") == "sum"
        readout = card.locator(".readout")
        wait_until(lambda: "sum 615 at step 5" in readout.inner_text(), timeout=10)
        # The pointer over step 2: the total there, 100 + 200 + 300 + 3 x 2.
        card.scroll_into_view_if_needed()
        over = card.locator(".u-over").bounding_box()
        assert over is not None
        lo, hi = float(card.get_attribute("data-xmin")), float(card.get_attribute("data-xmax"))
        x2 = over["x"] + (2 - lo) / (hi - lo) * over["width"]
        page.mouse.move(x2, over["y"] + over["height"] / 2)
        wait_until(lambda: "step 2" in readout.inner_text(), timeout=10)
        assert "sum 606" in readout.inner_text(), readout.inner_text()
        page.mouse.move(0, 0)
        # The others, on demand: the (weighted) mean and the max.
        line.select_option("mean")
        wait_until(lambda: "weighted mean 238.3" in readout.inner_text(), timeout=10)
        line.select_option("max")
        wait_until(lambda: "max 305 at step 5" in readout.inner_text(), timeout=10)
        lat = page.locator('.chart-card[data-metric="lat"]')
        lat.scroll_into_view_if_needed()
        page.locator('.chart-card[data-metric="lat"][data-state="drawn"]').wait_for()
        assert lat.locator("select.line-kind").input_value() == "min"
        assert "min 3.5 at step 5" in lat.locator(".readout").inner_text()
        page.get_by_role("tab", name="Config & summary").click()
        cross = page.locator('[data-cross="samples_per_s"]')
        assert cross.inner_text().startswith("615 sum"), cross.inner_text()
        p.check()
        p.close()


def _sum(run: rankwise.RunInfo, key: str) -> np.ndarray:
    total = np.zeros(STEPS)
    for row in run.history(keys=[key]):
        total[row["step"]] += row[key]
    return total


def test_a_bad_reduce_is_a_clear_error(tmp_path: Path) -> None:
    run = rankwise.init(project="p", dir=tmp_path, system=False, console="off")
    try:
        with pytest.raises(rankwise.UsageError, match="'mean', 'wmean', 'sum', 'min', 'max'"):
            run.define_metric("loss", reduce="median")
        with pytest.raises(rankwise.UsageError, match="only end a glob"):
            run.define_metric("a*b", reduce="sum")
        with pytest.raises(rankwise.UsageError, match="goal"):
            run.define_metric("loss", goal="lower")
        # A later definition keeps what it leaves out, as in W&B.
        run.define_metric("loss", reduce="max")
        run.define_metric("loss", step_metric="epoch", goal="Min")
        run.log({"loss": 1.0})
    finally:
        run.finish()
    got = rankwise.Api(dir=tmp_path).run(run.id, project="p")
    assert got.defined_metrics["loss"].reduce == "max"
    assert got.defined_metrics["loss"].step_metric == "epoch"
    assert got.defined_metrics["loss"].goal == "minimize"


def test_glob_rules() -> None:
    class D:
        def __init__(self, reduce: str) -> None:
            self.reduce = reduce

    defs = {"*": D("max"), "train/*": D("sum"), "train/loss": D("min"), "train/l*": D("wmean")}
    assert reduce_of(defs, "train/loss") == "min"  # exact beats a glob
    assert reduce_of(defs, "train/lr") == "wmean"  # the longer prefix wins
    assert reduce_of(defs, "train/acc") == "sum"
    assert reduce_of(defs, "val/acc") == "max"
    assert reduce_of(defs, "_runtime") == "mean"  # '_' keys never match a glob
    assert reduce_of({}, "x") == "mean"
