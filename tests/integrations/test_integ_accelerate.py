"""``RankwiseTracker`` in real 2-rank torchrun Accelerate jobs (gloo, CPU).

Accelerate's ``init_trackers`` and ``log`` are ``@on_main_process``: ``every_rank`` makes
them reach the rankwise tracker on every rank, so both ranks record their own loss at the
``step=`` given. Without it (``--plain``) only the main process records what
``accelerator.log`` logs, and a rank that calls the tracker itself still records into
the same run.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

import rankwise
from tests.helpers.env import need
from tests.helpers.jobs import SCRIPTS, job_env, torchrun

need("torch")
need("accelerate")

STEPS = 4


def accelerate_job(tmp_path: Path, *args: str) -> list[dict[str, Any]]:
    data, report = tmp_path / "data", tmp_path / "report"
    report.mkdir()
    job = subprocess.run(
        [*torchrun(), "--standalone", "--nproc-per-node=2", str(SCRIPTS / "accelerate_job.py"),
         "--dir", str(data), "--report", str(report), "--steps", str(STEPS), *args],
        env=job_env(), cwd=tmp_path, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert job.returncode == 0, job.stdout + job.stderr
    reports = [json.loads((report / f"rank-{r}.json").read_text()) for r in (0, 1)]
    assert reports[0]["run_id"] == reports[1]["run_id"]
    return reports


def losses(run: rankwise.RunInfo, label: str) -> list[tuple[int, float, float]]:
    rows = run.history(["loss", "rank_mark"], label=label)
    return [(r["step"], r["loss"], r["rank_mark"]) for r in rows if "loss" in r]


def check_media(run: rankwise.RunInfo) -> None:
    for rank in (0, 1):
        label = f"rank-{rank}"
        [image] = run.media("samples", label=label)
        assert (image.step, image.width, image.height) == (10 * STEPS, 6, 4)
        assert run.table("preds", label=label).data == [[rank, STEPS]]
    [direct] = [r for r in run.history(["direct"], label="rank-1") if "direct" in r]
    assert (direct["step"], direct["direct"]) == (10 * STEPS, 1.0)


@pytest.mark.torchrun
def test_every_rank_records_through_the_accelerator(tmp_path: Path) -> None:
    reports = accelerate_job(tmp_path)
    run = rankwise.Api(dir=tmp_path / "data").run(reports[0]["run_id"], project="acc")
    assert (run.state, run.tags, run.world_size) == ("finished", ["tiny"], 2)
    assert run.config == {"lr": 0.1, "steps": STEPS}  # init_trackers(config=)
    assert sorted((s.label, s.state) for s in run.streams) == [
        ("rank-0", "finished"),  # end_training() ends every rank's stream
        ("rank-1", "finished"),
    ]
    for rep in reports:
        assert rep["get_tracker_is_run"] is True  # get_tracker("rankwise", unwrap=True)
        assert rep["state"] == "finished"
        got = losses(run, f"rank-{rep['rank']}")
        assert [(s, v) for s, v, _ in got] == [tuple(x) for x in rep["seen"]]
        assert [m for _, _, m in got] == [100.0 * rep["rank"] + s // 10 for s, _, _ in got]
    assert [s for s, _, _ in losses(run, "rank-1")] == [0, 10, 20, 30]  # the step= given
    check_media(run)


@pytest.mark.torchrun
def test_without_every_rank_accelerate_logs_on_the_main_process(tmp_path: Path) -> None:
    reports = accelerate_job(tmp_path, "--plain")
    # init_trackers' project name reaches a custom tracker only through every_rank
    run = rankwise.Api(dir=tmp_path / "data").run(reports[0]["run_id"], project="accelerate")
    assert [(s, v) for s, v, _ in losses(run, "rank-0")] == [tuple(x) for x in reports[0]["seen"]]
    assert losses(run, "rank-1") == []  # accelerator.log did nothing on rank 1
    assert reports[1]["get_tracker_is_run"] is False  # no trackers on rank 1
    check_media(run)  # the tracker's own methods record on any rank
