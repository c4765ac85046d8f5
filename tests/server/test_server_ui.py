"""``rankwise ui``: indexes a data directory and follows live runs within a second."""

from __future__ import annotations

import time
from pathlib import Path

import httpx

import rankwise
from tests.helpers.servers import ServerProcess
from tests.helpers.wait import wait_until

FAST = {"flush_interval": 0.02, "heartbeat_interval": 0.5}


def _steps(url: str, run_id: str) -> list[int]:
    with httpx.Client(base_url=url) as client:
        r = client.get(f"/api/v1/projects/live/runs/{run_id}/history", params={"key": "loss"})
    if r.status_code == 404:
        return []
    assert r.status_code == 200, r.text
    return [row["step"] for row in r.json()["rows"]]


def test_ui_indexes_and_follows_a_live_run(data_dir: Path, tmp_path: Path) -> None:
    done = rankwise.init(project="live", settings=FAST)
    for step in range(20):
        done.log({"loss": float(step)})
    done.finish()
    ui = ServerProcess.ui(data_dir, tmp_path / "ui.log").start()
    try:
        assert f"at {ui.url}" in (tmp_path / "ui.log").read_text()
        assert _steps(ui.url, done.id) == list(range(20))
        assert (data_dir / ".rankwise" / "index.db").is_file()

        run = rankwise.init(project="live", settings=FAST)
        lags = []
        for step in range(5):
            run.log({"loss": float(step)})
            t0 = time.monotonic()
            wait_until(lambda s=step: s in _steps(ui.url, run.id), timeout=10, every=0.02)  # type: ignore[misc]
            lags.append(time.monotonic() - t0)
            time.sleep(0.1)
        assert max(lags) < 5.0, lags  # followed live (typically ~0.3 s), not at a restart
        state = httpx.get(f"{ui.url}/api/v1/projects/live/runs/{run.id}").json()["state"]
        assert state == "running"
        run.finish()
        wait_until(
            lambda: (
                httpx.get(f"{ui.url}/api/v1/projects/live/runs/{run.id}").json()["state"]
                == "finished"
            )
        )
    finally:
        ui.stop()
    # Restarting over the same index re-reads the files and doubles nothing.
    with ServerProcess.ui(data_dir, tmp_path / "ui2.log") as again:
        assert _steps(again.url, done.id) == list(range(20))
        assert _steps(again.url, run.id) == list(range(5))


def test_ui_on_a_file_says_how(tmp_path: Path) -> None:
    # A directory that does not exist yet is served (tests/server/test_cli_story.py); a file is
    # a mistake.
    import subprocess
    import sys

    from tests.helpers.servers import subprocess_env

    a_file = tmp_path / "runs.txt"
    a_file.write_text("")
    out = subprocess.run(
        [sys.executable, "-m", "rankwise.cli", "ui", "--dir", str(a_file)],
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2 and "is a file, not a data directory" in out.stderr
