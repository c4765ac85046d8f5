"""Launching the training script and checking what reached a server."""

from __future__ import annotations

import math
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import rankwise
from rankwise.store import open_store
from rankwise.store.sql import SQLStore

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


_NOT_KEYS = frozenset({"step", "time", "label", "weight"})


def assert_same_rows(local: rankwise.RunInfo, remote: rankwise.RunInfo) -> None:
    """The server's history rows are the logged ones: none missing, none extra. Blind to
    a point stored twice (the store's ``history`` merges rows by stream and seq), which
    ``assert_same_history`` also checks."""
    mine = Counter(_row_key(r) for r in local.history())
    theirs = Counter(_row_key(r) for r in remote.history())
    assert sum(mine.values()) > 0
    missing, doubled = mine - theirs, theirs - mine
    assert not missing and not doubled, f"missing {missing}, extra {doubled}"


def assert_stored_once(local: rankwise.RunInfo, store: SQLStore | str) -> None:
    """Every logged point is stored once: per (label, key) the points the run's chunks
    hold, counted in SQL, are the logged ones; per (key, step) the band counts as many
    values as ranks logged there. ``store``: the server's store, or its URL."""
    rows = local.history()
    logged: Counter[tuple[str, str]] = Counter()
    per_step: Counter[tuple[str, int]] = Counter()
    for r in rows:
        for k in r.keys() - _NOT_KEYS:
            logged[(r["label"], k)] += 1
            per_step[(k, r["step"])] += 1
    assert logged, "nothing was logged"
    opened = open_store(store) if isinstance(store, str) else None
    st = store if opened is None else opened
    assert isinstance(st, SQLStore)
    try:
        stored = Counter(st.stored_points(local.project, local.id))
        assert stored == logged, f"stored points per (label, key): extra {stored - logged}, " \
            f"missing {logged - stored}"  # fmt: skip
        for key in sorted({k for k, _ in per_step}):
            band = st.band(local.project, local.id, key, max_points=10**9)
            counted = Counter(
                {
                    (key, s): n + a + b + c
                    for s, n, a, b, c in zip(band.step, band.n, band.nan, band.posinf, band.neginf)
                }
            )
            want = Counter({ks: v for ks, v in per_step.items() if ks[0] == key})
            assert counted == want, f"band of {key!r}: values per step {counted - want} over " \
                f"the ranks that logged them, {want - counted} under"  # fmt: skip
    finally:
        if opened is not None:
            opened.close()


def assert_same_history(
    local: rankwise.RunInfo, remote: rankwise.RunInfo, store: SQLStore | str
) -> None:
    """Every logged row is on the server exactly once: the multisets of rows are equal,
    the stored points per series are the logged ones, and the band's count per step is
    the number of ranks that logged it (``store``: the server's store or its URL)."""
    assert_same_rows(local, remote)
    assert_stored_once(local, store)


def assert_exact(got: dict[str, Any]) -> None:
    """A ``loadsim.simulate`` result in which every rank drained and every point it sent
    is stored exactly once."""
    assert got["undrained_ranks"] == 0, got
    assert got["problems"] == [], got
    assert got["verified"], got
    assert got["points_acked"] == got["points_expected"] > 0, got
