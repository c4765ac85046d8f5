"""``@rankwise.track`` under a real 3-process torchrun job (CPU, one node).

The run modes' table is spelled out here (as the Flyte W&B plugin states it), not taken
from ``rankwise.sdk.modes``: which ranks record, each run's id and group, ``None`` from
``get_run()`` elsewhere; the value returned on every rank; nested calls sharing the outer
run; an exception ending every stream *failed* with its traceback and propagating.
"""

from __future__ import annotations

import json
import re
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

import rankwise
from rankwise.stream import records as R
from rankwise.stream import scan
from tests.helpers.env import free_port
from tests.helpers.jobs import SCRIPTS, job_env, run_together, torchrun

pytestmark = pytest.mark.torchrun

WORLD = 3


def _by_case(report: Path) -> dict[str, dict[int, dict[str, Any]]]:
    out: dict[str, dict[int, dict[str, Any]]] = {}
    for line in report.read_text().splitlines():
        row = json.loads(line)
        out.setdefault(row["case"], {})[row["rank"]] = row
    return out


def test_track_under_torchrun(tmp_path: Path) -> None:
    data, report = tmp_path / "data", tmp_path / "report.jsonl"
    job = subprocess.run(
        [*torchrun(), "--standalone", f"--nproc-per-node={WORLD}", str(SCRIPTS / "track_job.py"),
         "--dir", str(data), "--report", str(report)],
        env=job_env(RANKWISE_PROJECT="track"), cwd=tmp_path, capture_output=True, text=True,
        timeout=240,
    )  # fmt: skip
    assert job.returncode == 0, job.stdout + job.stderr
    cases = _by_case(report)
    # Each run's primary said once where to see it ("View run at"): one line per run
    # (auto 2, shared 2, new 2 x 3 ranks, the nested and the failing call).
    # (Ranks share the terminal: lines may run into each other, so they are found, not split.)
    said = re.findall(r"rankwise: run track/(\S+) in \S+; see it with: rankwise ui", job.stderr)
    assert len(said) == len(set(said)) == 12, job.stderr
    api = rankwise.Api(dir=data)
    ranks = range(WORLD)

    # auto: global rank 0 alone records (worker scope on one node: its local rank 0).
    for scope, label in (("global", "rank-0"), ("worker", "worker-0-rank-0")):
        seen = cases[f"auto/{scope}"]
        assert [seen[r]["run"] is None for r in ranks] == [False, True, True]
        run = api.run(seen[0]["run"]["id"], project="track")
        assert run.id == run.base_id and run.group is None  # {base}
        assert [s.label for s in run.streams] == [label]
        assert run.state == "finished" and run.config == {"mode": "auto", "scope": scope}

    # shared: every rank records into one run {base}.
    for scope, label in (("global", "rank-{}"), ("worker", "worker-0-rank-{}")):
        seen = cases[f"shared/{scope}"]
        ids = {seen[r]["run"]["id"] for r in ranks}
        assert len(ids) == 1
        run = api.run(ids.pop(), project="track")
        assert run.id == run.base_id and run.group is None
        assert [s.label for s in run.streams] == [label.format(r) for r in ranks]
        assert [s.state for s in run.streams] == ["finished"] * WORLD
        rows = run.history(keys=["x"])
        assert sorted(r["x"] for r in rows) == [7.0, 8.0, 9.0]

    # new: each rank its own run {base}-rank-{rank}, grouped under {base}.
    for scope in ("global", "worker"):
        seen = cases[f"new/{scope}"]
        runs = [api.run(seen[r]["run"]["id"], project="track") for r in ranks]
        base = runs[0].base_id
        assert [r.id for r in runs] == [f"{base}-rank-{r}" for r in ranks]
        assert {r.group for r in runs} == {base}
        assert all(r.state == "finished" and len(r.streams) == 1 for r in runs)

    # Each call was its own run; the value came back on every rank, the run ended.
    bases = {
        cases[f"{m}/{s}"][0]["run"]["id"] for m in ("auto", "shared") for s in ("global", "worker")
    }
    assert len(bases) == 4
    for mode in ("auto", "shared", "new"):
        for scope in ("global", "worker"):
            after = cases[f"{mode}/{scope}:after"]
            assert [after[r]["returned"] for r in ranks] == [70 + r for r in ranks]
            assert [after[r]["run"] for r in ranks] == [None] * WORLD  # get_run() after it
            assert not any(after[r]["current"] for r in ranks)  # rankwise.run is None

    # Nested: the inner calls ran in the outer run and did not finish it.
    outer_id = cases["nested:outer"][0]["run"]["id"]
    assert all(cases["nested:inner"][r]["run"]["id"] == outer_id for r in ranks)
    assert all(cases["nested:outer"][r]["state"] == "running" for r in ranks)
    assert cases["nested:result"][0]["returned"] == ["inner-done", "inner-done"]
    nested = api.run(outer_id, project="track")
    assert nested.state == "finished"
    rows = nested.history(label="rank-2")
    assert [(r["step"], r.get("inner"), r.get("outer")) for r in rows] == [
        (0, 0.0, None),
        (1, 1.0, None),
        (2, None, 1.0),
    ]

    # An exception: every stream failed, with its own traceback; it propagated.
    caught = cases["boom:caught"]
    assert [caught[r]["error"] for r in ranks] == [f"boom on rank {r}" for r in ranks]
    failed = api.run(cases["boom"][0]["run"]["id"], project="track")
    assert failed.state == "failed"
    for s in failed.streams:
        assert s.state == "failed" and s.exit_code == 1 and s.error_type == "ValueError"
        assert s.error_message == f"boom on rank {s.rank}"
        assert s.traceback is not None and 'raise ValueError(f"boom on rank {rank}")' in s.traceback
    assert failed.first_failure is not None and failed.first_failure.error_type == "ValueError"
    for s in failed.streams:  # and in each rank's Logs, as an uncaught one's would be
        logged = [
            line
            for rec in scan(Path(s.path).read_bytes()).records
            if isinstance(rec, R.Console) and rec.stream == "stderr"
            for line in rec.lines
        ]
        assert f"ValueError: boom on rank {s.rank}" in logged, logged


