"""Artifacts from a real 4-rank torchrun job (gloo, CPU), all logging one name at once.

Four ranks log ``ckpt`` with their own content after a barrier: four distinct versions,
each holding the file of the rank that logged it. They log ``shared`` with identical
bytes: one version. Each then uses ``ckpt:v0``: four lineage records, one per rank.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

import rankwise
from rankwise.artifacts.local import LocalArtifacts
from tests.helpers.env import need
from tests.helpers.jobs import SCRIPTS, job_env, torchrun

need("torch")

RANKS = 4


@pytest.mark.torchrun
def test_four_ranks_log_one_name_at_once(tmp_path: Path) -> None:
    data, report = tmp_path / "data", tmp_path / "report"
    report.mkdir()
    job = subprocess.run(
        [*torchrun(), "--standalone", f"--nproc-per-node={RANKS}",
         str(SCRIPTS / "artifact_job.py"), "--dir", str(data), "--report", str(report)],
        env=job_env(), cwd=tmp_path, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert job.returncode == 0, job.stdout + job.stderr
    seen = [json.loads((report / f"rank-{r}.json").read_text()) for r in range(RANKS)]
    assert sorted(s["ckpt"] for s in seen) == [f"v{i}" for i in range(RANKS)]
    assert {s["shared"] for s in seen} == {"v0"}  # identical content: one version

    store = LocalArtifacts(data, "arts")
    versions = store.versions("ckpt")
    assert len(versions) == RANKS
    labels = set()
    for info in versions:
        full = store.resolve("ckpt", info.version)
        assert full.manifest is not None
        [entry] = full.manifest.entries
        with store.open_file(entry.digest) as f:
            content = f.read()
        rank = info.metadata["rank"]
        assert content == f"rank {rank} ".encode() * 100_000  # nothing lost or mixed
        assert info.label == f"rank-{rank}" and f"from-rank-{rank}" in info.aliases
        labels.add(info.label)
    assert len(labels) == RANKS
    assert [v.version for v in store.versions("shared")] == ["v0"]

    v0 = store.resolve("ckpt", "v0")
    assert sorted(u.label or "" for u in v0.used_by) == [f"rank-{r}" for r in range(RANKS)]
    first = v0.metadata["rank"]
    assert {s["v0_first_bytes"] for s in seen} == {(f"rank {first} " * 2)[:8]}

    run = rankwise.Api(dir=data).run("job", project="arts")
    assert run.state == "finished"
    assert sorted(a.version for a in run.logged_artifacts() if a.name == "ckpt") == [
        f"v{i}" for i in range(RANKS)
    ]
    assert [a.qualified_name for a in run.used_artifacts()] == ["arts/ckpt:v0"]
