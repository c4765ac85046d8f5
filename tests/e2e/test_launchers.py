"""Real launchers: torchrun (single- and multi-node), restarts, failing ranks, mp.spawn.

Every job runs ``tests/scripts/rank_worker.py`` (or ``spawn_job.py``) in real processes
and is checked from the outside only: the JSON each rank reports about its ``Run`` and
what ``rankwise.Api(dir=...)`` reads back from the stream files. The expected run ids,
groups and labels come from the table of issue 2 (``tests/helpers/jobs.py``), not from
``rankwise.sdk.modes``.
"""

from __future__ import annotations

import json
import sys
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import rankwise
from tests.helpers.env import free_port
from tests.helpers.jobs import (
    MODES,
    PROJECT,
    SCRIPTS,
    STEPS,
    check_job,
    reports,
    run_job,
    run_together,
    torchrun,
    worker_args,
)
from tests.helpers.wait import wait_until

# -- torchrun, one node --------------------------------------------------------------


@pytest.mark.torchrun
@pytest.mark.parametrize(("mode", "scope"), MODES)
def test_torchrun_single_node(tmp_path: Path, mode: str, scope: str) -> None:
    data, report = tmp_path / "data", tmp_path / "report"
    run_job(
        [
            *torchrun(),
            "--standalone",
            "--nproc-per-node=2",
            *worker_args(data, report, "--mode", mode, "--scope", scope, "--pg", "before"),
        ],
        tmp_path,
    )
    check_job(data, reports(report), mode, scope, nodes=1, nproc=2)


@pytest.mark.torchrun
def test_torchrun_init_before_process_group_four_ranks(tmp_path: Path) -> None:
    """rankwise.init() before init_process_group: the agent's store alone agrees the id."""
    data, report = tmp_path / "data", tmp_path / "report"
    run_job(
        [
            *torchrun(),
            "--standalone",
            "--nproc-per-node=4",
            *worker_args(data, report, "--mode", "shared", "--pg", "after"),
        ],
        tmp_path,
    )
    check_job(data, reports(report), "shared", "global", nodes=1, nproc=4)


@pytest.mark.torchrun
def test_two_torchrun_launches_never_collide(tmp_path: Path) -> None:
    """Two launches at the same time, same script, same data dir: two runs."""
    data = tmp_path / "data"
    run_together(
        [
            [
                *torchrun(),
                "--standalone",
                "--nproc-per-node=2",
                *worker_args(data, tmp_path / f"report{i}", "--mode", "shared"),
            ]
            for i in range(2)
        ],
        tmp_path,
    )
    ids = [{r["id"] for r in reports(tmp_path / f"report{i}")} for i in range(2)]
    assert all(len(s) == 1 for s in ids), ids
    assert ids[0] != ids[1]
    runs = rankwise.Api(dir=data).runs(project=PROJECT)
    assert sorted(r.id for r in runs) == sorted(s.pop() for s in ids)
    for run in runs:
        assert run.state == "finished"
        assert sorted(s.label for s in run.streams) == ["rank-0", "rank-1"]
        assert len(run.history(["value"])) == 2 * STEPS


# -- torchrun, two nodes on localhost --------------------------------------------------


def launch_two_nodes(tmp_path: Path, mode: str, scope: str) -> list[dict[str, Any]]:
    data, report = tmp_path / "data", tmp_path / "report"
    port, rdzv_id = free_port(), f"rw-{uuid.uuid4().hex[:8]}"
    run_together(
        [
            [
                *torchrun(),
                "--nnodes=2",
                f"--node-rank={node}",
                "--nproc-per-node=2",
                "--rdzv-backend=c10d",
                f"--rdzv-endpoint=127.0.0.1:{port}",
                f"--rdzv-id={rdzv_id}",
                *worker_args(data, report, "--mode", mode, "--scope", scope, "--pg", "before"),
            ]
            for node in range(2)
        ],
        tmp_path,
    )
    return reports(report)


# Worker scope is where two nodes differ from one; global scope is named as on one node,
# so one global case (the common one) is enough to keep the suite short on 2 cores.
TWO_NODE_MODES = [("shared", "global"), ("auto", "worker"), ("shared", "worker"), ("new", "worker")]


@pytest.mark.torchrun
@pytest.mark.parametrize(("mode", "scope"), TWO_NODE_MODES)
def test_torchrun_two_nodes(tmp_path: Path, mode: str, scope: str) -> None:
    """Two torchrun launches (--nnodes=2, c10d rendezvous) agree on one base id."""
    found = launch_two_nodes(tmp_path, mode, scope)
    # The c10d rendezvous numbers the nodes itself (--node-rank is a hint): each launch
    # must still be exactly one node, with its own local ranks.
    seen = {(r["node_rank"], r["local_rank"]) for r in found}
    assert seen == {(0, 0), (0, 1), (1, 0), (1, 1)}
    check_job(tmp_path / "data", found, mode, scope, nodes=2, nproc=2)
    if scope == "worker" and mode != "new":
        runs = rankwise.Api(dir=tmp_path / "data").runs(project=PROJECT)
        assert len(runs) == 2 and len({r.group for r in runs}) == 1  # one run per node


# -- restarts and failing ranks --------------------------------------------------------


