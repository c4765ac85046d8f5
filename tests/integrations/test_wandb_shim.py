"""The opt-in shim (``python -m rankwise.wandb``) under the launchers people use, two
ranks each (gloo, CPU): Lightning's ``WandbLogger`` with Lightning's own DDP launcher and
under torchrun, the Transformers ``WandbCallback`` under torchrun, Accelerate's
``log_with="wandb"`` under ``accelerate launch`` and torchrun. Every script is unchanged
W&B-integration code; each rank writes what it saw and logged (``rank-<r>.json``), and
the runs read back exactly the values the integration records (rank 0's, or the mean
over ranks for the Transformers loss). One job per launch shape, read by several tests.

The shim reaches every process the program starts (``mp.spawn``, ``multiprocessing``
spawn and forkserver, a new ``python script.py``) through a start-up hook, and only
where the marker asks for it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import rankwise
from rankwise.wandb import __version__ as SHIM_VERSION
from rankwise.wandb._launch import HOOK_DIR, MARKER
from tests.helpers.env import clean_env, free_port, need
from tests.helpers.jobs import FAST, SCRIPTS, torchrun

pytestmark = pytest.mark.torchrun  # multi-process jobs (conftest: skip without torch)

TWO = ["--standalone", "--nproc-per-node=2"]


class Job:
    """One finished job: its output, its folder and each rank's report."""

    def __init__(self, out: str, folder: Path) -> None:
        self.out, self.folder = out, folder

    def rank(self, r: int) -> dict[str, Any]:
        return json.loads((self.folder / f"rank-{r}.json").read_text())

    def run_id(self) -> str:
        found = re.search(r"^RUN (\S+)", self.out, re.M)
        assert found is not None, self.out
        return found.group(1)


