"""Rank identity from launcher environments, and run-id agreement without torch.

Unit tests call ``rankwise.sdk.dist.detect`` / ``agree_base_id`` with crafted environments;
the subprocess tests start real processes with SLURM, OpenMPI and MPICH/Intel MPI (PMI)
variables through ``tests/scripts/env_launcher.py`` and read back what they recorded.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import rankwise
from rankwise.errors import UsageError
from rankwise.sdk.dist import Identity, agree_base_id, detect, hashed_id
from tests.helpers.jobs import SCRIPTS, check_job, job_env, reports, run_together, worker_args


def torchrun_env(rank: int, local: int, node: int, nodes: int, per_node: int) -> dict[str, str]:
    return {
        "RANK": str(rank),
        "WORLD_SIZE": str(nodes * per_node),
        "LOCAL_RANK": str(local),
        "LOCAL_WORLD_SIZE": str(per_node),
        "GROUP_RANK": str(node),
        "GROUP_WORLD_SIZE": str(nodes),
        "ROLE_RANK": str(rank),
        "MASTER_ADDR": "node0",
        "MASTER_PORT": "29500",
        "TORCHELASTIC_RUN_ID": "job-42",
        "TORCHELASTIC_RESTART_COUNT": "2",
        "TORCHELASTIC_USE_AGENT_STORE": "False",
    }


def slurm_env(rank: int, job: str = "1234", step: str = "0", **more: str) -> dict[str, str]:
    # 5 tasks on 3 nodes: 2, 2 and 1 (srun -n5 -N3 with block distribution).
    node = [0, 0, 1, 1, 2][rank]
    env = {
        "SLURM_JOB_ID": job,
        "SLURM_STEP_ID": step,
        "SLURM_PROCID": str(rank),
        "SLURM_NTASKS": "5",
        "SLURM_LOCALID": str([0, 1, 0, 1, 0][rank]),
        "SLURM_NODEID": str(node),
        "SLURM_NNODES": "3",
        "SLURM_TASKS_PER_NODE": "2(x2),1",
        "SLURM_CLUSTER_NAME": "c1",
    }
    env.update(more)
    return env


def ompi_env(rank: int, namespace: str = "prterun-h-100@1") -> dict[str, str]:
    # 4 ranks, 2 per node (mpirun -np 4 --map-by ppr:2:node)
    return {
        "OMPI_COMM_WORLD_RANK": str(rank),
        "OMPI_COMM_WORLD_SIZE": "4",
        "OMPI_COMM_WORLD_LOCAL_RANK": str(rank % 2),
        "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
        "PMIX_NAMESPACE": namespace,
    }


def pmi_env(rank: int) -> dict[str, str]:
    # mpiexec -n 6 -ppn 3 (MPICH hydra / Intel MPI)
    return {
        "PMI_RANK": str(rank),
        "PMI_SIZE": "6",
        "MPI_LOCALRANKID": str(rank % 3),
        "MPI_LOCALNRANKS": "3",
    }


def fields(ident: Identity) -> tuple[int, int, int, int, int, int, str]:
    return (
        ident.rank,
        ident.world_size,
        ident.local_rank,
        ident.local_world_size,
        ident.node_rank,
        ident.num_nodes,
        ident.launcher,
    )


# -- detect(): one launcher at a time ---------------------------------------------------


def test_no_launcher_is_one_process() -> None:
    assert detect({}) == Identity()
    assert detect({"PATH": "/usr/bin", "HOME": "/root"}) == Identity()


@pytest.mark.parametrize(("rank", "local", "node"), [(0, 0, 0), (1, 1, 0), (2, 0, 1), (3, 1, 1)])
def test_torchrun(rank: int, local: int, node: int) -> None:
    ident = detect(torchrun_env(rank, local, node, nodes=2, per_node=2))
    assert fields(ident) == (rank, 4, local, 2, node, 2, "torchrun")
    assert ident.restart_count == 2
    assert ident.job_key is None  # agreed through the agent's store instead


@pytest.mark.parametrize(
    ("rank", "local", "node"), [(0, 0, 0), (1, 1, 0), (2, 0, 1), (3, 1, 1), (4, 0, 2)]
)
def test_slurm_srun(rank: int, local: int, node: int) -> None:
    ident = detect(slurm_env(rank))
    lws = 1 if node == 2 else 2  # SLURM_TASKS_PER_NODE "2(x2),1"
    assert fields(ident) == (rank, 5, local, lws, node, 3, "slurm")
    assert ident.job_key is not None and "1234" in ident.job_key


def test_slurm_restart_count() -> None:
    assert detect(slurm_env(0, SLURM_RESTART_COUNT="1")).restart_count == 1


def test_slurm_batch_shell_without_a_step_is_one_process() -> None:
    """``python train.py`` in an sbatch script (no srun step) is not rank 0 of many."""
    env = slurm_env(0)
    del env["SLURM_STEP_ID"]
    assert detect(env).launcher != "slurm"


@pytest.mark.parametrize("rank", range(4))
def test_openmpi(rank: int) -> None:
    ident = detect(ompi_env(rank))
    assert fields(ident) == (rank, 4, rank % 2, 2, rank // 2, 2, "openmpi")
    assert ident.job_key is not None and "prterun-h-100@1" in ident.job_key


@pytest.mark.parametrize("rank", range(6))
def test_pmi_mpich_intel_mpi(rank: int) -> None:
    ident = detect(pmi_env(rank))
    assert fields(ident) == (rank, 6, rank % 3, 3, rank // 3, 2, "mpich")


def test_plain_rank_environment() -> None:
    env = {"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"}
    assert fields(detect(env)) == (3, 4, 1, 2, 1, 2, "env")


def test_torchrun_under_srun_is_torchrun() -> None:
    """``srun torchrun ...``: the workers carry both; torchrun's numbering is the truth."""
    env = {**slurm_env(1), **torchrun_env(3, 1, 1, nodes=2, per_node=2)}
    assert fields(detect(env)) == (3, 4, 1, 2, 1, 2, "torchrun")


