"""W&B scripts with only the import changed, run for real and read back exactly.

The W&B distributed guide's snippets (rank-0 tracking, one run per process with
``group``/``job_type``, the shared run with ``Settings(mode="shared", x_label,
x_primary, x_update_finish_state)`` joined by ``id=``, ``setup()`` + ``Pool``, a run
passed to an ``mp.Process``), a DDP ``all_gather`` script and the MNIST DDP tutorial
flow, under torchrun (2 CPU ranks, gloo), spawn, ``mp.Pool`` and ``mp.Process``.
"""

from __future__ import annotations

import io
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import rankwise
from tests.helpers.env import clean_env, need
from tests.helpers.jobs import FAST, SCRIPTS, torchrun


def run_script(args: list[str], cwd: Path, data: Path, timeout: float = 240) -> str:
    env = clean_env(**FAST, RANKWISE_DIR=str(data))
    env = {k: v for k, v in env.items() if not k.startswith("WANDB_")}
    out = subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout + out.stderr


def ddp(script: str, cwd: Path, data: Path, *args: str) -> str:
    return run_script(
        [*torchrun(), "--standalone", "--nproc-per-node=2", str(SCRIPTS / script), *args],
        cwd, data,
    )  # fmt: skip


def values(run: rankwise.RunInfo, label: str | None = None) -> list[dict[str, Any]]:
    return [
        {k: v for k, v in row.items() if k not in ("time", "label")}
        for row in run.history(label=label)
    ]


@pytest.mark.torchrun
def test_rank0_tracking_records_rank_0_only(tmp_path: Path) -> None:
    data = tmp_path / "data"
    out = ddp("wandb_rank0.py", tmp_path, data)
    path = re.search(r"RUN (\S+)", out)
    assert path is not None and path.group(1).startswith("my-team/guide/")
    api = rankwise.Api(dir=data)
    (run,) = api.runs("guide")
    assert f"my-team/guide/{run.id}" == path.group(1)
    assert run.state == "finished" and [s.label for s in run.streams] == ["rank-0"]
    assert run.config["lr"] == 0.01 and run.config["world"] == 2
    assert run.config["_wandb"] == {"entity": "my-team"}
    rows = values(run)
    assert [r["step"] for r in rows] == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
    assert [r["step_no"] for r in rows if "step_no" in r] == [0, 1, 2, 3, 4]
    assert len([r for r in rows if "rank_loss" in r]) == 5  # rank 1's wandb.log: a no-op


@pytest.mark.torchrun
def test_one_run_per_process_with_group_and_job_type(tmp_path: Path) -> None:
    data = tmp_path / "data"
    out = ddp("wandb_per_process.py", tmp_path, data, "--group", "exp-1")
    ids = dict(re.findall(r"RUN (\d) ([0-9a-z]{8})", out))
    api = rankwise.Api(dir=data)
    runs = {r.id: r for r in api.runs("guide", group="exp-1")}
    assert sorted(runs) == sorted(ids.values()) and len(runs) == 2
    for rank, run_id in ids.items():
        run = runs[run_id]
        assert run.job_type == ("main" if rank == "0" else "worker")
        assert run.config["rank"] == int(rank) and run.state == "finished"
        assert [s.label for s in run.streams] == [f"rank-{rank}"]
        assert values(run) == [{"step": i, "x": int(rank) * 10 + i} for i in range(3)]


@pytest.mark.torchrun
def test_the_shared_run_has_a_stream_per_rank(tmp_path: Path) -> None:
    data = tmp_path / "data"
    out = ddp("wandb_shared.py", tmp_path, data)
    run_id = re.search(r"RUN (\S+)", out).group(1)
    run = rankwise.Api(dir=data).run(run_id, "guide-shared")
    assert run.state == "finished"
    streams = {s.label: s for s in run.streams}
    assert sorted(streams) == ["rank_0", "rank_1"]
    assert streams["rank_0"].is_primary and not streams["rank_1"].is_primary
    assert run.config["epochs"] == 3  # from the x_primary process only
    for rank in (0, 1):
        assert values(run, f"rank_{rank}") == [
            {"step": e, "loss": 1.0 / (e + 1) + rank, "epoch": e} for e in range(3)
        ]


@pytest.mark.torchrun
def test_ddp_all_gather_logged_from_rank_0(tmp_path: Path) -> None:
    data = tmp_path / "data"
    out = ddp("wandb_ddp_allgather.py", tmp_path, data, "--steps", "6")
    run_id = re.search(r"RUN (\S+)", out).group(1)
    run = rankwise.Api(dir=data).run(run_id, "ddp-allgather")
    assert run.state == "finished" and run.group == "DDP" and run.config["steps"] == 6
    rows = [r for r in values(run) if "loss" in r]
    assert [r["step"] for r in rows] == [0, 1, 2, 3, 4, 5] == [r["step"] for r in rows]
    assert all(r["loss"] > 0 and r["rank0_loss"] > 0 for r in rows)
    assert any(abs(r["loss"] - r["rank0_loss"]) > 1e-6 for r in rows)  # the mean of both ranks
    grads = run.histograms("gradients/module.0.weight")  # run.watch(log_freq=2): W&B's keys
    assert grads["rank-0"].steps.tolist() == [1, 3, 5]
    assert grads["rank-0"].counts.shape == (3, 64)


