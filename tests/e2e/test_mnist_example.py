"""``examples/ddp_mnist_tutorial.py`` under torchrun (2 gloo CPU ranks, 2 epochs), read
back with ``Api(dir=)``: one shared run of both ranks, ``test_loss`` and ``accuracy`` per
epoch from each rank, and each rank's predictions table ``(id, image, guess, truth,
score_0 ... score_9)`` per epoch with its images, console lines from every rank. Then the
primary's artifacts (the model and the accuracies), evaluated by
``examples/ddp_mnist_eval.py`` with lineage. ``make demo`` runs this example: a test
reads the Makefile's recipe (``make -n``) to keep it so."""

from __future__ import annotations

import json
import math
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import rankwise
from rankwise.stream import records as R
from rankwise.stream.frames import scan
from tests.helpers.env import REPO, clean_env
from tests.helpers.jobs import torchrun

pytestmark = pytest.mark.torchrun

EXAMPLE = REPO / "examples" / "ddp_mnist_tutorial.py"
EVAL = REPO / "examples" / "ddp_mnist_eval.py"
EPOCHS = 2
LABELS = ["rank-0", "rank-1"]


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mnist") / "data"


@pytest.fixture(scope="module")
def run(root: Path) -> rankwise.RunInfo:
    cmd = [*torchrun(), "--standalone", "--nproc-per-node=2", str(EXAMPLE),
           "--epochs", str(EPOCHS), "--run-id", "tutorial", "--watch-freq", "5",
           "--batch-size", "16"]  # fmt: skip
    env = clean_env(RANKWISE_DIR=str(root), RANKWISE_FLUSH_INTERVAL="0.05")
    out = subprocess.run(cmd, env=env, cwd=root.parent, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "run mnist-tutorial/tutorial:" in out.stdout
    return rankwise.Api(dir=root).run("tutorial", project="mnist-tutorial")


def test_one_shared_run_with_test_metrics_per_epoch(run: rankwise.RunInfo) -> None:
    assert run.state == "finished"
    assert run.run_ranks == 2
    rows = run.history(["test_loss", "accuracy"])
    for label in LABELS:
        mine = [r for r in rows if r["label"] == label]
        assert len(mine) == EPOCHS, mine
        for r in mine:
            assert 0.0 <= r["accuracy"] <= 1.0
            assert math.isfinite(r["test_loss"]) and r["test_loss"] > 0
    # Two epochs of Adadelta on the digits: better than chance by far.
    assert max(r["accuracy"] for r in rows) > 0.5
    assert any(r["label"] == "rank-1" for r in run.history(["train/loss"]))


def test_predictions_table_per_rank(run: rankwise.RunInfo) -> None:
    cols = ["id", "image", "guess", "truth", *[f"score_{i}" for i in range(10)]]
    steps = sorted({r["step"] for r in run.history(["accuracy"])})
    ids: dict[str, set[int]] = {}
    for label in LABELS:
        table = run.table("predictions", label=label)
        assert table.columns == cols
        assert len(table.data) == 64  # --table-batches 2 of --test-batch-size 32
        df = table.get_dataframe()
        assert df["guess"].between(0, 9).all() and df["truth"].between(0, 9).all()
        scores = df[[f"score_{i}" for i in range(10)]].sum(axis=1)
        assert scores.between(0.999, 1.001).all()  # softmax rows
        ids[label] = set(df["id"])
        first = run.table("predictions", step=steps[0], label=label)
        assert len(first.data) == 64
    # DistributedSampler: each rank its own shard of the test set.
    assert not ids["rank-0"] & ids["rank-1"]


def test_gallery_images_read_back(run: rankwise.RunInfo) -> None:
    items = run.media("examples", label="rank-0")
    assert len(items) == 16 * EPOCHS
    first = items[0]
    assert first.kind == "image" and first.format == "png"
    assert first.caption is not None and first.caption.startswith("id ")
    assert first.read()[:8] == b"\x89PNG\r\n\x1a\n"


def test_watch_gradients_on_every_rank(run: rankwise.RunInfo) -> None:
    # run.watch(model, ranks="all", log_freq=5): each rank's own gradient histograms and
    # the gradient norms as plain metrics.
    keys = [k.key for k in run.media_keys() if k.kind == "histogram"]
    fc1 = [k for k in keys if k.startswith("gradients/") and k.endswith("fc1.weight")]
    assert len(fc1) == 1, keys
    series = run.histograms(fc1[0])
    assert sorted(series) == LABELS
    for s in series.values():
        assert len(s.steps) >= 2
        assert s.counts.shape == (len(s.steps), 64)
    norms = run.history(["grad_norm/total"])
    assert {r["label"] for r in norms} == set(LABELS)


def test_model_and_accuracies_artifacts_then_evaluated(root: Path, run: rankwise.RunInfo) -> None:
    logged = {a.name: a for a in run.logged_artifacts()}
    assert sorted(logged) == ["mnist-accuracies", "mnist-cnn"]  # the primary's only
    model = logged["mnist-cnn"]
    assert model.type == "model" and model.version == "v0"
    assert model.aliases == ["final", "latest"]
    assert [e.path for e in model.files()] == ["model.pt"] and model.size > 10_000
    assert model.info is not None and model.info.label == "rank-0"
    acc = logged["mnist-accuracies"]
    got = json.loads(Path(acc.download(root.parent / "acc"), "accuracies.json").read_text())
    assert len(got["epoch_accuracy"]) == EPOCHS and acc.metadata == {"epochs": EPOCHS}

    env = clean_env(RANKWISE_DIR=str(root), RANKWISE_SYSTEM="0")
    out = subprocess.run(
        [sys.executable, str(EVAL)], env=env, cwd=root.parent, capture_output=True,
        text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    api = rankwise.Api(dir=root)
    [evaluation] = api.runs(project="mnist-tutorial", job_type="eval")
    used = sorted(a.qualified_name for a in evaluation.used_artifacts())
    assert used == ["mnist-tutorial/mnist-accuracies:v0", "mnist-tutorial/mnist-cnn:v0"]
    # The same weights: the evaluation's accuracy over the whole test set is the one the
    # ranks reported together after the last epoch.
    assert evaluation.summary["eval/accuracy"] == pytest.approx(got["epoch_accuracy"][-1])
    version = api.artifact("mnist-tutorial/mnist-cnn:final")
    assert version.info is not None and version.info.run_id == "tutorial"
    assert [u.run_id for u in version.info.used_by] == [evaluation.id]


def test_every_rank_prints_a_console_line_per_epoch(root: Path, run: rankwise.RunInfo) -> None:
    assert run.state == "finished"
    lines: dict[str, list[str]] = {}
    for path in (root / "mnist-tutorial" / "tutorial" / "streams").glob("*.rwlog"):
        for rec in scan(path.read_bytes()).records:
            if type(rec) is R.Console and rec.stream == "stdout":
                lines.setdefault(path.stem.split(".")[0], []).extend(rec.lines)
    for rank, label in enumerate(LABELS):
        epochs = [line for line in lines.get(label, []) if line.startswith("epoch ")]
        assert len(epochs) == EPOCHS, lines
        assert all(f"rank {rank} test loss" in line for line in epochs), epochs


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_make_demo_trains_this_example_under_torchrun() -> None:
    """`make demo` shows every tab: it must run this example (asserted above) on 2 ranks."""
    # Run as `make test` runs the suite: without the parent make's MAKEFLAGS/MAKELEVEL,
    # which would add "make[1]: Entering directory" lines to the recipe.
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    out = subprocess.run(
        ["make", "--no-print-directory", "-n", "demo"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    recipe = out.stdout.replace("\\\n", " ")
    train = next(line for line in recipe.splitlines() if "torchrun" in line)
    argv = shlex.split(train)
    assert "--nproc-per-node=2" in argv and "examples/ddp_mnist_tutorial.py" in argv
    run_id = argv[argv.index("--run-id") + 1]
    assert "rankwise show --dir " in recipe and recipe.rstrip().splitlines()[-1].split()[1] == "ui"
    assert f"--project mnist-tutorial {run_id}" in recipe