@pytest.mark.torchrun
def test_torchrun_restart_continues_the_run(tmp_path: Path) -> None:
    """--max-restarts=1, rank 1 fails once: one run, two incarnations, nothing lost.

    No process group here: gloo re-rendezvous after a restart is flaky in torch itself
    on this machine, and the run id and incarnations do not depend on it.
    """
    data, report = tmp_path / "data", tmp_path / "report"
    run_job(
        [
            *torchrun(),
            "--standalone",
            "--nproc-per-node=2",
            "--max-restarts=1",
            "--monitor-interval=0.1",
            *worker_args(data, report, "--mode", "shared", "--die", "exception", "--once"),
        ],
        tmp_path,
    )
    found = reports(report)
    assert [(r["restart"], r["env_rank"]) for r in found] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert len({r["id"] for r in found}) == 1
    for r in found:
        assert r["incarnation"] == r["restart"]
        assert r["step"] == STEPS * (r["restart"] + 1) - 1  # step=None went on

    (run,) = rankwise.Api(dir=data).runs(project=PROJECT)
    assert run.id == found[0]["id"]
    assert run.state == "finished"
    streams = {(s.label, s.incarnation): s for s in run.streams}
    assert sorted(streams) == [("rank-0", 0), ("rank-0", 1), ("rank-1", 0), ("rank-1", 1)]
    failed = streams["rank-1", 0]
    assert (failed.state, failed.error_type) == ("failed", "RuntimeError")
    assert "fails on purpose" in (failed.error_message or "")
    terminated = streams["rank-0", 0]  # torchrun stopped it when rank 1 failed
    assert (terminated.state, terminated.signal) == ("killed", 15)
    assert streams["rank-0", 1].state == streams["rank-1", 1].state == "finished"
    for (_, inc), s in streams.items():
        assert s.last_step == STEPS * (inc + 1) - 1
        assert s.damage is None

    want: Counter[tuple[str, int, Any]] = Counter()
    for r in found:
        label = f"rank-{r['env_rank']}"
        first = STEPS * r["restart"]
        want.update((label, first + i, v) for i, v in enumerate(r["logged"]))
    rows = run.history(["value"])
    assert Counter((r["label"], r["step"], r["value"]) for r in rows) == want
    assert len(rows) == 4 * STEPS  # nothing lost, nothing written twice


def wait_state(data: Path, want: str, timeout: float = 20.0) -> Any:
    def run_in_state() -> Any:
        (run,) = rankwise.Api(dir=data, crash_timeout=2.0).runs(project=PROJECT)
        return run if run.state == want else None

    return wait_until(run_in_state, timeout=timeout, every=0.2)


@pytest.mark.torchrun
def test_torchrun_rank_sigkilled_is_crashed_and_the_rest_killed(tmp_path: Path) -> None:
    data, report = tmp_path / "data", tmp_path / "report"
    run_job(
        [
            *torchrun(),
            "--standalone",
            "--nproc-per-node=2",
            "--monitor-interval=0.1",
            *worker_args(data, report, "--mode", "shared", "--die", "sigkill"),
        ],
        tmp_path,
        ok=False,
    )
    run = wait_state(data, "crashed")
    assert (run.state, run.crashed) == ("crashed", ["rank-1"])
    streams = {s.label: s for s in run.streams}
    assert streams["rank-1"].state == "crashed"
    assert streams["rank-1"].exit_code is None  # it could write nothing at the end
    assert (streams["rank-0"].state, streams["rank-0"].signal) == ("killed", 15)
    # What the killed rank logged before the kill is all there.
    assert len(run.history(["value"], label="rank-1")) == STEPS


@pytest.mark.torchrun
def test_torchrun_rank_exception_fails_the_run(tmp_path: Path) -> None:
    data, report = tmp_path / "data", tmp_path / "report"
    run_job(
        [
            *torchrun(),
            "--standalone",
            "--nproc-per-node=2",
            "--monitor-interval=0.1",
            *worker_args(data, report, "--mode", "shared", "--die", "exception"),
        ],
        tmp_path,
        ok=False,
    )
    (run,) = rankwise.Api(dir=data).runs(project=PROJECT)
    streams = {s.label: s for s in run.streams}
    assert streams["rank-1"].state == "failed"
    assert streams["rank-1"].error_type == "RuntimeError"
    assert "rank 1 fails on purpose" in (streams["rank-1"].error_message or "")
    assert 'raise RuntimeError(f"rank {env_rank} fails on purpose")' in (
        streams["rank-1"].traceback or ""
    )
    assert (streams["rank-0"].state, streams["rank-0"].exit_code) == ("killed", 143)
    # The primary was only killed because rank 1 failed: the run failed.
    assert run.state == "failed"


# -- torch.multiprocessing.spawn -------------------------------------------------------


@pytest.mark.torchrun
@pytest.mark.parametrize("when", ["before", "after"])
def test_mp_spawn_children_agree(tmp_path: Path, when: str) -> None:
    """init() before or after init_process_group in mp.spawn children; nothing passed."""
    data, report = tmp_path / "data", tmp_path / "report"
    nprocs = 3
    run_job(
        [sys.executable, str(SCRIPTS / "spawn_job.py"), str(data), str(report), str(nprocs), when],
        tmp_path,
    )
    found = sorted((json.loads(p.read_text()) for p in report.glob("*.json")), key=lambda r: r["i"])
    assert [r["i"] for r in found] == list(range(nprocs))
    assert len({r["id"] for r in found}) == 1
    for r in found:
        assert (r["rank"], r["local_rank"], r["world_size"]) == (r["i"], r["i"], nprocs), r
        assert r["label"] == f"rank-{r['i']}"
        assert r["is_primary"] == (r["i"] == 0)
    (run,) = rankwise.Api(dir=data).runs(project="spawn")
    assert run.id == found[0]["id"] and run.state == "finished"
    assert sorted(s.rank for s in run.streams) == list(range(nprocs))
    want = Counter((f"rank-{r['i']}", step, v) for r in found for step, v in enumerate(r["logged"]))
    assert Counter((r["label"], r["step"], r["value"]) for r in run.history()) == want