@pytest.mark.torchrun
def test_the_mnist_ddp_tutorial_flow(tmp_path: Path) -> None:
    data = tmp_path / "data"
    out = ddp("wandb_mnist_ddp.py", tmp_path, data, "--epochs", "2")
    found = re.search(r"RUN (\S+) (\S+)", out)
    assert found is not None
    run = rankwise.Api(dir=data).run(found.group(1), "mnist-ddp")
    assert run.state == "finished" and [s.label for s in run.streams] == ["rank-0"]
    assert run.config["_wandb"] == {"entity": "flyte"}
    assert {k: run.config[k] for k in ("epochs", "batch_size", "lr", "log_interval")} == {
        "epochs": 2, "batch_size": 16, "lr": 1.0, "log_interval": 10
    }  # fmt: skip
    rows = values(run)
    # 600 samples a rank / 16 = 38 batches; loss every 10th: 4 rows an epoch, then the test row
    assert [r["step"] for r in rows] == list(range(10))
    assert [sorted(r) for r in rows[3:5]] == [["epoch", "loss", "step"],
                                              ["accuracy", "step", "test_loss"]]  # fmt: skip
    assert [r["epoch"] for r in rows if "loss" in r] == [1] * 4 + [2] * 4
    assert rows[-1]["accuracy"] == pytest.approx(float(found.group(2)))
    table = run.table("mnist_predictions")
    assert table.step == 9 and len(table.data) == 16
    assert table.columns == ["id", "image", "guess", "truth", *[f"score_{d}" for d in range(10)]]
    assert table.get_column("id")[:3] == ["0_0", "1_0", "2_0"]
    assert all(isinstance(c, rankwise.Image) for c in table.get_column("image"))
    # The tutorial's normalised digits (about -0.42 .. 2.82) span 0..255, not black.
    np, pil = need("numpy"), need("PIL.Image")
    for cell in table.get_column("image"):
        with pil.open(io.BytesIO(cell.png())) as im:
            px = np.asarray(im)
        assert (int(px.min()), int(px.max())) == (0, 255), px
    assert all(abs(sum(row[4:]) - 1.0) < 1e-4 for row in table.data)
    assert [m.steps for m in run.media_keys() if m.key == "mnist_predictions"] == [[4, 9]]


def test_setup_and_a_pool_of_workers_each_with_its_own_run(tmp_path: Path) -> None:
    data = tmp_path / "data"
    out = run_script([sys.executable, str(SCRIPTS / "wandb_pool.py"), "spawn"], tmp_path, data)
    ids = re.search(r"RUNS (.+)", out).group(1).split()
    api = rankwise.Api(dir=data)
    assert len(set(ids)) == 4
    for n, run_id in enumerate(ids):
        run = api.run(run_id, "guide-pool")
        assert run.state == "finished" and run.config["n"] == n
        assert values(run) == [{"step": 0, "this": n * n}]


@pytest.mark.parametrize("method", ["spawn", "fork"])
def test_a_run_passed_to_a_child_process_gets_its_stream(tmp_path: Path, method: str) -> None:
    data = tmp_path / "data"
    script = str(SCRIPTS / "wandb_process.py")
    out = run_script([sys.executable, script, method], tmp_path, data)
    run_id = re.search(r"RUN (\S+)", out).group(1)
    run = rankwise.Api(dir=data).run(run_id, "guide-process")
    assert run.state == "finished"
    labels = sorted(s.label for s in run.streams)
    assert len(labels) == 3 and labels[0] == "rank-0"
    assert all(re.fullmatch(r"rank-0-child-\d+", lab) for lab in labels[1:])
    # The children are rank 0's processes, not ranks of their own: "1 x 1", one rank.
    assert (run.run_ranks, run.run_nodes, run.world_size) == (1, 1, 1)
    assert run.label == "rank-0"
    assert all(s.state == "finished" for s in run.streams)
    assert [s.is_primary for s in run.streams if s.label == "rank-0"] == [True]
    assert values(run, "rank-0") == [
        {"step": 0, "parent_metric": 0},
        {"step": 1, "parent_metric": 1},
    ]
    children = [values(run, lab) for lab in labels[1:]]
    assert sorted(children, key=str) == sorted(
        [
            [{"step": 0, "child_metric": 1}, {"step": 1, "child_metric": 2}],
            [{"step": 0, "init_child_metric": 3}],
        ],
        key=str,
    )
