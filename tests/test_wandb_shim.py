"""The opt-in shim (``python -m rankwise.wandb script.py``): Lightning's ``WandbLogger``
and the Transformers ``WandbCallback``, unchanged, record into rankwise runs that read
back exactly. Without the shim the same integrations do not see a ``wandb``."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import rankwise

from .helpers.env import clean_env, need
from .helpers.jobs import FAST, SCRIPTS, torchrun

need("torch")


def shimmed(script: str, cwd: Path, *args: str, launch: list[str] | None = None, **env: str) -> str:
    full = {k: v for k, v in clean_env(**FAST).items() if not k.startswith("WANDB_")}
    full.update(env)
    full["TRANSFORMERS_OFFLINE"] = full["HF_HUB_OFFLINE"] = "1"
    out = subprocess.run(
        [*(launch or [sys.executable]), "-m", "rankwise.wandb", str(SCRIPTS / script), *args],
        env=full, cwd=cwd, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout + out.stderr


def test_lightning_wandb_logger_unchanged(tmp_path: Path) -> None:
    need("pytorch_lightning")
    out = shimmed("wandb_lightning.py", tmp_path, str(tmp_path / "logs"))
    found = re.search(r"RUN (\S+) (\S+)", out)
    assert found is not None and found.group(1) == found.group(2)
    # WandbLogger passes dir=save_dir: the data directory is <save_dir>/rankwise
    run = rankwise.Api(dir=tmp_path / "logs" / "rankwise").run(found.group(1), "lightning")
    assert run.state == "finished" and run.tags == ["lit"]
    assert run.config["hidden"] == 4 and run.config["batch_size"] == 8
    assert run.config["_wandb"]["m"] == [
        {"name": "trainer/global_step"},
        {"name": "*", "step_metric": "trainer/global_step", "step_sync": True},
    ]
    rows = run.history()
    train = [r for r in rows if "train/loss" in r]
    val = [r for r in rows if "val/loss" in r]
    # 4 batches an epoch, logged every 2nd step: global steps 1, 3, 5, 7; val once an epoch
    assert [r["trainer/global_step"] for r in train] == [1, 3, 5, 7]
    assert [r["trainer/global_step"] for r in val] == [3, 7] and [r["epoch"] for r in val] == [0, 1]
    assert [r["step"] for r in rows] == list(range(len(rows)))
    # log_model=True: the checkpoint as W&B's artifact model-<run id>, aliases latest+best
    api = rankwise.Api(dir=tmp_path / "logs" / "rankwise")
    model = api.artifact(f"lightning/model-{run.id}:best")
    assert model.type == "model" and "latest" in model.aliases
    assert [f.path for f in model.files()] == ["model.ckpt"]
    assert [a.name for a in run.logged_artifacts()] == [f"model-{run.id}"]


def test_transformers_wandb_callback_unchanged(tmp_path: Path) -> None:
    need("transformers")
    out = shimmed("wandb_transformers.py", tmp_path, str(tmp_path / "out"),
                  RANKWISE_DIR=str(tmp_path / "data"), WANDB_PROJECT="hf",
                  WANDB_LOG_MODEL="end")  # fmt: skip
    run_id = re.search(r"RUN (\S+)", out).group(1)  # type: ignore[union-attr]
    run = rankwise.Api(dir=tmp_path / "data").run(run_id, "hf")
    assert run.state == "finished" and run.name == "tiny"
    assert run.config["n_embd"] == 16 and run.config["max_steps"] == 4  # model + arguments
    assert run.config["model/num_parameters"] > 0
    assert run.config["_wandb"]["label"] == {"code": "transformers_trainer"}
    train = [r for r in run.history() if "train/loss" in r]
    assert [r["train/global_step"] for r in train] == [1, 2, 3, 4]
    assert all(r["train/loss"] > 0 for r in train)
    for key in ("train_runtime", "train_loss", "total_flos"):  # summary[k] = v of on_log
        assert run.summary[key] > 0
    # WANDB_LOG_MODEL=end: the base model, then the final one (new_file + add_dir)
    api = rankwise.Api(dir=tmp_path / "data")
    final = api.artifact("hf/model-tiny:final_model")
    assert final.version == "v1" and "latest" in final.aliases and final.type == "model"
    assert {"config.json", "model.safetensors"} <= {f.path for f in final.files()}
    assert final.metadata["train/global_step"] == 4
    assert api.artifact("hf/model-tiny:base_model").version == "v0"


@pytest.mark.torchrun
def test_accelerate_wandb_tracker_under_torchrun(tmp_path: Path) -> None:
    need("accelerate")
    launch = [*torchrun(), "--standalone", "--nproc-per-node=2"]
    out = shimmed("wandb_accelerate.py", tmp_path, launch=launch, RANKWISE_DIR=str(tmp_path / "d"))
    run_id = re.search(r"RUN ([0-9a-z]{8})", out).group(1)  # type: ignore[union-attr]
    (run,) = rankwise.Api(dir=tmp_path / "d").runs("accel")
    assert run.id == run_id and run.state == "finished"
    assert (run.group, run.tags, run.config) == ("acc", ["a"], {"lr": 0.1})
    rows = run.history()
    assert [(r["step"], r["rank_seen"]) for r in rows] == [(s, 0) for s in range(4)]


def test_without_the_shim_integrations_see_no_wandb(tmp_path: Path) -> None:
    code = (
        "import importlib.util, importlib.metadata as md\n"
        "import rankwise.wandb\n"
        "assert importlib.util.find_spec('wandb') is None\n"
        "try:\n    md.version('wandb')\nexcept md.PackageNotFoundError:\n    print('ABSENT')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], env=clean_env(), cwd=tmp_path,
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert out.stdout.strip() == "ABSENT", out.stdout + out.stderr