def shimmed(cmd: list[str], folder: Path, **env: str) -> Job:
    """``python -m rankwise.wandb CMD`` (or CMD as given when it already names the shim)
    in a clean environment; must succeed."""
    full = {k: v for k, v in clean_env(**FAST).items() if not k.startswith("WANDB_")}
    full.update(env)
    full["TRANSFORMERS_OFFLINE"] = full["HF_HUB_OFFLINE"] = "1"
    if "rankwise.wandb" not in cmd:
        cmd = [sys.executable, "-m", "rankwise.wandb", *cmd]
    folder.mkdir(parents=True, exist_ok=True)
    out = subprocess.run(cmd, env=full, cwd=folder, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    return Job(out.stdout + out.stderr, folder)


def both_ranks_shimmed(job: Job) -> None:
    for r in (0, 1):
        seen = job.rank(r)
        assert (seen["rank"], seen["world_size"]) == (r, 2)
        assert (seen["wandb"], seen["version"]) == ("rankwise.wandb", SHIM_VERSION)


# -- Lightning -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def lit_own(tmp_path_factory: pytest.TempPathFactory) -> Job:
    """``Trainer(devices=2, strategy="ddp")``: Lightning starts rank 1 itself, as a new
    ``python wandb_lightning.py`` process."""
    need("pytorch_lightning")
    folder = tmp_path_factory.mktemp("lit_own")
    return shimmed([str(SCRIPTS / "wandb_lightning.py"), str(folder), "2"], folder)


@pytest.fixture(scope="module")
def lit_torchrun(tmp_path_factory: pytest.TempPathFactory) -> Job:
    """The shim in front of the launcher: ``python -m rankwise.wandb torchrun ...``."""
    need("pytorch_lightning")
    folder = tmp_path_factory.mktemp("lit_torchrun")
    cmd = ["torchrun", *TWO, str(SCRIPTS / "wandb_lightning.py"), str(folder), "2"]
    return shimmed(cmd, folder)


def lightning_run(job: Job) -> Any:
    found = re.search(r"RUN (\S+) (\S+)", job.out)
    assert found is not None and found.group(1) == found.group(2), job.out
    # WandbLogger passes dir=save_dir: the data directory is <save_dir>/rankwise-runs
    return rankwise.Api(dir=job.folder / "rankwise-runs").run(found.group(1), "lightning")


@pytest.mark.parametrize("shape", ["lit_own", "lit_torchrun"])
def test_lightning_two_ranks_record_rank_zero(shape: str, request: pytest.FixtureRequest) -> None:
    job: Job = request.getfixturevalue(shape)
    both_ranks_shimmed(job)
    # Lightning's WandbLogger records on global rank 0 only; rank 1's is a dummy
    assert job.rank(0)["experiment"] == "rankwise.wandb._run"
    assert job.rank(1)["experiment"] != "rankwise.wandb._run"
    run = lightning_run(job)
    assert run.state == "finished" and [s.label for s in run.streams] == ["rank-0"]
    rows = run.history()
    train = [r for r in rows if "train/loss" in r]
    # 16 samples a rank (DistributedSampler), 2 batches an epoch, every 2nd step logged
    assert [r["trainer/global_step"] for r in train] == [1, 3]
    assert [r["train/loss"] for r in train] == job.rank(0)["losses"][1::2]
    assert not set(job.rank(1)["losses"]) & {r["train/loss"] for r in train}
    val = [r for r in rows if "val/loss" in r]
    assert [r["trainer/global_step"] for r in val] == [1, 3] and [r["epoch"] for r in val] == [0, 1]


def test_lightning_config_and_model_artifact(lit_own: Job) -> None:
    run = lightning_run(lit_own)
    assert run.tags == ["lit"] and run.config["hidden"] == 4 and run.config["batch_size"] == 8
    assert run.config["_wandb"]["m"] == [
        {"name": "trainer/global_step"},
        {"name": "*", "step_metric": "trainer/global_step", "step_sync": True},
    ]
    # log_model=True: the checkpoint as W&B's artifact model-<run id>, aliases latest+best
    api = rankwise.Api(dir=lit_own.folder / "rankwise-runs")
    model = api.artifact(f"lightning/model-{run.id}:best")
    assert model.type == "model" and "latest" in model.aliases
    assert [f.path for f in model.files()] == ["model.ckpt"]
    assert [a.name for a in run.logged_artifacts()] == [f"model-{run.id}"]


# -- Transformers ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def hf_torchrun(tmp_path_factory: pytest.TempPathFactory) -> Job:
    need("transformers")
    folder = tmp_path_factory.mktemp("hf")
    cmd = [*torchrun(), *TWO, "-m", "rankwise.wandb", str(SCRIPTS / "wandb_transformers.py")]
    return shimmed([*cmd, str(folder)], folder, RANKWISE_DIR=str(folder / "data"),
                   WANDB_PROJECT="hf", WANDB_LOG_MODEL="end")  # fmt: skip


def test_transformers_under_torchrun_records_the_mean_of_both_ranks(hf_torchrun: Job) -> None:
    both_ranks_shimmed(hf_torchrun)
    assert hf_torchrun.rank(0)["run"] == hf_torchrun.run_id() and hf_torchrun.rank(1)["run"] is None
    run = rankwise.Api(dir=hf_torchrun.folder / "data").run(hf_torchrun.run_id(), "hf")
    assert run.state == "finished" and run.name == "tiny"
    assert [s.label for s in run.streams] == ["rank-0"]  # the callback: world process zero
    train = [r for r in run.history() if "train/loss" in r]
    assert [r["train/global_step"] for r in train] == [1, 2, 3, 4]
    # the Trainer logs each step's loss gathered from both ranks and averaged
    mean = [
        (a + b) / 2 for a, b in zip(hf_torchrun.rank(0)["losses"], hf_torchrun.rank(1)["losses"])
    ]
    assert [r["train/loss"] for r in train] == pytest.approx(mean, rel=1e-6)
    assert hf_torchrun.rank(0)["losses"] != hf_torchrun.rank(1)["losses"]


def test_transformers_config_summary_and_model(hf_torchrun: Job) -> None:
    api = rankwise.Api(dir=hf_torchrun.folder / "data")
    run = api.run(hf_torchrun.run_id(), "hf")
    assert run.config["n_embd"] == 16 and run.config["max_steps"] == 4  # model + arguments
    assert run.config["model/num_parameters"] > 0
    assert run.config["_wandb"]["label"] == {"code": "transformers_trainer"}
    for key in ("train_runtime", "train_loss", "total_flos"):  # summary[k] = v of on_log
        assert run.summary[key] > 0
    # WANDB_LOG_MODEL=end: the base model, then the final one (new_file + add_dir)
    final = api.artifact("hf/model-tiny:final_model")
    assert final.version == "v1" and "latest" in final.aliases and final.type == "model"
    assert {"config.json", "model.safetensors"} <= {f.path for f in final.files()}
    assert final.metadata["train/global_step"] == 4
    assert api.artifact("hf/model-tiny:base_model").version == "v0"


# -- Accelerate ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def acc_launch(tmp_path_factory: pytest.TempPathFactory) -> Job:
    """``accelerate launch`` starts two workers through its torchrun; the script's
    ``Accelerator(cpu=True)`` keeps them on CPU (gloo)."""
    need("accelerate")
    folder = tmp_path_factory.mktemp("acc_launch")
    port = str(free_port())
    cmd = ["accelerate", "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
           "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", port,
           str(SCRIPTS / "wandb_accelerate.py")]  # fmt: skip
    return shimmed([*cmd, str(folder)], folder, RANKWISE_DIR=str(folder / "d"))


@pytest.fixture(scope="module")
def acc_torchrun(tmp_path_factory: pytest.TempPathFactory) -> Job:
    need("accelerate")
    folder = tmp_path_factory.mktemp("acc_torchrun")
    cmd = [*torchrun(), *TWO, "-m", "rankwise.wandb", str(SCRIPTS / "wandb_accelerate.py")]
    return shimmed([*cmd, str(folder)], folder, RANKWISE_DIR=str(folder / "d"))


@pytest.mark.parametrize("shape", ["acc_launch", "acc_torchrun"])
def test_accelerate_two_ranks_record_the_main_process(
    shape: str, request: pytest.FixtureRequest
) -> None:
    job: Job = request.getfixturevalue(shape)
    both_ranks_shimmed(job)
    (run,) = rankwise.Api(dir=job.folder / "d").runs("accel")
    assert run.id == job.run_id() and run.state == "finished"
    assert (run.group, run.tags, run.config) == ("acc", ["a"], {"lr": 0.1})
    assert [s.label for s in run.streams] == ["rank-0"]  # Accelerate's main process only
    got = [(r["step"], r["loss"], r["rank_seen"]) for r in run.history()]
    want = [(s, v["loss"], v["rank_seen"]) for s, v in enumerate(job.rank(0)["logged"])]
    assert got == want and len(got) == 4
    assert job.rank(1)["logged"][0]["loss"] not in {loss for _, loss, _ in got}


# -- where the shim reaches ------------------------------------------------------------


@pytest.fixture(scope="module")
def children(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """``wandb_children.py`` under the shim, with a ``sitecustomize`` of the user's on
    ``PYTHONPATH`` (the hook must run it too)."""
    folder = tmp_path_factory.mktemp("children")
    user = folder / "user"
    user.mkdir()
    (user / "sitecustomize.py").write_text(
        "import builtins, os\nbuiltins.CHAINED_SITECUSTOMIZE = os.getpid()\n"
    )
    env = clean_env(**FAST)
    shimmed([str(SCRIPTS / "wandb_children.py"), str(folder)], folder,
            PYTHONPATH=os.pathsep.join([str(user), env["PYTHONPATH"]]))  # fmt: skip
    return {p.stem: json.loads(p.read_text()) for p in folder.glob("*.json")}


def test_the_shim_reaches_every_child(children: dict[str, dict[str, Any]]) -> None:
    shimmed_names = ["forkserver", "main", "mp_spawn-0", "mp_spawn-1", "script", "spawn"]
    assert sorted(children) == sorted([*shimmed_names, "unmarked"])
    assert len({c["pid"] for c in children.values()}) == len(children)
    for name in shimmed_names:
        seen = children[name]
        assert (seen["module"], seen["version"], seen["find_spec"]) == (
            "rankwise.wandb", SHIM_VERSION, True
        ), name  # fmt: skip


def test_a_child_without_the_marker_sees_no_wandb(children: dict[str, dict[str, Any]]) -> None:
    seen = children["unmarked"]  # the hook on its path, the marker removed
    assert (seen["module"], seen["version"], seen["find_spec"]) == (None, None, False)


def test_the_users_sitecustomize_still_runs(children: dict[str, dict[str, Any]]) -> None:
    # set by the user's sitecustomize in each process (forkserver's child: its server's)
    for name, seen in children.items():
        assert seen["chained"] is not None, name
        if name != "forkserver":
            assert seen["chained"] == seen["pid"], name


def test_a_failing_shim_never_stops_the_process(tmp_path: Path) -> None:
    """The marker and the hook, but a ``rankwise`` that cannot be imported: one line on
    stderr, and the program runs."""
    broken = tmp_path / "rankwise"
    broken.mkdir()
    (broken / "__init__.py").write_text("raise RuntimeError('broken on purpose')\n")
    env = clean_env(**{MARKER: "1"})
    env["PYTHONPATH"] = os.pathsep.join([HOOK_DIR, str(tmp_path)])
    out = subprocess.run([sys.executable, "-c", "print('ran')"], env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert out.returncode == 0 and out.stdout == "ran\n", out.stderr
    assert "the wandb shim is not installed in this process: broken on purpose" in out.stderr


def test_an_unknown_program_is_named(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "rankwise.wandb", "no-such-launcher", "x"], env=clean_env(),
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode != 0
    assert "'no-such-launcher' is neither a Python script nor a command on PATH" in out.stderr


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
