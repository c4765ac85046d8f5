"""``run.watch(ranks="all")`` in a real 2-rank torchrun DDP job (gloo), one shared run.

Read back with ``Api(dir=)``: each rank's gradient histograms and grad-norm scalars are
its own, from before DDP's all-reduce (rank 1, fed inputs ×10, differs; the averaged
gradient is the same on both), while parameter histograms agree (DDP keeps the weights
in sync); the probe watched with ``ranks="primary"`` is on rank 0 only.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import rankwise
from tests.helpers.env import need
from tests.helpers.jobs import SCRIPTS, job_env, torchrun

need("torch")


def per_rank(run: rankwise.RunInfo, key: str) -> dict[str, Any]:
    found = run.histograms(key)
    assert isinstance(found, dict)
    return found


@pytest.mark.torchrun
def test_every_rank_records_its_own_gradients_in_a_shared_run(tmp_path: Path) -> None:
    data = tmp_path / "data"
    job = subprocess.run(
        [*torchrun(), "--standalone", "--nproc-per-node=2", str(SCRIPTS / "watch_job.py"),
         "--dir", str(data)],
        env=job_env(), cwd=tmp_path, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert job.returncode == 0, job.stdout + job.stderr
    run = rankwise.Api(dir=data).run("ddp", project="watch")
    assert run.state == "finished"

    grads = per_rank(run, "gradients/module.0.weight")
    assert sorted(grads) == ["rank-0", "rank-1"]
    g0, g1 = grads["rank-0"], grads["rank-1"]
    assert g0.steps.tolist() == g1.steps.tolist() == [1, 3, 5]  # the same passes on both
    assert g0.counts.shape == (3, 64) and g0.edges.shape == (3, 65)
    assert (g0.counts.sum(axis=1) == 16 * 8).all() and (g1.counts.sum(axis=1) == 16 * 8).all()
    # rank 1's local gradients are wider: ×10 inputs
    assert (g1.edges[:, -1] - g1.edges[:, 0] > 3 * (g0.edges[:, -1] - g0.edges[:, 0])).all()

    params = per_rank(run, "parameters/module.0.weight")
    assert np.array_equal(params["rank-0"].edges, params["rank-1"].edges)
    assert np.array_equal(params["rank-0"].counts, params["rank-1"].counts)

    rows: dict[str, dict[int, dict[str, Any]]] = {"rank-0": {}, "rank-1": {}}
    for label, by_step in rows.items():
        for r in run.history(label=label):  # the watch's record and log()'s, merged by step
            by_step.setdefault(r["step"], {}).update(r)
    for step in (1, 3, 5):
        n0 = rows["rank-0"][step]["grad_norm/module.0.weight"]
        n1 = rows["rank-1"][step]["grad_norm/module.0.weight"]
        synced = rows["rank-0"][step]["synced_norm"]
        assert synced == rows["rank-1"][step]["synced_norm"]  # after the all-reduce
        assert n1 > 3 * n0 and n0 != synced and n1 != synced  # before it: each rank's own
        for label in ("rank-0", "rank-1"):
            row = rows[label][step]
            parts = [v for k, v in row.items() if k.startswith("grad_norm/module.")]
            assert len(parts) == 4
            assert row["grad_norm/total"] == pytest.approx(np.sqrt(np.sum(np.square(parts))))
    assert "grad_norm/total" not in rows["rank-0"][0]

    probe = per_rank(run, "gradients/graph_1weight")
    assert sorted(probe) == ["rank-0"]  # ranks="primary"
    assert "grad_norm/graph_1total" in rows["rank-0"][1]
    assert "grad_norm/graph_1total" not in rows["rank-1"][1]
