"""The integrations' edges that need no training job: imports stay where they belong,
bad arguments are refused with a message naming the fix, names come out valid."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

import rankwise
from rankwise.integrations import _common
from tests.helpers.env import PYTHON, REPO, need

FRAMEWORKS = ("pytorch_lightning", "lightning", "lightning_fabric", "transformers", "accelerate")


def loaded_after(statement: str) -> list[str]:
    code = (
        f"import sys\n{statement}\n"
        f"names = {FRAMEWORKS!r}\n"
        "print(__import__('json').dumps(sorted({m.split('.')[0] for m in sys.modules"
        " if m.split('.')[0] in names or m.startswith('rankwise.integrations.')})))"
    )
    out = subprocess.run(
        [PYTHON, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=True,
    )
    found: list[str] = json.loads(out.stdout)
    return found


def test_import_rankwise_loads_no_framework() -> None:
    assert loaded_after("import rankwise, rankwise.integrations") == []


@pytest.mark.slow
def test_each_integration_loads_its_own_framework_only() -> None:
    assert loaded_after("import rankwise.integrations.accelerate") == ["accelerate", "rankwise"]


def test_init_keywords_are_checked() -> None:
    with pytest.raises(TypeError, match=r"'entity'.*rankwise\.init\(\)'s keywords"):
        _common.check_init_kwargs({"project": "p", "entity": "me"}, "RankwiseLogger")
    assert _common.check_init_kwargs({"tags": ["a"]}, "x") == {"tags": ["a"]}


def test_artifact_names_are_made_valid() -> None:
    assert _common.artifact_name("model-my run/2") == "model-my-run-2"
    assert len(_common.artifact_name("model-" + "x" * 300)) == 128
    assert _common.as_id("/tmp/out dir/") == "tmp-out-dir"


def test_images_follow_wandb_loggers_rules() -> None:
    need("numpy")
    import numpy as np

    pixels = np.zeros((2, 3, 3), dtype=np.uint8)
    made = _common.images([pixels, pixels], {"caption": ["a", "b"]}, "log_image")
    assert [i.caption for i in made] == ["a", "b"]
    with pytest.raises(ValueError, match="expected 2 items but found 1 for caption"):
        _common.images([pixels, pixels], {"caption": ["a"]}, "log_image")
    with pytest.raises(TypeError, match="expected a list, found ndarray"):
        _common.images(pixels, {}, "log_image")
    clip = np.zeros(800, dtype=np.float32)
    [audio] = _common.media("Audio", [clip], {"sample_rate": [8000], "caption": ["c"]}, "x")
    assert (audio.caption, audio.sample_rate) == ("c", 8000)


@pytest.mark.slow
def test_a_lightning_logger_pickles_without_its_run(tmp_path: Path) -> None:
    """``ddp_spawn`` pickles the logger: a started run stays behind, its base id goes."""
    code = (
        "import pickle, rankwise\n"
        "from rankwise.integrations.lightning import RankwiseLogger\n"
        f"logger = RankwiseLogger(project='p', dir={str(tmp_path)!r})\n"
        "run = logger.experiment\n"
        "copy = pickle.loads(pickle.dumps(logger))\n"
        "print(copy._run is None, copy.version == run.id, logger.version == run.id)\n"
        "run.finish()\n"
    )
    out = subprocess.run(
        [PYTHON, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO), "RANKWISE_SILENT": "1"},
        check=True,
    )
    assert out.stdout.split() == ["True", "True", "True"]


@pytest.mark.slow
def test_each_hyperparameter_trial_is_a_run_of_its_own(tmp_path: Path) -> None:
    """The Trainer's hyperparameter search calls ``on_train_begin`` per trial: each trial
    gets its own run, named after it and grouped under the search's run name."""
    code = f"""
import json
from transformers import TrainerControl, TrainerState, TrainingArguments
from rankwise.integrations.transformers import RankwiseCallback
args = TrainingArguments(output_dir={str(tmp_path / "out")!r}, run_name="search",
                         report_to="none", use_cpu=True)
callback = RankwiseCallback(project="hp", dir={str(tmp_path / "data")!r})
ids = []
for n, trial in enumerate(("t0", "t1")):
    state = TrainerState(is_hyper_param_search=True, trial_name=trial)
    callback.on_train_begin(args, state, TrainerControl())
    state.global_step = 1
    callback.on_log(args, state, TrainerControl(), logs={{"loss": float(n)}})
    callback.on_train_end(args, state, TrainerControl())
    ids.append(callback.run.id)
print(json.dumps(ids))
"""
    out = subprocess.run(
        [PYTHON, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO), "RANKWISE_SILENT": "1"},
        check=True,
    )
    ids = json.loads(out.stdout.strip().splitlines()[-1])
    assert len(set(ids)) == 2
    runs = rankwise.Api(dir=tmp_path / "data")
    for n, run_id in enumerate(ids):
        run = runs.run(run_id, project="hp")
        assert (run.name, run.group, run.state) == (f"t{n}", "search", "finished")
        assert [(r["step"], r["train/loss"]) for r in run.history(["train/loss"])] == [(1, n)]
