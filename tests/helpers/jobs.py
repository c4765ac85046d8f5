"""What the launcher tests share: clean job environments, rank reports, the mode table.

The expected run ids, groups and labels are spelled out here from the table of issue 2,
not computed by ``rankwise.sdk.modes``, so a test compares the SDK with the issue.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import rankwise

from .env import clean_env

SCRIPTS = Path(__file__).parents[1] / "scripts"
WORKER = SCRIPTS / "rank_worker.py"
PROJECT = "launch"
STEPS = 5

FAST = {
    "RANKWISE_HEARTBEAT_INTERVAL": "0.5",
    "RANKWISE_FLUSH_INTERVAL": "0.05",
    "RANKWISE_FINISH_TIMEOUT": "10",
    "RANKWISE_STORE_TIMEOUT": "30",
}


def job_env(**extra: str) -> dict[str, str]:
    """A clean launcher environment (``clean_env``) with short rankwise intervals."""
    return clean_env(**{**FAST, **extra})


def torchrun() -> list[str]:
    exe = Path(sys.executable).with_name("torchrun")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "torch.distributed.run"]


def worker_args(data: Path, report: Path, *extra: str) -> list[str]:
    return [str(WORKER), "--dir", str(data), "--report", str(report), "--steps", str(STEPS), *extra]


def run_job(cmd: list[str], cwd: Path, timeout: float = 150, ok: bool = True) -> str:
    out = subprocess.run(
        cmd, env=job_env(), cwd=cwd, capture_output=True, text=True, timeout=timeout
    )
    text = out.stdout + out.stderr
    if ok:
        assert out.returncode == 0, text
    else:
        assert out.returncode != 0, text
    return text


def run_together(cmds: list[list[str]], cwd: Path, timeout: float = 200) -> list[str]:
    """Start every command at once; all must succeed. Returns their outputs."""
    procs = [
        subprocess.Popen(
            cmd,
            env=job_env(),
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for cmd in cmds
    ]
    outs = []
    try:
        for p in procs:
            out, _ = p.communicate(timeout=timeout)
            outs.append(out)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.communicate()
    for p, out in zip(procs, outs):
        assert p.returncode == 0, out
    return outs


def reports(report: Path) -> list[dict[str, Any]]:
    found = [json.loads(p.read_text()) for p in sorted(report.glob("*.json"))]
    return sorted(found, key=lambda r: (r["restart"], r["env_rank"]))


# -- the table of issue 2 -------------------------------------------------------------

# (run_mode, rank_scope) -> (who records, run id, group) on a job of several nodes.
TABLE = {
    ("auto", "global"): ("rank 0", "{base}", None),
    ("auto", "worker"): ("local rank 0", "{base}-worker-{node}", "{base}"),
    ("shared", "global"): ("every rank", "{base}", None),
    ("shared", "worker"): ("every rank", "{base}-worker-{node}", "{base}"),
    ("new", "global"): ("every rank", "{base}-rank-{rank}", "{base}"),
    ("new", "worker"): (
        "every rank",
        "{base}-worker-{node}-rank-{local_rank}",
        "{base}-worker-{node}",
    ),
}
# A single-node job is one node: named as under global scope.
SINGLE_NODE = {
    "auto": ("{base}", None),
    "shared": ("{base}", None),
    "new": ("{base}-rank-{rank}", "{base}"),
}
MODES = sorted(TABLE)


def expected(mode: str, scope: str, base: str, rank: int, local: int, node: int, nodes: int):
    who, run_id, group = TABLE[mode, scope]
    if nodes == 1:
        run_id, group = SINGLE_NODE[mode]
    fill = {"base": base, "rank": rank, "local_rank": local, "node": node}
    records = {"rank 0": rank == 0, "local rank 0": local == 0, "every rank": True}[who]
    # Under "new" each rank's stream is the only (so the primary) stream of its own run.
    primary = True if mode == "new" else (local == 0 if scope == "worker" else rank == 0)
    label = f"worker-{node}-rank-{local}" if scope == "worker" else f"rank-{rank}"
    return {
        "recording": records,
        "id": run_id.format(**fill),
        "group": None if group is None else group.format(**fill),
        "label": label,
        "is_primary": primary,
    }


def check_job(
    data: Path, found: list[dict[str, Any]], mode: str, scope: str, nodes: int, nproc: int
) -> None:
    """Each rank's identity, placement and every value it logged, read back once."""
    world = nodes * nproc
    assert sorted(r["env_rank"] for r in found) == list(range(world))
    runs = {r.id: r for r in rankwise.Api(dir=data).runs(project=PROJECT)}
    bases = {r.base_id for r in runs.values()}
    assert len(bases) == 1, f"ranks disagree on the base id: {bases}"
    (base,) = bases
    assert base

    want_runs: dict[str, dict[str, Any]] = {}
    for rep in found:
        rank = rep["env_rank"]
        node, local = rank // nproc, rank % nproc
        assert (rep["rank"], rep["local_rank"], rep["node_rank"]) == (rank, local, node), rep
        assert (rep["world_size"], rep["local_world_size"]) == (world, nproc), rep
        assert rep["num_nodes"] == nodes, rep
        want = expected(mode, scope, base, rank, local, node, nodes)
        got = {k: rep[k] for k in want}
        assert got == want, f"rank {rank}: {got} != {want}"
        if want["recording"]:
            entry = want_runs.setdefault(want["id"], {"group": want["group"], "streams": {}})
            entry["streams"][want["label"]] = (rank, local, node, want["is_primary"], rep)

    assert set(runs) == set(want_runs)
    for run_id, want in want_runs.items():
        info = runs[run_id]
        assert info.group == want["group"], run_id
        assert info.state == "finished", (run_id, [(s.label, s.state) for s in info.streams])
        assert sorted(s.label for s in info.streams) == sorted(want["streams"])
        logged: Counter[tuple[str, int, float]] = Counter()
        for s in info.streams:
            rank, local, node, primary, rep = want["streams"][s.label]
            assert (s.rank, s.local_rank, s.node, s.is_primary) == (rank, local, node, primary)
            assert (s.state, s.incarnation, s.dropped, s.damage) == ("finished", 0, 0, None)
            assert s.pid == rep["pid"]
            assert s.last_step == STEPS - 1
            logged.update((s.label, step, v) for step, v in enumerate(rep["logged"]))
        rows = Counter((r["label"], r["step"], r["value"]) for r in info.history(["value"]))
        assert rows == logged, f"{run_id}: read back {rows}, logged {logged}"
    # Nothing logged on a process that does not record reached any run.
    total = sum(len(r.history(["value"])) for r in runs.values())
    assert total == STEPS * sum(1 for r in found if r["recording"])
