"""Rank health: stragglers, hangs, crashes and kills, from real processes."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import rankwise
from rankwise.health import StreamSteps, assess, step_points, step_rate
from rankwise.sdk.watchdog import is_program_file, where
from rankwise.stream import records as R
from rankwise.stream.fold import StreamFold
from rankwise.stream.frames import scan
from tests.helpers.env import clean_env
from tests.helpers.wait import wait_until

SCRIPTS = Path(__file__).parents[1] / "scripts"


def line_of(script: Path, marker: str) -> int:
    lines = script.read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if marker in line)


def stream_records(data: Path, label: str) -> list[R.AnyRecord]:
    (path,) = data.glob(f"*/*/streams/{label}.0.rwlog")
    return scan(path.read_bytes()).records


@pytest.mark.torchrun
def test_straggler_hang_and_crash_under_torchrun(tmp_path: Path) -> None:
    script = SCRIPTS / "health_job.py"
    data = tmp_path / "data"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc-per-node=4",
            str(script),
            str(data),
        ],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode != 0  # rank 3 was SIGKILLed, so the job failed

    # A dead process on this host is called crashed at once (its pid namespace and start
    # time recorded); the others settle as torchrun stops them.
    def settled() -> Any:
        (run,) = rankwise.Api(data, crash_timeout=2.0).runs()
        return None if "running" in {s.state for s in run.streams} else run

    run = wait_until(settled, timeout=30, every=0.2)
    streams = {s.label: s for s in run.streams}

    # The crash: rank 3 left no finish record and its process is gone; it is named.
    assert streams["rank-3"].state == "crashed"
    assert run.state == "crashed" and run.crashed == ["rank-3"]
    # torchrun stopped the healthy ranks with SIGTERM: killed, not failed or crashed.
    assert streams["rank-0"].state == "killed" and streams["rank-0"].signal == signal.SIGTERM

    health = {h.label: h for h in run.health()}
    # The straggler: four times slower than rank 0 and flagged; rank 0 is not.
    assert health["rank-1"].slow and not health["rank-0"].slow
    assert health["rank-1"].lag_steps > 0 and health["rank-0"].lag_steps < 0
    assert health["rank-0"].step_rate > 3 * health["rank-1"].step_rate
    # The hang: rank 2 stalled inside the collective, at the script's line.
    hang = health["rank-2"]
    assert hang.stalled and hang.stall_seconds is not None and hang.stall_seconds >= 1.0
    assert hang.stall_where == f"all_reduce at health_job.py:{line_of(script, '# HANG')}"
    main_stack = next(s for name, s in hang.stacks.items() if name.startswith("MainThread"))
    assert "distributed_c10d.py" in main_stack and "in all_reduce" in main_stack
    assert hang.describe().startswith("rank 2 stalled for ")
    assert "in all_reduce at health_job.py:" in hang.describe()
    assert not health["rank-0"].stalled and not health["rank-1"].stalled


def test_sigterm_gives_killed_and_the_stall_shows_where(tmp_path: Path) -> None:
    script = SCRIPTS / "health_sigterm.py"
    data = tmp_path / "data"
    with subprocess.Popen(
        [sys.executable, str(script), str(data)],
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        try:
            assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
            # Past the stall timeout: the stall is in the file (it stays open until the end).
            wait_until(lambda: any(type(r) is R.Stall for r in stream_records(data, "rank-0")))
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=60)
        finally:
            proc.kill()
    assert proc.returncode == -signal.SIGTERM  # the default action still ends the process
    (run,) = rankwise.Api(data).runs()
    (stream,) = run.streams
    assert (stream.state, stream.signal, stream.exit_code) == ("killed", signal.SIGTERM, 143)
    assert run.state == "killed"
    records = stream_records(data, "rank-0")
    stalls = [r for r in records if type(r) is R.Stall]
    assert stalls and stalls[0].where == f"sleep at health_sigterm.py:{line_of(script, 'SLEEP')}"
    # The components were stopped before the finish record: console and system landed.
    consoles = [line for r in records if type(r) is R.Console for line in r.lines]
    assert "ready" in consoles
    assert any(type(r) is R.System for r in records)
    assert type(records[-1]) is R.Finish


# -- the watchdog in process ---------------------------------------------------------------


def stalls_of(run: rankwise.Run) -> list[R.Stall]:
    assert run.path is not None
    return [r for r in scan(run.path.read_bytes()).records if type(r) is R.Stall]


def test_stall_is_recorded_and_clears_itself(data_dir: Path, fast: dict) -> None:
    run = rankwise.init(
        project="hang", settings=fast, stall_timeout=0.3, console="off", system=False
    )
    run.log({"x": 1})
    logged = time.monotonic()
    # Idle in a sleep of this file until the stall is in the stream file, however late a
    # loaded machine wakes the watchdog (it polls every 0.06 s). Not wait_until: the
    # stall must be seen in this file's sleep.
    while not stalls_of(run):
        assert time.monotonic() - logged < 30, "no stall recorded"
        time.sleep(0.05)  # STALL HERE
    seen = time.monotonic()
    run.log({"x": 2})
    wait_until(lambda: len(stalls_of(run)) == 2, timeout=30)
    run.finish()
    stalls = stalls_of(run)
    assert [s.cleared for s in stalls] == [False, True]
    opened, cleared = stalls
    assert opened.where == f"sleep at test_health.py:{line_of(Path(__file__), '# STALL HERE')}"
    # Opened past the timeout, measured from the last log(), while still stalled; cleared
    # by the next log(), counting the whole stall.
    assert 0.3 <= opened.idle_seconds <= seen - logged
    assert cleared.idle_seconds >= opened.idle_seconds
    main = next(s for name, s in opened.stacks.items() if name.startswith("MainThread"))
    assert "test_stall_is_recorded_and_clears_itself" in main
    assert not any(name.startswith("rankwise-watchdog") for name in opened.stacks)
    fold = StreamFold()
    fold.apply(scan(run.path.read_bytes()).records)
    assert fold.stall is None and fold.last_stall == opened and fold.stalls == 1


def test_logging_the_same_step_is_progress(data_dir: Path, fast: dict) -> None:
    run = rankwise.init(
        project="hang", settings=fast, stall_timeout=0.3, console="off", system=False
    )
    for _ in range(20):
        run.log({"x": 1}, step=0)  # step=epoch style: the step does not move
        time.sleep(0.05)
    run.finish()
    assert stalls_of(run) == []


def test_stall_timeout_zero_turns_the_watchdog_off(data_dir: Path) -> None:
    run = rankwise.init(project="hang", stall_timeout=0, console="off", system=False)
    assert "rankwise-watchdog" not in {t.name for t in threading.enumerate()}
    run.finish()
    run = rankwise.init(project="hang", console="off", system=False)
    assert "rankwise-watchdog" in {t.name for t in threading.enumerate()}
    run.finish()
    assert "rankwise-watchdog" not in {t.name for t in threading.enumerate()}


def test_where_names_the_library_call_from_the_program_line() -> None:
    frame = sys._getframe()
    assert where(frame).startswith("where at test_health.py:")  # the call on this line
    assert is_program_file(__file__)
    assert not is_program_file(threading.__file__) and not is_program_file(pytest.__file__)
    assert not is_program_file(rankwise.__file__) and not is_program_file("<frozen os>")


# -- stragglers, pure ---------------------------------------------------------------------


def steady(rate: float, start: float, end: float, first: int = 0) -> list[tuple[int, float]]:
    n = int((end - start) * rate)
    return [(first + i, start + i / rate) for i in range(n + 1)]


def test_step_points_keep_the_first_time_of_each_new_highest_step() -> None:
    recs = [
        R.Metrics(i, t, s, {"x": 1.0})
        for i, (s, t) in enumerate([(0, 1.0), (0, 1.5), (1, 2.0), (0, 2.5), (2, 3.0)])
    ]
    assert step_points([R.Heartbeat(9, 0.5), *recs]) == [(0, 1.0), (1, 2.0), (2, 3.0)]


def test_step_rate_over_the_window() -> None:
    points = steady(10.0, 0.0, 100.0)
    assert step_rate(points, 100.0, 60.0) == pytest.approx(10.0, rel=0.01)
    assert step_rate(points, 160.0, 60.0) == 0.0  # stopped for a whole window
    assert step_rate(points[:1], 100.0) is None
    late = steady(10.0, 90.0, 100.0)
    assert step_rate(late, 100.0, 60.0) == pytest.approx(10.0, rel=0.01)


def test_assess_flags_the_slow_rank_and_measures_lag() -> None:
    streams = [
        StreamSteps("rank-0", steady(10.0, 0, 100), rank=0),
        StreamSteps("rank-1", steady(10.0, 0, 100), rank=1),
        StreamSteps("rank-2", steady(7.0, 0, 100), rank=2),  # 1.43x slower
        StreamSteps("rank-3", steady(9.0, 0, 100), rank=3),  # 1.11x: within the factor
    ]
    by = {h.label: h for h in assess(streams, now=100.0, window=60.0)}
    assert [by[f"rank-{i}"].slow for i in range(4)] == [False, False, True, False]
    assert by["rank-2"].lag_steps == pytest.approx(950 - 700, abs=2)
    assert by["rank-2"].lag_seconds == pytest.approx(
        by["rank-2"].lag_steps / by["rank-2"].median_rate  # type: ignore[operator]
    )
    assert "rank 2 is slow" in by["rank-2"].describe()
    assert not any(h.slow for h in assess(streams, now=100.0, factor=1.5))


def test_assess_ended_streams_and_stalls() -> None:
    stall = R.Stall(5, 90.0, idle_seconds=30.0, where="all_reduce at train.py:88")
    streams = [
        StreamSteps("rank-0", steady(10.0, 0, 100), rank=0, state="finished", last_seen=100.0),
        # Finished earlier at the same rate: measured up to its own end, so not slow.
        StreamSteps("rank-1", steady(10.0, 0, 80), rank=1, state="finished", last_seen=80.0),
        StreamSteps("rank-5", steady(10.0, 0, 60), rank=5, stall=stall, last_seen=100.0),
    ]
    by = {h.label: h for h in assess(streams, now=480.0)}
    assert not by["rank-1"].slow
    hang = by["rank-5"]
    assert hang.stalled and hang.stall_since == 60.0 and hang.stall_seconds == 420.0
    assert hang.slow and hang.step_rate == 0.0
    assert hang.describe() == "rank 5 stalled for 7 min in all_reduce at train.py:88"
    with pytest.raises(ValueError):
        assess(streams, window=0)
