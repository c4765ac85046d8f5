"""The ways in (the ``rankwise`` script, ``python -m rankwise``, ``python -m rankwise.cli``)
give the same command line, and the defaults every entry point shares
(``rankwise.settings.default_dir``/``default_project``/``default_server``) rank an explicit
value over the environment over the default."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from rankwise.settings import default_dir, default_project, default_server
from tests.helpers.env import clean_env


def _help(*cmd: str, cwd: Path) -> str:
    out = subprocess.run(
        [*cmd, "show", "--help"],
        cwd=cwd,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_the_script_and_both_modules_are_one_command_line(tmp_path: Path) -> None:
    script = Path(sys.executable).parent / "rankwise"
    assert script.exists(), f"no console script beside {sys.executable}: pip install -e ."
    by_script = _help(str(script), cwd=tmp_path)
    assert by_script.startswith("usage: rankwise show [-h]")
    assert _help(sys.executable, "-m", "rankwise", cwd=tmp_path) == by_script
    assert _help(sys.executable, "-m", "rankwise.cli", cwd=tmp_path) == by_script


def test_an_argument_wins_over_the_environment_which_wins_over_the_default() -> None:
    env = {"RANKWISE_PROJECT": "from-env", "RANKWISE_SERVER": "http://env:8585"}
    assert default_project("given", env) == "given"
    assert default_project(None, env) == "from-env"
    assert default_project(None, {}) == "default"
    assert default_project(None, {"RANKWISE_PROJECT": ""}, fallback="huggingface") == "huggingface"
    assert default_server("http://given", env) == "http://given"
    assert default_server(None, env) == "http://env:8585"
    assert default_server(None, {"RANKWISE_SERVER": ""}) is None
    assert default_dir("given", {"RANKWISE_DIR": "/env"}) == Path("given")
    assert default_dir(None, {"RANKWISE_DIR": "/env"}) == Path("/env")
    assert default_dir(None, {}) == Path("rankwise-runs")
