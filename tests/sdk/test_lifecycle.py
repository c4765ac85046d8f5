"""How a process ends, and what rankwise leaves behind: states, signals, fork, leaks,
a hung filesystem, the memory bound.

Each case runs ``tests/scripts/lifecycle.py SCENARIO`` in its own interpreter (hooks,
signal handlers and threads are process-wide) and reads the result back through
``rankwise.Api`` and the stream file itself.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import rankwise
from rankwise.stream import records as R
from rankwise.stream.frames import scan
from tests.helpers.env import clean_env
from tests.helpers.jobs import SCRIPTS, job_env
from tests.helpers.wait import wait_until

SCRIPT = SCRIPTS / "lifecycle.py"


def run_scenario(
    tmp_path: Path, scenario: str, timeout: float = 60, **env: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), scenario, str(tmp_path / "data"), str(tmp_path / "r.json")],
        env=job_env(**env),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def start_scenario(tmp_path: Path, scenario: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, str(SCRIPT), scenario, str(tmp_path / "data")],
        env=job_env(),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if line.strip() != "ready":
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"scenario {scenario} did not start: {line}{out}{err}")
    return proc


def read_run(tmp_path: Path, run_id: str, crash_timeout: float = 60.0) -> Any:
    return rankwise.Api(dir=tmp_path / "data", crash_timeout=crash_timeout).run(run_id, "life")


def only_stream(run: Any) -> Any:
    (stream,) = run.streams
    return stream


def xs(run: Any) -> list[float]:
    return [row["x"] for row in run.history(["x"])]


def records(stream: Any) -> list[R.AnyRecord]:
    result = scan(Path(stream.path).read_bytes())
    assert result.damage is None, result.damage
    return result.records


# -- states --------------------------------------------------------------------------------

# An uncaught KeyboardInterrupt makes CPython die by SIGINT, unless some thread ran
# exec() of a string (a dataclass or namedtuple being defined: the system sampler's first
# imports) while it was being handled, which resets CPython's flag and gives exit status
# 1. Either status is CPython's; the state rankwise records is what is tested.
SIGINT_STATUS = (1, -signal.SIGINT)

# scenario -> (process exit statuses, stream state, exit code, signal, error type)
ENDINGS = {
    "ok": ((0,), "finished", 0, None, None),
    "exception": ((1,), "failed", 1, None, "ValueError"),
    "sys_exit_3": ((3,), "failed", 3, None, None),
    "with_raises": ((1,), "failed", 1, None, "RuntimeError"),
    "keyboard_interrupt": (SIGINT_STATUS, "killed", 130, 2, "KeyboardInterrupt"),
}


@pytest.mark.parametrize("scenario", sorted(ENDINGS))
def test_ending_gives_state(tmp_path: Path, scenario: str) -> None:
    statuses, state, exit_code, sig, error = ENDINGS[scenario]
    out = run_scenario(tmp_path, scenario)
    assert out.returncode in statuses, out.stderr
    run = read_run(tmp_path, scenario)
    stream = only_stream(run)
    assert (run.state, stream.state) == (state, state)
    assert (stream.exit_code, stream.signal, stream.error_type) == (exit_code, sig, error)
    assert xs(run) == [0, 1, 2, 3, 4]  # what was logged before the end is all there
    if scenario == "exception":
        assert stream.error_message == "the loss went to the moon"
        assert 'raise ValueError("the loss went to the moon")' in stream.traceback
    if scenario == "with_raises":
        assert stream.error_message == "inside the with block"
        assert "RuntimeError: inside the with block" in stream.traceback
    finishes = [r for r in records(stream) if isinstance(r, R.Finish)]
    assert len(finishes) == 1


# A SystemExit raised directly: sys.monitoring sees it leave __main__ on 3.12+; before,
# CPython clears it before atexit and the end reads as a normal one (README, "How the
# end of a process is recorded").
SEEN = sys.version_info >= (3, 12)
RAISED = ("failed", 3) if SEEN else ("finished", 0)


@pytest.mark.parametrize(
    ("scenario", "recorded"),
    [
        ("builtin_exit_3", ("failed", 3)),  # every version: exit() is wrapped
        ("raise_systemexit_3", RAISED),
        ("main_raises_systemexit_3", RAISED),
        ("caught_systemexit", ("finished", 0)),  # handled, then a normal end
    ],
)
def test_systemexit_is_recorded_with_its_code(
    tmp_path: Path, scenario: str, recorded: tuple[str, int]
) -> None:
    out = run_scenario(tmp_path, scenario)
    assert out.returncode == (0 if scenario == "caught_systemexit" else 3), out.stderr
    run = read_run(tmp_path, scenario)
    stream = only_stream(run)
    assert (stream.state, stream.exit_code) == recorded
    assert run.state == recorded[0]
    assert xs(run) == [0, 1, 2, 3, 4]


@pytest.mark.parametrize(("signum", "exit_code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_signal_from_outside_is_killed(tmp_path: Path, signum: int, exit_code: int) -> None:
    proc = start_scenario(tmp_path, "wait")
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=30)
    if signum == signal.SIGTERM:
        assert proc.returncode == -signal.SIGTERM, err  # the default action still ran
    else:
        assert proc.returncode in SIGINT_STATUS, err
        assert err.rstrip().endswith("KeyboardInterrupt"), err
    run = read_run(tmp_path, "wait")
    stream = only_stream(run)
    assert (run.state, stream.state) == ("killed", "killed")
    assert (stream.signal, stream.exit_code) == (signum, exit_code)
    assert xs(run) == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("at", [1, 2, 3, 4, 5])
def test_a_sigterm_as_an_uncaught_error_ends_the_run_waits_for_its_finish(
    tmp_path: Path, at: int
) -> None:
    """torchrun SIGTERMs the other ranks as soon as one fails, while theirs are ending
    on their own error (a peer gone): wherever the signal lands, the Finish record is
    written, the error's, and the signal still ends the process. It once landed after
    the run was marked ended but before the hold, and the process died without one."""
    out = run_scenario(tmp_path, f"sigterm_at_format_{at}")
    assert out.returncode == -signal.SIGTERM, out.stderr[-3000:]
    run = read_run(tmp_path, f"sigterm_at_format_{at}")
    stream = only_stream(run)
    assert (run.state, stream.state, stream.exit_code) == ("failed", "failed", 1), out.stderr
    assert (stream.error_type, stream.error_message) == ("Boom", "the peer went away")
    assert [r.state for r in records(stream) if isinstance(r, R.Finish)] == ["failed"]
    assert xs(run) == [0, 1, 2, 3, 4]
    # The rank's own traceback still reaches its terminal (torchrun's output), whole.
    assert out.stderr.rstrip().endswith("Boom: the peer went away"), out.stderr[-3000:]


@pytest.mark.parametrize("at", [1, 2, 3, 4, 5])
def test_a_held_sigterm_goes_to_the_programs_own_handler(tmp_path: Path, at: int) -> None:
    """Held while the error ends the run, the signal is then handed to the handler the
    program installed before ours, as an unheld one is: here it only prints, so the
    process ends by its exception."""
    scenario = f"own_handler_sigterm_at_format_{at}"
    out = run_scenario(tmp_path, scenario)
    assert out.returncode == 1, out.stderr[-3000:]
    assert out.stdout.count("own handler ran") == 1, out.stdout
    stream = only_stream(read_run(tmp_path, scenario))
    assert (stream.state, stream.error_type) == ("failed", "Boom")
    assert out.stderr.rstrip().endswith("Boom: the peer went away"), out.stderr[-3000:]


def test_a_sigterm_inside_the_hooks_bookkeeping_still_ends_the_run(tmp_path: Path) -> None:
    out = run_scenario(tmp_path, "sigterm_in_the_hooks_lock", timeout=30)
    assert out.returncode == -signal.SIGTERM, out.stderr[-3000:]
    stream = only_stream(read_run(tmp_path, "sigterm_in_the_hooks_lock"))
    assert (stream.state, stream.signal, stream.exit_code) == ("killed", signal.SIGTERM, 143)


def test_sigkill_is_crashed(tmp_path: Path) -> None:
    proc = start_scenario(tmp_path, "wait")  # "ready": what it logged is in the file
    proc.kill()
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    # Dead pid (same host) and a heartbeat older than two intervals (0.5 s): crashed,
    # long before the crash timeout, which only matters when the pid cannot be checked.
    run = wait_until(
        lambda: (r := read_run(tmp_path, "wait")).state != "running" and r, timeout=15, every=0.2
    )
    stream = only_stream(run)
    assert (run.state, run.crashed, stream.state) == ("crashed", ["rank-0"], "crashed")
    assert stream.exit_code is None
    assert xs(run) == [0, 1, 2, 3, 4]


# -- fork -------------------------------------------------------------------------------------


def check_parent_stream_intact(tmp_path: Path, run_id: str, parent_pid: int) -> Any:
    run = read_run(tmp_path, run_id)
    stream = only_stream(run)  # no stream was added by a child, either
    assert (run.state, stream.state, stream.pid) == ("finished", "finished", parent_pid)
    assert xs(run) == list(range(10))
    recs = records(stream)
    assert [r.seq for r in recs] == list(range(len(recs)))  # one writer, no gaps
    assert sum(isinstance(r, R.Finish) for r in recs) == 1
    assert not any(isinstance(r, R.ConfigUpdate | R.SummaryUpdate) for r in recs)
    for rec in recs:
        if isinstance(rec, R.Metrics):
            assert set(rec.values) == {"x"}
        if isinstance(rec, R.Console):
            assert not any("child output" in line or "worker output" in line
                           for line in rec.lines)  # fmt: skip
    return run


@pytest.mark.parametrize("console", ["wrap", "redirect"])
def test_forked_child_never_writes_parent_stream(tmp_path: Path, console: str) -> None:
    out = run_scenario(tmp_path, "fork", RANKWISE_CONSOLE=console)
    assert out.returncode == 0, out.stderr
    info = json.loads((tmp_path / "r.json").read_text())
    assert info["child_status"] == 0  # the child exited normally, atexit and all
    assert "child output must not reach" in out.stdout  # it did print, to the terminal
    check_parent_stream_intact(tmp_path, "fork", info["parent_pid"])


@pytest.mark.slow
@pytest.mark.torch
def test_dataloader_fork_workers_never_write_parent_stream(tmp_path: Path) -> None:
    out = run_scenario(tmp_path, "dataloader", timeout=120)
    assert out.returncode == 0, out.stderr
    info = json.loads((tmp_path / "r.json").read_text())
    check_parent_stream_intact(tmp_path, "dataloader", info["parent_pid"])


# -- leaks ------------------------------------------------------------------------------------


@pytest.mark.parametrize("console", ["wrap", "redirect"])
def test_no_threads_or_fds_left_after_finish(tmp_path: Path, console: str) -> None:
    """Six init/log/finish cycles with console capture, system sampler and watchdog on."""
    out = run_scenario(tmp_path, f"leak_{console}")
    assert out.returncode == 0, out.stderr
    info = json.loads((tmp_path / "r.json").read_text())
    before, cycles = info["before"], info["cycles"]
    for n, after in enumerate(cycles):
        assert after["threads"] == before["threads"], f"cycle {n}: {after['threads']}"
        assert after["fds"] == before["fds"], f"cycle {n}: {after['fds']} vs {before['fds']}"
    runs = rankwise.Api(dir=tmp_path / "data").runs(project="life")
    assert len(runs) == 6 and {r.state for r in runs} == {"finished"}
    assert all(xs(r) == list(range(20)) for r in runs)


# -- a hung filesystem ------------------------------------------------------------------------


@pytest.mark.parametrize("scenario", ["hung_finish", "hung_atexit"])
def test_hung_filesystem_does_not_hang_exit(tmp_path: Path, scenario: str) -> None:
    """The writer's os.write never returns; finish_timeout=1 s bounds finish() and exit."""
    t0 = time.monotonic()
    out = run_scenario(tmp_path, scenario, timeout=60)
    ended = time.time()
    assert out.returncode == 0, out.stderr
    exiting = float(out.stdout.split("exiting at ")[1].split()[0])
    assert ended - exiting < 10.0, out.stdout  # finish_timeout 1 s, plus interpreter exit
    if scenario == "hung_finish":
        took = float(out.stdout.split("finish took ")[1].split()[0])
        assert 0.9 < took < 5.0, out.stdout  # waited its finish_timeout (1 s), then gave up
    assert "was not fully written within 1s" in out.stderr
    assert time.monotonic() - t0 < 30
    # What reached the file before the disk hung is still readable.
    run = read_run(tmp_path, scenario, crash_timeout=0.1)
    assert xs(run)[:5] == [0, 1, 2, 3, 4]


