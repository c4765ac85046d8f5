"""A W&B script with ``sync_tensorboard=True`` and a ``SummaryWriter``, run under
``python -m rankwise.wandb`` on 2 torchrun ranks: every scalar it wrote is in the run,
per rank (tests/scripts/wandb_tensorboard.py)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import rankwise
from tests.helpers.env import clean_env, need
from tests.helpers.jobs import FAST, SCRIPTS, torchrun

pytestmark = pytest.mark.torchrun
need("tensorboard")


def test_every_scalar_a_rank_wrote_is_in_the_shared_run(tmp_path: Path) -> None:
    data, logs = tmp_path / "data", tmp_path / "runs"
    env = {k: v for k, v in clean_env(**FAST, RANKWISE_DIR=str(data)).items()
           if not k.startswith("WANDB_")}  # fmt: skip
    cmd = [sys.executable, "-m", "rankwise.wandb", *torchrun(), "--standalone",
           "--nproc-per-node=2", str(SCRIPTS / "wandb_tensorboard.py"), str(logs)]  # fmt: skip
    out = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=240)
    text = out.stdout + out.stderr
    assert out.returncode == 0, text
    assert "sync_tensorboard" not in text  # no "ignored" warning any more
    run_id = re.search(r"RUN (\S+)", text).group(1)
    run = rankwise.Api(dir=data).run(run_id, "tbwb")
    assert run.state == "finished"
    assert sorted(s.label for s in run.streams) == ["rank_0", "rank_1"]
    for rank in (0, 1):
        got = [
            (r["step"], r.get("train/loss"), r.get("eval/acc"))
            for r in run.history(["train/loss", "eval/acc"], label=f"rank_{rank}")
        ]
        loss = [(s, 10.0 * rank + s / 2) for s in range(5)]
        acc = [(s, rank + s / 8) for s in range(5)]
        assert [(s, v) for s, v, _ in got if v is not None] == loss
        assert [(s, v) for s, _, v in got if v is not None] == acc
    assert list((logs / "rank_1").glob("*tfevents*"))  # the event files are still written
