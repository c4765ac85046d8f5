"""A real 4-process torchrun job (gloo on CPU) uploading to a real server.

Every rank logs into one shared run; the server must hold every point exactly once, and
its cross-rank band must be numpy's mean, min, max and weighted mean over the per-rank
values at every step.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import rankwise
from tests.helpers.runs import FAST_ENV, SCRIPT, assert_same_history
from tests.helpers.servers import ServerProcess, srv_get, subprocess_env

pytestmark = pytest.mark.torchrun

STEPS = 25
WORLD = 4


def test_four_rank_torchrun_band_matches_numpy(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    db = f"sqlite:///{tmp_path / 'db.sqlite'}"
    with ServerProcess.db(db, tmp_path / "server.log") as srv:
        env = subprocess_env(
            **FAST_ENV,
            RANKWISE_DIR=str(data),
            RANKWISE_SERVER=srv.url,
            RANKWISE_RUN_ID="tr4",
            OMP_NUM_THREADS="1",
        )
        cmd = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            f"--nproc-per-node={WORLD}",
            str(SCRIPT),
            "--torch",
            "--steps",
            str(STEPS),
        ]
        out = subprocess.run(
            cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=240
        )
        assert out.returncode == 0, out.stdout + out.stderr
        assert "not uploaded" not in out.stderr, out.stderr

        local = rankwise.Api(dir=data).run("tr4")
        remote = rankwise.Api(server=srv.url).run("tr4")
        assert remote.state == "finished" and len(remote.streams) == WORLD
        assert sorted(s.rank for s in remote.streams) == list(range(WORLD))
        assert_same_history(local, remote, db)  # every point, exactly once

        # The truth, from the stream files: values[rank, step] and their weights.
        values = np.full((WORLD, STEPS), np.nan)
        weights = np.full((WORLD, STEPS), np.nan)
        for row in local.history(keys=["loss"]):
            rank = int(row["label"].split("-")[1])
            values[rank, row["step"]] = row["loss"]
            weights[rank, row["step"]] = row["weight"]
        assert not np.isnan(values).any()

        series = srv_get(srv.url, "/api/v1/projects/up/runs/tr4/series", key="loss")
        band = series["band"]
        assert band["x"] == list(range(STEPS)) and band["n"] == [WORLD] * STEPS
        np.testing.assert_allclose(band["mean"], values.mean(axis=0), rtol=1e-12)
        np.testing.assert_allclose(band["min"], values.min(axis=0), rtol=1e-12)
        np.testing.assert_allclose(band["max"], values.max(axis=0), rtol=1e-12)
        np.testing.assert_allclose(band["std"], values.std(axis=0), rtol=1e-9, atol=1e-12)
        wmean = (values * weights).sum(axis=0) / weights.sum(axis=0)
        np.testing.assert_allclose(band["wmean"], wmean, rtol=1e-12)
        # lr was logged without a weight: its weighted mean is its mean.
        lr = srv_get(srv.url, "/api/v1/projects/up/runs/tr4/series", key="lr")["band"]
        np.testing.assert_allclose(lr["wmean"], lr["mean"], rtol=1e-12)
        assert [len(s["x"]) for s in series["series"]] == [STEPS] * WORLD