def test_hung_filesystem_does_not_hang_sigterm(tmp_path: Path) -> None:
    """torchrun and SLURM follow SIGTERM with SIGKILL: the handler must give up in time."""
    proc = start_scenario(tmp_path, "hung_wait")
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert time.monotonic() - t0 < 10.0, err  # finish_timeout is 1 s; SIGKILL follows in 30
    assert proc.returncode == -signal.SIGTERM, err
    assert "was not fully written within 1s" in err
    run = read_run(tmp_path, "hung_wait", crash_timeout=0.1)
    assert xs(run)[:5] == [0, 1, 2, 3, 4]


# -- memory bound -----------------------------------------------------------------------------


def test_stalled_writer_drops_counts_and_warns_once(tmp_path: Path) -> None:
    out = run_scenario(tmp_path, "drop", timeout=120)
    assert out.returncode == 0, out.stderr
    info = json.loads((tmp_path / "r.json").read_text())
    total = info["calls"] * info["per_call"]
    # log() waited once for the stalled writer (writer_stall_timeout), then dropped at
    # once: the whole loop took about one stall, not one per call.
    assert info["stall"] * 0.9 < info["slowest"] < info["stall"] * 3 + 2.0, info
    assert info["total"] < info["stall"] * 3 + 5.0, info
    run = read_run(tmp_path, "drop")
    stream = only_stream(run)
    rows = run.history()
    points = sum(len(row) - 3 for row in rows)  # minus step, time, label
    assert stream.state == "finished"
    assert stream.dropped > 0
    assert points + stream.dropped == total  # every value either written or counted
    # Memory held: the writer's one batch being written plus the bounded queue.
    frame_records = 4096
    assert len(rows) <= frame_records + info["max_queue"], len(rows)
    assert out.stderr.count("dropping values") == 1, out.stderr


