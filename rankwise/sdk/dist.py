"""Who is this process in its job, and which base run id do all its ranks share?

Rank identity is read from the launcher's environment, in this order:

==================  ============================================================
torchrun            RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK,
                    GROUP_WORLD_SIZE, TORCHELASTIC_RUN_ID, TORCHELASTIC_RESTART_COUNT
SLURM (srun)        SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NODEID, SLURM_NNODES,
                    SLURM_JOB_ID, SLURM_STEP_ID, SLURM_RESTART_COUNT
OpenMPI             OMPI_COMM_WORLD_{RANK,SIZE,LOCAL_RANK,LOCAL_SIZE}, PMIX_NAMESPACE
MPICH / Intel MPI   PMI_RANK, PMI_SIZE, MPI_LOCALRANKID, MPI_LOCALNRANKS
mp.spawn child      the rank argument torch.multiprocessing passed to the child
torch.distributed   an initialised default process group
plain RANK env      RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE (other launchers)
==================  ============================================================

and otherwise one process. torch is never imported here: it is consulted only when the
user's program has imported it already.

The base run id must be equal on every rank of one launch and different for every
launch, without the user passing anything. In order of preference:

1. ``id=`` / ``RANKWISE_RUN_ID``.
2. A key the launcher already made unique per launch and gave every rank
   (SLURM job and step, the OpenMPI PMIx namespace), hashed.
3. torchrun: the first rank to ask sets a fresh random id in the agent's TCPStore
   (``compare_set``); the agent outlives worker restarts, so a restarted worker gets the
   same id back and continues the run as a new incarnation.
4. An initialised process group: the same ``compare_set`` on its store.
5. All ranks on one node with a common parent (mp.spawn, a single-node MPI or RANK
   launch): the parent's pid and start time, hashed. No two live parents share both.
6. One process: a fresh random id.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import socket
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .. import names
from .._log import warn
from ..errors import UsageError

_ID_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz"


@dataclass(frozen=True)
class Identity:
    """Where this process sits in its job."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    local_world_size: int = 1
    node_rank: int = 0
    num_nodes: int = 1
    launcher: str = "none"
    restart_count: int = 0
    # A string equal on all ranks of one launch and unique to it, when the launcher
    # provides one; None when the base id must be agreed another way.
    job_key: str | None = None


def random_id(n: int = 8) -> str:
    """A fresh run id: n characters of [0-9a-z]."""
    return "".join(secrets.choice(_ID_ALPHABET) for _ in range(n))


def hashed_id(key: str, n: int = 8) -> str:
    """A run id derived from ``key``: equal keys give equal ids."""
    value = int.from_bytes(hashlib.sha256(key.encode()).digest()[:10], "big")
    out = []
    for _ in range(n):
        value, r = divmod(value, 36)
        out.append(_ID_ALPHABET[r])
    return "".join(out)


def check_id(value: str, what: str = "run id") -> str:
    """Validate a run id or project name used as a directory name (``names.check_id``)."""
    return names.check_id(value, what)


def _int(env: Mapping[str, str], key: str, default: int) -> int:
    raw = env.get(key)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise UsageError(f"environment variable {key}={raw!r} is not an integer") from None


def _slurm_tasks_on_node(spec: str, node: int) -> int | None:
    """Parse SLURM_TASKS_PER_NODE (``"2(x3),1"``) and return node ``node``'s count."""
    index = 0
    for part in spec.split(","):
        m = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", part.strip())
        if not m:
            return None
        count, repeat = int(m.group(1)), int(m.group(2) or 1)
        if node < index + repeat:
            return count
        index += repeat
    return None


