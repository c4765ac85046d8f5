"""Console capture: real subprocesses printing through Python, file descriptors and libc."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

import rankwise
from rankwise.sdk import console as C
from rankwise.stream import records as R
from rankwise.stream.frames import scan
from tests.helpers.env import clean_env

SCRIPT = Path(__file__).parents[1] / "scripts" / "health_console.py"


def console_lines(data: Path) -> dict[str, list[tuple[float, str]]]:
    out: dict[str, list[tuple[float, str]]] = {"stdout": [], "stderr": []}
    for path in data.glob("*/*/streams/*.rwlog"):
        for rec in scan(path.read_bytes()).records:
            if type(rec) is R.Console:
                assert len(rec.times) == len(rec.lines)
                out[rec.stream] += list(zip(rec.times, rec.lines))
    return out


def run_console_script(tmp_path: Path, mode: str) -> tuple[subprocess.CompletedProcess[str], dict]:
    facts = tmp_path / "facts.json"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path / "data"), mode, str(facts)],
        env=clean_env(PYTHONUNBUFFERED="0"),
        capture_output=True,
        timeout=120,
    )
    # Decoded by hand: text=True would turn the progress bar's "\r" into "\n".
    text = subprocess.CompletedProcess(
        proc.args, proc.returncode, proc.stdout.decode(), proc.stderr.decode()
    )
    assert text.returncode == 0, text.stderr
    child = json.loads(Path(str(facts) + ".child").read_text())
    return text, {"parent": json.loads(facts.read_text()), "child": child}


def test_redirect_captures_c_level_writes_and_still_reaches_the_terminal(tmp_path: Path) -> None:
    started = time.time()
    proc, facts = run_console_script(tmp_path, "redirect")
    lines = console_lines(tmp_path / "data")
    out = [line for _, line in lines["stdout"]]
    err = [line for _, line in lines["stderr"]]
    for expected in ("python stdout line", "fd1 line", "printf line 7", "partial"):
        assert expected in out
        assert expected in proc.stdout  # the terminal got it too
    assert "\x1b[32mgreen\x1b[0m" in out  # ANSI colour kept for rendering
    for expected in ("python stderr line", "fd2 line", "libc stderr line"):
        assert expected in err
        assert expected in proc.stderr
    bars = [line for line in err if "30/30" in line or "/30 [" in line]
    assert len(bars) == 1 and bars[0].startswith("100%|##########| 30/30")  # collapsed
    assert "\r" in proc.stderr  # ... while the terminal saw the bar redrawn
    # The forked child restored the descriptors: its line reached the terminal only.
    assert facts["child"] == {"stdout_restored": True, "fds_restored": True}
    assert "child line" in proc.stdout and "child line" not in out
    # finish() restored everything; later output is the terminal's alone.
    assert facts["parent"] == {"stdout_restored": True, "fds_restored": True}
    assert "after finish" in proc.stdout and "after finish" not in out
    times = [t for t, _ in lines["stdout"] + lines["stderr"]]
    assert all(started <= t <= time.time() for t in times)


def test_wrap_is_the_default_and_captures_python_output_only(tmp_path: Path) -> None:
    proc, facts = run_console_script(tmp_path, "wrap")
    lines = console_lines(tmp_path / "data")
    out = [line for _, line in lines["stdout"]]
    err = [line for _, line in lines["stderr"]]
    assert "python stdout line" in out and "\x1b[32mgreen\x1b[0m" in out and "partial" in out
    assert "python stderr line" in err
    bars = [line for line in err if "/30 [" in line]
    assert len(bars) == 1 and bars[0].startswith("100%|##########| 30/30")
    # Descriptor-level writes are not seen by a Python-level tee, but reach the terminal.
    assert "fd1 line" not in out and "printf line 7" not in out and "fd2 line" not in err
    assert "fd1 line" in proc.stdout and "printf line 7" in proc.stdout
    assert "python stdout line" in proc.stdout and "python stderr line" in proc.stderr
    assert facts["child"] == {"stdout_restored": True, "fds_restored": True}
    assert facts["parent"] == {"stdout_restored": True, "fds_restored": True}
    assert "child line" in proc.stdout and "child line" not in out


def test_default_mode_is_wrap(data_dir: Path) -> None:
    before = sys.stdout
    run = rankwise.init(project="console", system=False, stall_timeout=0)
    assert type(sys.stdout).__name__ == "_Tee"
    run.finish()
    assert sys.stdout is before


def test_off_captures_nothing(tmp_path: Path) -> None:
    proc, facts = run_console_script(tmp_path, "off")
    assert console_lines(tmp_path / "data") == {"stdout": [], "stderr": []}
    assert "python stdout line" in proc.stdout and "fd2 line" in proc.stderr
    assert facts["parent"]["stdout_restored"] and facts["parent"]["fds_restored"]


def test_bad_mode_names_the_choices(data_dir: Path) -> None:
    with pytest.raises(rankwise.UsageError, match="wrap, redirect, off"):
        rankwise.init(project="console", console="loud")


# -- line assembly, in process -----------------------------------------------------------


def assemble(*chunks: str, max_line: int = C.MAX_LINE) -> list[str]:
    lines = C.LineAssembler(max_line)
    out: list[tuple[float, str]] = []
    for chunk in chunks:
        lines.feed(chunk, 0.0, out)
    lines.flush(1.0, out)
    return [line for _, line in out]


def test_lines_split_across_chunks_and_crlf() -> None:
    assert assemble("a", "b\nc", "d\n", "e") == ["ab", "cd", "e"]
    assert assemble("windows\r\n", "line\r", "\n") == ["windows", "line"]
    assert assemble("\n\n") == ["", ""]


def test_carriage_returns_keep_the_last_state() -> None:
    bar = "".join(f"\r{i:3d}%|" for i in range(0, 101, 10))
    assert assemble(bar[:7], bar[7:], "\n") == ["100%|"]
    assert assemble("step 1\rstep 2\r") == ["step 2"]
    assert assemble("\x1b[1mbold\x1b[0m\rplain\n") == ["plain"]


def test_pending_line_is_bounded() -> None:
    lines = C.LineAssembler(max_line=10)
    out: list[tuple[float, str]] = []
    for _ in range(1000):
        lines.feed("\rprogress", 0.0, out)  # a bar redrawn forever without "\n"
    assert out == [] and len(lines._pending) <= 10
    assert assemble("x" * 25, max_line=10) == ["x" * 10, "x" * 10, "x" * 5]


def test_output_beyond_the_bound_is_dropped_and_said(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(C, "MAX_PENDING", 100)
    got: list[tuple[str, list[str]]] = []
    capture = C.ConsoleCapture("none", lambda s, lines, times: got.append((s, lines)))
    for _ in range(10):
        capture._sink.put("stdout", "0123456789012345678\n")  # 20 bytes each
    capture._drain(final=True)
    lines = [line for stream, batch in got if stream == "stdout" for line in batch]
    assert lines.count("0123456789012345678") == 5
    assert "100 bytes of stdout not captured" in lines[-1]