@pytest.mark.slow
def test_a_million_tight_loop_calls_keep_every_value(tmp_path: Path) -> None:
    """The writer cannot keep up with a bare loop of log() calls: log() waits for it
    (max_queue_bytes) rather than dropping, and every value is read back."""
    out = run_scenario(tmp_path, "million", timeout=240)
    assert out.returncode == 0, out.stderr
    assert "dropping" not in out.stderr, out.stderr
    run = read_run(tmp_path, "million")
    stream = only_stream(run)
    assert (stream.state, stream.dropped) == ("finished", 0)
    rows = run.history(["series"])
    assert len(rows) == 1_000_000
    assert all(r["step"] == i and r["series"] == i * 0.5 for i, r in enumerate(rows))


@pytest.mark.slow
@pytest.mark.timeout(600)  # reads 4 million values back in-process: minutes on a busy machine
def test_large_values_memory_follows_the_byte_bound(tmp_path: Path) -> None:
    """Calls of 20,000 fresh values each against a slow disk: the queue holds at most
    max_queue_bytes (8 MiB) of them, not a count of calls, and nothing is dropped."""
    out = run_scenario(tmp_path, "large_values", timeout=120)
    assert out.returncode == 0, out.stderr
    info = json.loads((tmp_path / "r.json").read_text())
    everything = info["calls"] * info["held_per_call"]  # what an unbounded queue holds
    assert everything > 10 * info["max_bytes"], info
    # The bound, the writer's one frame in progress (4 MiB of estimate) and its encoded
    # bytes: well under a quarter of everything.
    assert 0 < info["growth"] < everything / 4, info
    run = read_run(tmp_path, "large_values")
    stream = only_stream(run)
    assert (stream.state, stream.dropped) == ("finished", 0)
    recs = [r for r in records(stream) if isinstance(r, R.Metrics)]
    # A call of 20,000 keys is two records of 10,000 (MAX_KEYS_PER_RECORD), one step.
    per_step: dict[int, int] = {}
    for r in recs:
        per_step[r.step] = per_step.get(r.step, 0) + len(r.values)
    assert per_step == dict.fromkeys(range(info["calls"]), info["per_call"])
    assert out.stderr.count("is stored as 2 records") == 1, out.stderr