def _from_torchrun(env: Mapping[str, str]) -> Identity:
    world = _int(env, "WORLD_SIZE", 1)
    lws = _int(env, "LOCAL_WORLD_SIZE", world)
    return Identity(
        rank=_int(env, "RANK", 0),
        world_size=world,
        local_rank=_int(env, "LOCAL_RANK", 0),
        local_world_size=lws,
        node_rank=_int(env, "GROUP_RANK", 0),
        num_nodes=_int(env, "GROUP_WORLD_SIZE", max(1, world // max(lws, 1))),
        launcher="torchrun",
        restart_count=_int(env, "TORCHELASTIC_RESTART_COUNT", 0),
    )


def _from_slurm(env: Mapping[str, str]) -> Identity:
    world = _int(env, "SLURM_NTASKS", _int(env, "SLURM_NPROCS", 1))
    node = _int(env, "SLURM_NODEID", 0)
    nodes = _int(env, "SLURM_NNODES", _int(env, "SLURM_JOB_NUM_NODES", 1))
    lws = _slurm_tasks_on_node(env.get("SLURM_TASKS_PER_NODE", ""), node)
    if lws is None:
        lws = max(1, world // max(nodes, 1))
    key = None
    if env.get("SLURM_JOB_ID"):
        cluster = env.get("SLURM_CLUSTER_NAME", "")
        key = f"slurm:{cluster}:{env['SLURM_JOB_ID']}.{env.get('SLURM_STEP_ID', '')}"
    return Identity(
        rank=_int(env, "SLURM_PROCID", 0),
        world_size=world,
        local_rank=_int(env, "SLURM_LOCALID", 0),
        local_world_size=lws,
        node_rank=node,
        num_nodes=nodes,
        launcher="slurm",
        restart_count=_int(env, "SLURM_RESTART_COUNT", 0),
        job_key=key,
    )


def _from_openmpi(env: Mapping[str, str]) -> Identity:
    world = _int(env, "OMPI_COMM_WORLD_SIZE", 1)
    rank = _int(env, "OMPI_COMM_WORLD_RANK", 0)
    lws = _int(env, "OMPI_COMM_WORLD_LOCAL_SIZE", world)
    key = None
    for name in ("PMIX_NAMESPACE", "OMPI_MCA_orte_hnp_uri", "OMPI_MCA_ess_base_jobid"):
        if env.get(name):
            key = f"openmpi:{name}={env[name]}"
            break
    return Identity(
        rank=rank,
        world_size=world,
        local_rank=_int(env, "OMPI_COMM_WORLD_LOCAL_RANK", 0),
        local_world_size=lws,
        # Open MPI does not export a node index; ranks are mapped by node by default.
        node_rank=rank // max(lws, 1),
        num_nodes=max(1, -(-world // max(lws, 1))),
        launcher="openmpi",
        job_key=key,
    )


def _from_pmi(env: Mapping[str, str]) -> Identity:
    world = _int(env, "PMI_SIZE", 1)
    rank = _int(env, "PMI_RANK", 0)
    lws = _int(env, "MPI_LOCALNRANKS", world)
    return Identity(
        rank=rank,
        world_size=world,
        local_rank=_int(env, "MPI_LOCALRANKID", 0),
        local_world_size=lws,
        node_rank=rank // max(lws, 1),
        num_nodes=max(1, -(-world // max(lws, 1))),
        launcher="mpich",
    )


def _from_rank_env(env: Mapping[str, str]) -> Identity:
    world = _int(env, "WORLD_SIZE", 1)
    lws = _int(env, "LOCAL_WORLD_SIZE", world)
    rank = _int(env, "RANK", 0)
    return Identity(
        rank=rank,
        world_size=world,
        local_rank=_int(env, "LOCAL_RANK", rank % max(lws, 1)),
        local_world_size=lws,
        node_rank=_int(env, "GROUP_RANK", rank // max(lws, 1)),
        num_nodes=max(1, -(-world // max(lws, 1))),
        launcher="env",
    )


def _spawn_rank() -> int | None:
    """The rank torch.multiprocessing.spawn gave this process, read from its frame."""
    mp = sys.modules.get("multiprocessing")
    if mp is None or mp.parent_process() is None:
        return None
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if code.co_name == "_wrap" and code.co_filename.replace("\\", "/").endswith(
            "torch/multiprocessing/spawn.py"
        ):
            i = frame.f_locals.get("i")
            return i if isinstance(i, int) else None
        frame = frame.f_back  # type: ignore[assignment]
    return None


def _spawn_world_size() -> int:
    """Count this process's siblings started by the same torch.multiprocessing call."""
    try:
        import psutil

        me = psutil.Process()
        parent = me.parent()
        if parent is None:
            return 1
        mine = _spawn_signature(me.cmdline())
        n = sum(
            1
            for child in parent.children()
            if child.pid == me.pid or _spawn_signature(child.cmdline()) == mine
        )
        return max(n, 1)
    except Exception:
        return 1


def _spawn_signature(cmdline: list[str]) -> list[str]:
    """The multiprocessing arguments of a spawned child, minus what differs per child.

    Siblings run ``spawn_main(tracker_fd=4, pipe_handle=N)`` with a different pipe per
    child, so the pipe number is blanked out before comparing.
    """
    return [
        re.sub(r"pipe_handle=\d+", "pipe_handle=*", a)
        for a in cmdline
        if "spawn_main" in a or "multiprocessing-fork" in a
    ]


def _torch_dist() -> Any:
    """The torch.distributed module if the program imported and initialised it."""
    if "torch.distributed" not in sys.modules:
        return None
    dist = sys.modules["torch.distributed"]
    try:
        if dist.is_available() and dist.is_initialized():
            return dist
    except Exception:
        return None
    return None


def detect(env: Mapping[str, str] | None = None) -> Identity:
    """Read this process's rank identity from the launcher (see the module docstring)."""
    env = os.environ if env is None else env
    if env.get("TORCHELASTIC_RUN_ID") is not None and "RANK" in env:
        return _from_torchrun(env)
    if "SLURM_PROCID" in env and "SLURM_NTASKS" in env and "SLURM_STEP_ID" in env:
        return _from_slurm(env)
    if "OMPI_COMM_WORLD_RANK" in env:
        return _from_openmpi(env)
    if "PMI_RANK" in env and "PMI_SIZE" in env:
        return _from_pmi(env)
    spawn_rank = _spawn_rank()
    dist = _torch_dist()
    if dist is not None:
        world = dist.get_world_size()
        lws = _int(env, "LOCAL_WORLD_SIZE", world)
        rank = dist.get_rank()
        return Identity(
            rank=rank,
            world_size=world,
            local_rank=_int(env, "LOCAL_RANK", rank % max(lws, 1)),
            local_world_size=lws,
            node_rank=rank // max(lws, 1),
            num_nodes=max(1, -(-world // max(lws, 1))),
            launcher="mp.spawn" if spawn_rank is not None else "torch.distributed",
        )
    if spawn_rank is not None:
        world = _spawn_world_size()
        return Identity(
            rank=spawn_rank,
            world_size=max(world, spawn_rank + 1),
            local_rank=spawn_rank,
            local_world_size=max(world, spawn_rank + 1),
            launcher="mp.spawn",
        )
    if "RANK" in env and "WORLD_SIZE" in env:
        return _from_rank_env(env)
    return Identity()


def _store_agree(store, key: str) -> str:  # type: ignore[no-untyped-def]
    """First caller sets a fresh id under ``key``; everyone gets the stored value."""
    value = store.compare_set(key, "", random_id())
    return value.decode() if isinstance(value, bytes) else str(value)


def _agent_store_id(env: Mapping[str, str], timeout: float, sfx: str = "") -> str | None:
    if env.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() not in ("true", "1"):
        return None
    try:
        from datetime import timedelta

        from torch.distributed import TCPStore  # type: ignore[attr-defined]

        store = TCPStore(
            env["MASTER_ADDR"],
            int(env["MASTER_PORT"]),
            is_master=False,
            timeout=timedelta(seconds=timeout),
            wait_for_workers=False,
        )
        key = f"rankwise/base_id/{env.get('TORCHELASTIC_RUN_ID', '')}{sfx}"
        return _store_agree(store, key)
    except Exception:
        return None


def _parent_key() -> str | None:
    try:
        import psutil

        parent = psutil.Process().parent()
        if parent is None:
            return None
        return f"parent:{socket.gethostname()}:{parent.pid}:{parent.create_time():.6f}"
    except Exception:
        return None


def agree_base_id(
    ident: Identity, env: Mapping[str, str] | None = None, timeout: float = 30.0, nth: int = 0
) -> str:
    """The base run id every rank of this launch computes identically (module docstring).

    ``nth`` counts the earlier ``init()`` calls of this process that agreed an id: the
    n-th ``init()`` of every rank shares a run, and a second ``init()`` starts a new one.
    """
    env = os.environ if env is None else env
    sfx = f"#{nth}" if nth else ""
    if ident.job_key is not None:
        return hashed_id(ident.job_key + sfx)
    if ident.launcher == "torchrun":
        agreed = _agent_store_id(env, timeout, sfx)
        if agreed is not None:
            return agreed
        key = f"torchrun:{env.get('TORCHELASTIC_RUN_ID')}:{env.get('MASTER_ADDR')}:"
        key += f"{env.get('MASTER_PORT')}"
        if ident.num_nodes == 1:
            key += f":{_parent_key()}"
        return hashed_id(key + sfx)
    if ident.launcher == "mp.spawn":
        parent = _parent_key()
        if parent is not None:
            return hashed_id(parent + sfx)
    dist = _torch_dist()
    if dist is not None and ident.world_size > 1:
        try:
            from torch.distributed.distributed_c10d import _get_default_store

            return _store_agree(_get_default_store(), "rankwise/base_id" + sfx)
        except Exception:
            pass
    if ident.world_size > 1:
        if ident.num_nodes > 1:
            warn(
                f"{ident.launcher} gave no launch id shared by all nodes, so ranks on "
                "different nodes may pick different run ids: set RANKWISE_RUN_ID (or "
                "pass id=) to the same value on every rank, or call "
                "torch.distributed.init_process_group() before rankwise.init()"
            )
        parent = _parent_key()
        if parent is not None:
            return hashed_id(parent + sfx)
    return random_id()
