"""A second run from the same folder: the default data directory is ``./rankwise-runs``,
and a folder named ``rankwise`` beside a script cannot hide the package.

Before, a script run twice from one folder failed the second time with the README's
set-up (``make setup``: a ``.venv`` with an editable install): the first run's
``./rankwise`` was imported as a namespace package ``rankwise`` (no ``init``). These tests
run the user's way: this Python (the ``.venv``'s under ``make test``), no ``PYTHONPATH``
(rankwise comes from the install), ``python train.py`` with the script in the folder.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import rankwise
from tests.helpers.env import clean_env

TRAIN = """\
import rankwise

run = rankwise.init(project="p", settings={"flush_interval": 0.02, "heartbeat_interval": 0.2})
run.log({"x": 1.0})
run.finish()
print("RUN", run.id, rankwise.__file__, flush=True)
"""


def user_env(**extra: str) -> dict[str, str]:
    env = clean_env(RANKWISE_SILENT="1", **extra)
    del env["PYTHONPATH"]  # the installed rankwise, not the checkout on the path
    return env


def run_script(script: Path, cwd: Path, **env: str) -> tuple[str, str]:
    out = subprocess.run(
        [sys.executable, str(script)], cwd=cwd, env=user_env(**env), capture_output=True,
        text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    words = out.stdout.split()
    assert words[0] == "RUN", out.stdout
    return words[1], words[2]


@pytest.fixture(scope="module", autouse=True)
def installed(tmp_path_factory: pytest.TempPathFactory) -> None:
    """rankwise must be installed in this Python (``make setup``), not only on the path."""
    out = subprocess.run(
        [sys.executable, "-c", "import rankwise; print(rankwise.__file__)"], env=user_env(),
        cwd=tmp_path_factory.mktemp("neutral"), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, f"rankwise is not installed in {sys.executable}: make setup"


def test_the_same_script_twice_from_one_folder(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    first, module = run_script(script, tmp_path)
    second, again = run_script(script, tmp_path)
    assert module == again and Path(module).name == "__init__.py"
    assert not Path(module).is_relative_to(tmp_path)  # the package, not the data
    runs = rankwise.Api(dir=tmp_path / "rankwise-runs").runs("p")
    assert sorted(r.id for r in runs) == sorted([first, second])
    assert all(r.state == "finished" and r.history()[0]["x"] == 1.0 for r in runs)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rankwise-runs", "train.py"]


def test_a_folder_holding_an_earlier_data_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An earlier release's ``./rankwise`` beside the script: the import finds the
    package, new runs go to ``./rankwise-runs``, readers find the old runs while there
    is no ``./rankwise-runs``."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "train.py").write_text(TRAIN)
    old, _ = run_script(elsewhere / "train.py", elsewhere, RANKWISE_DIR=str(tmp_path / "rankwise"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RANKWISE_DIR", raising=False)
    api = rankwise.Api()
    assert api.dir == Path("rankwise") and [r.id for r in api.runs("p")] == [old]
    listed = subprocess.run(
        [sys.executable, "-m", "rankwise.cli", "runs"], cwd=tmp_path, env=user_env(),
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert listed.returncode == 0 and old in listed.stdout, listed.stdout + listed.stderr

    (tmp_path / "train.py").write_text(TRAIN)
    new, _ = run_script(tmp_path / "train.py", tmp_path)
    assert [r.id for r in rankwise.Api().runs("p")] == [new]  # ./rankwise-runs now
    assert [r.id for r in rankwise.Api(dir="rankwise").runs("p")] == [old]
    assert os.listdir(tmp_path / "rankwise") == ["p"]  # nothing new written there