def test_failing_disk_loses_only_what_it_counts(tmp_path: Path) -> None:
    """ENOSPC part-way through frames, past the retry backlog: no torn frame is left in
    the file, and every value is either read back or counted in ``dropped``."""
    out = run_scenario(tmp_path, "disk_full", timeout=120)
    assert out.returncode == 0, out.stderr
    info = json.loads((tmp_path / "r.json").read_text())
    run = read_run(tmp_path, "disk_full")
    stream = only_stream(run)
    assert (stream.state, stream.damage) == ("finished", None)
    recs = records(stream)  # scans the whole file: no damage anywhere
    assert [r.seq for r in recs] == sorted({r.seq for r in recs})
    points = sum(len(r.values) for r in recs if isinstance(r, R.Metrics))
    assert stream.dropped > 0
    assert points + stream.dropped == info["calls"] * info["per_call"]
    assert out.stderr.count("No space left on device") == 1, out.stderr
    assert out.stderr.count("dropping frames") == 1, out.stderr


def test_the_main_modules_code_is_found_from_inside_a_function(tmp_path: Path) -> None:
    """What the 3.12+ watch is restricted to: the ``__main__`` module's own frame, found
    from ``init()`` however deep in the script it is called (any version)."""
    script = tmp_path / "deep.py"
    script.write_text(
        "from rankwise.sdk import hooks\n"
        "def inner():\n"
        "    return hooks._main_module_code()\n"
        "def outer():\n"
        "    return inner()\n"
        "code = outer()\n"
        "print(code.co_name, code.co_filename == __file__)\n"
    )
    out = subprocess.run(
        [sys.executable, str(script)], env=clean_env(), capture_output=True, text=True, timeout=60
    )
    assert out.stdout.split() == ["<module>", "True"], out.stderr
