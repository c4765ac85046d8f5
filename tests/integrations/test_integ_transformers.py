"""``RankwiseCallback`` in a real 2-rank torchrun ``Trainer`` job (gloo, CPU), tiny BERT.

Read back with ``Api(dir=)``: one run, a stream per rank, every log of each rank's
``state.log_history`` at its global step with keys rewritten to ``train/``, ``eval/``,
``test/``; the single values of the final log as each rank's summary (their runtimes
differ); the arguments and model config as config; the final model as an artifact.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import rankwise
from tests.helpers.env import need
from tests.helpers.jobs import SCRIPTS, job_env, torchrun

need("torch")
need("transformers")

SINGLE = {"train_runtime", "train_samples_per_second", "train_steps_per_second"}
SINGLE |= {"train_loss", "total_flos"}


def expected_rows(history: list[dict[str, Any]]) -> Counter[tuple[int, str, float]]:
    """What the callback logs for ``history``: (step, rewritten key, value)."""
    rows: Counter[tuple[int, str, float]] = Counter()
    for entry in history:
        step = entry["step"]
        for key, value in entry.items():
            if key == "step" or key in SINGLE:
                continue
            prefix = (
                "eval/" if key.startswith("eval_") else "test/" if key.startswith("test_") else None
            )
            name = prefix + key[5:] if prefix else "train/" + key
            rows[(step, name, value)] += 1
    return rows


def hf_job(tmp_path: Path, *args: str, **env: str) -> tuple[Path, list[dict[str, Any]], str]:
    data, report = tmp_path / "data", tmp_path / "report"
    report.mkdir()
    job = subprocess.run(
        [*torchrun(), "--standalone", "--nproc-per-node=2", str(SCRIPTS / "hf_job.py"),
         "--dir", str(data), "--report", str(report), *args],
        env=job_env(**env), cwd=tmp_path, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    out = job.stdout + job.stderr
    assert job.returncode == 0, out
    reports = [json.loads((report / f"rank-{r}.json").read_text()) for r in (0, 1)]
    assert reports[0]["run_id"] == reports[1]["run_id"]
    return data, reports, out


@pytest.mark.torchrun
def test_trainer_callback_records_every_rank(tmp_path: Path) -> None:
    data, reports, out = hf_job(tmp_path)
    assert out.count("rankwise: run hf/") == 1
    assert [r["ended_as"] for r in reports] == ["finished", "finished"]  # at train end

    api = rankwise.Api(dir=data)
    run = api.run(reports[0]["run_id"], project="hf")
    assert (run.state, run.name, run.world_size) == ("finished", "tiny-bert", 2)
    # evaluate() after train() went on in the same run: a second incarnation per rank
    assert sorted((s.label, s.incarnation, s.state) for s in run.streams) == [
        ("rank-0", 0, "finished"),
        ("rank-0", 1, "finished"),
        ("rank-1", 0, "finished"),
        ("rank-1", 1, "finished"),
    ]
    config = run.config
    assert (config["vocab_size"], config["hidden_size"], config["num_hidden_layers"]) == (32, 8, 2)
    assert (config["learning_rate"], config["max_steps"], config["run_name"]) == (
        0.01,
        4,
        "tiny-bert",
    )
    assert config["model/num_parameters"] == reports[0]["num_parameters"] > 1000

    summaries = run.summary_ranks
    assert summaries is not None
    for rep in reports:
        label = f"rank-{rep['rank']}"
        got: Counter[tuple[int, str, float]] = Counter()
        for row in run.history(label=label):
            for key, value in row.items():
                if key not in ("step", "time", "label"):
                    got[(row["step"], key, value)] += 1
        history = rep["log_history"]
        assert got == expected_rows(history)
        steps = sorted({s for s, k, _ in got if k == "train/loss"})
        assert steps == [1, 2, 3, 4]  # the global step of each logging step
        assert sorted({s for s, k, _ in got if k == "eval/loss"}) == [2, 4]
        [final] = [h for h in history if "train_runtime" in h]
        for key in SINGLE:  # this rank's own values (its runtime is its own)
            assert summaries[label][key] == final[key]
    runtimes = {summaries[f"rank-{r}"]["train_runtime"] for r in (0, 1)}
    assert runtimes == {rep["log_history"][-2]["train_runtime"] for rep in reports}

    [model] = run.logged_artifacts()
    assert (model.name, model.type, model.aliases) == (
        "model-tiny-bert",
        "model",
        ["final_model", "latest"],
    )
    assert model.metadata["final_model"] is True
    assert model.metadata["train_loss"] == reports[0]["log_history"][-2]["train_loss"]
    assert sorted(f.path for f in model.files()) == [
        "config.json",
        "model.safetensors",
        "model_architecture.txt",
    ]
    folder = Path(api.artifact("hf/model-tiny-bert:final_model").download(root=tmp_path / "m"))
    saved = json.loads((folder / "config.json").read_text())
    assert (saved["vocab_size"], saved["architectures"]) == (32, ["BertForSequenceClassification"])
    assert "BertForSequenceClassification" in (folder / "model_architecture.txt").read_text()


@pytest.mark.torchrun
def test_checkpoints_as_artifacts_when_the_environment_asks(tmp_path: Path) -> None:
    """``RANKWISE_LOG_MODEL=checkpoint``: each checkpoint the Trainer saves (every 2
    steps) is a version of ``model-tiny-bert``, logged once, by world process zero.
    ``RANKWISE_WATCH=gradients``: every rank records its own gradient histograms."""
    data, reports, _ = hf_job(
        tmp_path,
        "--log-model",
        "env",
        "--save-steps",
        "2",
        RANKWISE_LOG_MODEL="checkpoint",
        RANKWISE_WATCH="gradients",
    )
    run = rankwise.Api(dir=data).run(reports[0]["run_id"], project="hf")
    versions = sorted(run.logged_artifacts(), key=lambda a: a.version or "")
    assert [(a.name, a.version) for a in versions] == [
        ("model-tiny-bert", "v0"),
        ("model-tiny-bert", "v1"),
    ]
    for art, step in zip(versions, (2, 4)):
        assert f"checkpoint_global_step_{step}" in art.aliases
        assert f"epoch_{step / 8}" in art.aliases  # 8 steps an epoch: 64 rows, 2 x 4 a step
        assert art.metadata["model/num_parameters"] == reports[0]["num_parameters"]
        entries = {f.path: f.digest for f in art.files()}
        folder = tmp_path / "report" / "out" / f"checkpoint-{step}"
        for name in ("config.json", "model.safetensors"):
            assert entries[name] == hashlib.sha256((folder / name).read_bytes()).hexdigest()
    assert {s.label for s in run.streams} == {"rank-0", "rank-1"}
    grads = run.histograms("gradients/classifier.weight")
    assert isinstance(grads, dict) and sorted(grads) == ["rank-0", "rank-1"]
    assert grads["rank-0"].steps.tolist() == grads["rank-1"].steps.tolist() != []
    assert grads["rank-0"].counts.tolist() != grads["rank-1"].counts.tolist()  # its own data