def test_track_worker_scope_on_two_nodes(tmp_path: Path) -> None:
    """Two torchrun launches (--nnodes=2, 2 processes each, c10d rendezvous): worker
    scope is where nodes differ — a run per node (auto: its local rank 0 alone), or a run
    per rank grouped per node (new)."""
    data, report = tmp_path / "data", tmp_path / "report.jsonl"
    port, rdzv_id = free_port(), f"rw-{uuid.uuid4().hex[:8]}"
    script = [str(SCRIPTS / "track_job.py"), "--dir", str(data), "--report", str(report)]
    rdzv = ["--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}", f"--rdzv-id={rdzv_id}"]
    launch = [*torchrun(), "--nnodes=2", "--nproc-per-node=2", *rdzv]
    run_together(
        [[*launch, f"--node-rank={node}", *script, "--worker-only"] for node in range(2)],
        tmp_path,
    )
    cases = _by_case(report)
    api = rankwise.Api(dir=data)
    everyone = list(cases["auto/worker"].values())
    assert sorted((r["node"], r["local"]) for r in everyone) == [(0, 0), (0, 1), (1, 0), (1, 1)]

    auto = {(r["node"], r["local"]): r["run"] for r in cases["auto/worker"].values()}
    assert auto[(0, 1)] is None and auto[(1, 1)] is None
    base = api.run(auto[(0, 0)]["id"], project="track").base_id
    for node in (0, 1):
        assert auto[(node, 0)] == {
            "id": f"{base}-worker-{node}", "label": f"worker-{node}-rank-0", "group": base
        }  # fmt: skip
        run = api.run(f"{base}-worker-{node}", project="track")
        assert [s.label for s in run.streams] == [f"worker-{node}-rank-0"]

    shared = list(cases["shared/worker"].values())
    base = api.run(shared[0]["run"]["id"], project="track").base_id
    for r in shared:
        assert r["run"] == {
            "id": f"{base}-worker-{r['node']}", "group": base,
            "label": f"worker-{r['node']}-rank-{r['local']}",
        }  # fmt: skip
    for node in (0, 1):
        run = api.run(f"{base}-worker-{node}", project="track")
        assert [s.label for s in run.streams] == [f"worker-{node}-rank-{i}" for i in (0, 1)]
        assert run.state == "finished"

    new = list(cases["new/worker"].values())
    base = api.run(new[0]["run"]["id"], project="track").base_id
    for r in new:
        node, local = r["node"], r["local"]
        assert r["run"]["id"] == f"{base}-worker-{node}-rank-{local}"
        assert r["run"]["group"] == f"{base}-worker-{node}"
    for mode in ("auto", "shared", "new"):
        after = cases[f"{mode}/worker:after"].values()
        assert all(r["returned"] == 70 + r["rank"] and r["run"] is None for r in after)
