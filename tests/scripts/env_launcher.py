"""A stand-in for srun / mpirun / mpiexec: starts ranks with that launcher's environment.

Usage: ``env_launcher.py KIND NODES PER_NODE SCRIPT ARGS...`` with KIND one of
``slurm``, ``openmpi`` or ``pmi`` (MPICH / Intel MPI hydra). Starts NODES * PER_NODE
processes of ``python SCRIPT ARGS`` at once, each with the variables the real
launcher would set, and exits with the worst exit status. Like the real launchers it
makes the launch-unique key itself (the SLURM job id, the PMIx namespace); hydra gives
none, so under ``pmi`` the ranks only share this process as their parent.
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys


def rank_env(kind: str, rank: int, nodes: int, per_node: int, job: str) -> dict[str, str]:
    world, node, local = nodes * per_node, rank // per_node, rank % per_node
    if kind == "slurm":
        return {
            "SLURM_JOB_ID": job,
            "SLURM_STEP_ID": "0",
            "SLURM_CLUSTER_NAME": "testcluster",
            "SLURM_PROCID": str(rank),
            "SLURM_NTASKS": str(world),
            "SLURM_LOCALID": str(local),
            "SLURM_NODEID": str(node),
            "SLURM_NNODES": str(nodes),
            "SLURM_TASKS_PER_NODE": f"{per_node}(x{nodes})",
        }
    if kind == "openmpi":
        return {
            "OMPI_COMM_WORLD_RANK": str(rank),
            "OMPI_COMM_WORLD_SIZE": str(world),
            "OMPI_COMM_WORLD_LOCAL_RANK": str(local),
            "OMPI_COMM_WORLD_LOCAL_SIZE": str(per_node),
            "OMPI_COMM_WORLD_NODE_RANK": str(local),
            "PMIX_NAMESPACE": f"prterun-{socket.gethostname()}-{job}@1",
            "PMIX_RANK": str(rank),
        }
    if kind == "pmi":
        return {
            "PMI_RANK": str(rank),
            "PMI_SIZE": str(world),
            "PMI_FD": "9",
            "MPI_LOCALRANKID": str(local),
            "MPI_LOCALNRANKS": str(per_node),
        }
    raise SystemExit(f"unknown launcher kind {kind!r}")


def main() -> int:
    kind, nodes, per_node = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    job = str(secrets.randbelow(10**7))
    procs = [
        subprocess.Popen(
            [sys.executable, *sys.argv[4:]],
            env={**os.environ, **rank_env(kind, rank, nodes, per_node, job)},
        )
        for rank in range(nodes * per_node)
    ]
    return max(p.wait() for p in procs)


if __name__ == "__main__":
    sys.exit(main())
