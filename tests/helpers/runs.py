"""Launching the training script and checking what reached a server."""

from __future__ import annotations

import math
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import rankwise

from .servers import REPO, subprocess_env

SCRIPT = Path(__file__).parents[1] / "scripts" / "train_upload.py"

# Short intervals keep the tests fast; the bounds they test are the same.
FAST_ENV = {
    "RANKWISE_FLUSH_INTERVAL": "0.02",
    "RANKWISE_HEARTBEAT_INTERVAL": "0.5",
    "RANKWISE_UPLOAD_INTERVAL": "0.05",
    "RANKWISE_UPLOAD_BACKOFF_MAX": "0.2",
    "RANKWISE_UPLOAD_TIMEOUT": "10",
    "RANKWISE_STORE_TIMEOUT": "30",
}


def launch_ranks(
    data: Path,
    run_id: str,
    world: int,
    *args: str,
    server: str | list[str] | None = None,
    **env: str,
) -> list[subprocess.Popen[str]]:
    """``world`` plain processes of one shared run (RANK/WORLD_SIZE set, no torch)."""
    procs = []
    for rank in range(world):
        extra = dict(FAST_ENV, RANKWISE_DIR=str(data), RANKWISE_RUN_ID=run_id, **env)
        extra.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank))
        extra["LOCAL_WORLD_SIZE"] = str(world)
        target = server[rank] if isinstance(server, list) else server
        if target:
            extra["RANKWISE_SERVER"] = target
        procs.append(
            subprocess.Popen(
                [sys.executable, str(SCRIPT), *args],
                env=subprocess_env(**extra),
                cwd=data.parent,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    return procs


def wait_all(procs: list[subprocess.Popen[str]], timeout: float = 120) -> list[tuple[str, str]]:
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=timeout)
        assert p.returncode == 0, f"rank failed ({p.returncode}):\n{out}\n{err}"
        outs.append((out, err))
    return outs


def sync_cli(path: Path, server: str, *extra: str, timeout: float = 120) -> str:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "rankwise.cli",
            "sync",
            str(path),
            "--server",
            server,
            "--no-progress",
            *extra,
        ],
        env=subprocess_env(),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def _row_key(row: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(
        sorted((k, "nan" if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items())
    )


def assert_same_history(local: rankwise.RunInfo, remote: rankwise.RunInfo) -> None:
    """Every logged row is on the server exactly once: the multisets are equal."""
    mine = Counter(_row_key(r) for r in local.history())
    theirs = Counter(_row_key(r) for r in remote.history())
    assert sum(mine.values()) > 0
    missing, doubled = mine - theirs, theirs - mine
    assert not missing and not doubled, f"missing {missing}, extra {doubled}"