def test_mpi_under_slurm_is_slurm() -> None:
    """srun-launched Open MPI ranks: SLURM numbers them and gives the job key."""
    env = {**ompi_env(3), **slurm_env(3)}
    assert detect(env).launcher == "slurm"


def test_non_integer_variable_names_the_variable() -> None:
    env = slurm_env(0)
    env["SLURM_PROCID"] = "zero"
    with pytest.raises(UsageError, match="SLURM_PROCID"):
        detect(env)


# -- agree_base_id(): without any communication -------------------------------------


def test_slurm_ranks_agree_and_jobs_and_steps_differ() -> None:
    ids = {agree_base_id(detect(slurm_env(r)), {}) for r in range(5)}
    assert len(ids) == 1
    base = ids.pop()
    assert base == hashed_id(detect(slurm_env(0)).job_key or "")
    assert agree_base_id(detect(slurm_env(0, job="1235")), {}) != base
    assert agree_base_id(detect(slurm_env(0, step="1")), {}) != base
    assert agree_base_id(detect(slurm_env(0, SLURM_CLUSTER_NAME="c2")), {}) != base


def test_openmpi_ranks_agree_and_launches_differ() -> None:
    ids = {agree_base_id(detect(ompi_env(r)), {}) for r in range(4)}
    assert len(ids) == 1
    assert agree_base_id(detect(ompi_env(0, "prterun-h-101@1")), {}) not in ids


def test_one_process_gets_a_fresh_id_each_time() -> None:
    ids = {agree_base_id(Identity(), {}) for _ in range(20)}
    assert len(ids) == 20
    for value in ids:
        assert len(value) == 8 and value.isalnum() and value == value.lower()


# -- real processes with each launcher's environment -------------------------------------

# kind -> (nodes, ranks per node, run_mode, rank_scope)
LAYOUTS = {
    "slurm": (2, 2, "shared", "worker"),
    "openmpi": (2, 2, "new", "worker"),
    "pmi": (1, 3, "shared", "global"),
}


@pytest.mark.parametrize("kind", sorted(LAYOUTS))
def test_launcher_environment_processes_agree(tmp_path: Path, kind: str) -> None:
    """Two launches at once: within each, every rank agrees; between them, no collision."""
    nodes, per_node, mode, scope = LAYOUTS[kind]
    outs = run_together(
        [
            [
                sys.executable,
                str(SCRIPTS / "env_launcher.py"),
                kind,
                str(nodes),
                str(per_node),
                *worker_args(
                    tmp_path / f"data{i}", tmp_path / f"report{i}", "--mode", mode, "--scope", scope
                ),
            ]
            for i in range(2)
        ],
        tmp_path,
    )
    for out in outs:
        assert "rankwise: WARNING" not in out, out
    bases = []
    for i in range(2):
        found = reports(tmp_path / f"report{i}")
        check_job(tmp_path / f"data{i}", found, mode, scope, nodes=nodes, nproc=per_node)
        (run, *_) = rankwise.Api(dir=tmp_path / f"data{i}").runs()
        bases.append(run.base_id)
    assert bases[0] != bases[1]


def test_explicit_run_id_wins_over_the_launcher(tmp_path: Path) -> None:
    data, report = tmp_path / "data", tmp_path / "report"
    out = subprocess.run(
        [
            sys.executable,
            str(SCRIPTS / "env_launcher.py"),
            "slurm",
            "1",
            "2",
            *worker_args(data, report, "--mode", "new"),
        ],
        env=job_env(RANKWISE_RUN_ID="given-id"),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert sorted(r["id"] for r in reports(report)) == ["given-id-rank-0", "given-id-rank-1"]
    check_job(data, reports(report), "new", "global", nodes=1, nproc=2)
