"""A server that is down for the whole run: no silent waits, nothing lost.

Real processes (two ranks of one shared run, ``scripts/train_upload.py``) point at a port
where nothing listens: each exits promptly — not after the full ``upload_timeout`` — with
one line naming ``rankwise sync``. ``rankwise sync`` against the same dead port says at
once that it cannot reach the server, that it is retrying and for how long.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.runs import launch_ranks, wait_all
from tests.helpers.servers import REPO, free_port, subprocess_env


@pytest.mark.parametrize("shared", [False, True], ids=["alone", "node upload"])
def test_a_run_that_never_reached_its_server_exits_promptly(tmp_path: Path, shared: bool) -> None:
    data = tmp_path / "data"
    data.mkdir()
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    # With node upload one process tries for the node; each rank still says it itself.
    extra = {"RANKWISE_NODE_UPLOAD": "1", "TMPDIR": str(tmp_path)} if shared else {}
    procs = launch_ranks(
        data, "down", 2, "--steps", "20", server=url, RANKWISE_UPLOAD_TIMEOUT="60", **extra
    )
    for out, err in wait_all(procs, timeout=120):
        took = float(out.split("finish took")[1])
        # About the 2 s last try (5x for a loaded machine), not the 60 s upload_timeout.
        assert took < 10.0, (out, err)
        hints = [ln for ln in err.splitlines() if "rankwise sync" in ln]
        assert len(hints) == 1, err
        assert "was not reachable during this run" in hints[0] and url in hints[0]
        assert f"rankwise sync {data / 'up' / 'down'} --server {url}" in hints[0]


def test_sync_says_at_once_that_it_is_retrying(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    procs = launch_ranks(data, "offline", 1, "--steps", "5")
    wait_all(procs)
    url = f"http://127.0.0.1:{free_port()}"
    t0 = time.monotonic()
    with subprocess.Popen(
        [sys.executable, "-m", "rankwise.cli", "sync", str(data), "--server", url,
         "--no-progress", "--retry-for", "12"],
        env=subprocess_env(), cwd=REPO, stderr=subprocess.PIPE, text=True,
    ) as proc:  # fmt: skip
        assert proc.stderr is not None
        first = proc.stderr.readline()
        said_after = time.monotonic() - t0
        rest = proc.stderr.read()
        assert proc.wait(60) != 0
    # At once (about the CLI's start-up, ~1 s; 5x for a loaded machine), not after the
    # 12 s of retrying.
    assert said_after < 5.0, first
    assert first.startswith(f"rankwise: cannot reach {url} ("), first + rest
    assert "retrying for up to 12 s" in first and "nothing is lost" in first
    assert "run rankwise sync again once the server is up" in rest
