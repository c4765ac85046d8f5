"""``RankwiseLogger`` in real Lightning ``strategy="ddp", devices=2`` jobs on CPU (gloo).

Lightning starts rank 1 itself, by running the script again. Read back with
``Api(dir=)``: one run, a stream per rank, each rank's own values at the global steps it
logged them, the hyperparameters, a gallery and a table per rank, and checkpoints as
``model`` artifacts whose bytes are the checkpoint files'.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import rankwise
from tests.helpers.env import free_port, need
from tests.helpers.jobs import SCRIPTS, job_env

need("torch")
need("pytorch_lightning")

STEPS = 4


# The two jobs of this module, started together (each waits mostly on imports and
# process start): name -> the script's arguments.
JOBS = {
    "shared": ("--log-model", "true"),
    "early": ("--early", "--log-model", "all", "--every", "1", "--fail-at", "3"),
}
Job = tuple[Path, list[dict[str, Any]], str]


@pytest.fixture(scope="module")
def jobs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Job | str]:
    """Each job's data directory, rank reports and output (or its output if it failed)."""
    started = {}
    for name, args in JOBS.items():
        top = tmp_path_factory.mktemp(name)
        (top / "report").mkdir()
        cmd = [sys.executable, str(SCRIPTS / "lightning_job.py"), "--dir", str(top / "data"),
               "--report", str(top / "report"), "--steps", str(STEPS), *args]  # fmt: skip
        env = job_env(MASTER_PORT=str(free_port()))
        proc = subprocess.Popen(
            cmd, env=env, cwd=top, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        started[name] = (top, proc)
    done: dict[str, Job | str] = {}
    try:
        for name, (top, proc) in started.items():
            out, _ = proc.communicate(timeout=300)
            if proc.returncode != 0:
                done[name] = out
                continue
            reports = [json.loads((top / "report" / f"rank-{r}.json").read_text()) for r in (0, 1)]
            done[name] = (top / "data", reports, out)
    finally:
        for _, proc in started.values():
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    return done


def lightning_job(jobs: dict[str, Job | str], name: str) -> Job:
    job = jobs[name]
    assert not isinstance(job, str), job  # the job failed: its output
    return job


def check_streams(run: rankwise.RunInfo, reports: list[dict[str, Any]], state: str) -> None:
    assert run.state == state
    streams = {s.label: s for s in run.streams}
    assert sorted(streams) == ["rank-0", "rank-1"]
    for rep in reports:
        s = streams[f"rank-{rep['rank']}"]
        assert (s.rank, s.pid, s.incarnation, s.state) == (rep["rank"], rep["pid"], 0, state)
        logged = [
            (r["step"], r["loss"], r["mark"])
            for r in run.history(["loss", "mark"], label=s.label)
            if "loss" in r
        ]
        # every step, at the trainer's global step, this rank's own loss
        assert logged == [tuple(x) for x in rep["seen"]]
        assert [m for _, _, m in logged] == [100.0 * rep["rank"] + g for g, _, _ in logged]


def sha256(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@pytest.mark.torchrun
def test_every_rank_records_into_one_shared_run(jobs: dict[str, Job | str]) -> None:
    data, reports, out = lightning_job(jobs, "shared")
    assert reports[0]["run_id"] == reports[1]["run_id"]  # agreed once the group was up
    assert out.count("rankwise: run lit/") == 1  # announced by the primary only
    run = rankwise.Api(dir=data).run(reports[0]["run_id"], project="lit")
    check_streams(run, reports, "finished")
    assert [len(rep["seen"]) for rep in reports] == [STEPS, STEPS]
    assert run.world_size == 2
    assert run.config == {"seed": 7, "lr": 0.05, "hidden": 4}  # config= and hyperparameters

    for rank in (0, 1):
        label = f"rank-{rank}"
        gallery = run.media("samples", label=label)
        assert [(m.step, m.caption, m.width, m.height) for m in gallery] == [
            (STEPS, "a", 5, 6),
            (STEPS, "b", 5, 6),
        ]
        assert run.table("preds", label=label).data == [[rank, STEPS]]
        [clip] = run.media("clips", label=label)
        assert (clip.kind, clip.step, clip.sample_rate) == ("audio", STEPS, 8000)
        [video] = run.media("moves", label=label)
        assert (video.kind, video.step, video.fps, video.caption) == ("video", STEPS, 2.0, "v")

    # watch(): each rank's local gradients (DDP averages them after the hooks see them)
    grads = run.histograms("gradients/0.weight")
    assert isinstance(grads, dict) and sorted(grads) == ["rank-0", "rank-1"]
    assert grads["rank-0"].steps.tolist() == grads["rank-1"].steps.tolist() != []
    assert grads["rank-0"].counts.tolist() != grads["rank-1"].counts.tolist()

    # log_model=True: the checkpoint at the end of training, once (from rank 0)
    [model] = run.logged_artifacts()
    assert (model.name, model.type, model.version) == (f"model-{run.id}", "model", "v0")
    assert sorted(model.aliases) == ["best", "latest"]
    assert model.metadata["original_filename"] == Path(reports[0]["checkpoint"]).name
    assert model.metadata["ModelCheckpoint"]["save_top_k"] == 1
    [entry] = model.files()
    assert entry.path == "model.ckpt" and entry.digest == sha256(reports[0]["checkpoint"])


@pytest.mark.torchrun
def test_early_experiment_every_checkpoint_and_a_failure(jobs: dict[str, Job | str]) -> None:
    """``logger.experiment`` before ``fit()`` (rank 1 does not exist yet): rank 1 still
    joins the launcher's run. ``log_model="all"`` logs each checkpoint as it is saved;
    an exception on every rank at step 3 ends both streams failed, with it."""
    data, reports, out = lightning_job(jobs, "early")
    assert reports[0]["run_id"] == reports[1]["run_id"]
    assert out.count("rankwise: run lit/") == 1
    run = rankwise.Api(dir=data).run(reports[0]["run_id"], project="lit")
    check_streams(run, reports, "failed")
    assert [len(rep["seen"]) for rep in reports] == [3, 3]
    for s in run.streams:
        assert (s.error_type, s.error_message) == ("RuntimeError", "boom at step 3")
        assert "training_step" in (s.traceback or "")
        [early] = [r for r in run.history(["early"], label=s.label) if "early" in r]
        assert (early["step"], early["early"]) == (0, 1.0)

    versions = sorted(run.logged_artifacts(), key=lambda a: a.version or "")
    assert [a.version for a in versions] == ["v0", "v1", "v2"]
    assert [a.metadata["original_filename"] for a in versions] == [
        f"epoch=0-step={n}.ckpt" for n in (1, 2, 3)
    ]
    folder = Path(reports[0]["checkpoint"]).parent
    for a in versions:
        [entry] = a.files()
        assert entry.digest == sha256(str(folder / a.metadata["original_filename"]))
