"""``wandb.init(save_code=...)`` on rankwise: a real script, only the import changed.

``save_code=True`` saves the main script as the run's ``code`` artifact (W&B: "uploads
the main script"); ``Settings(save_code=True, code_dir=...)`` the ``*.py`` files under
``code_dir``; ``save_code=False`` saves no code, not even rankwise's ``git diff``. Each
is read back through ``rankwise.Api``.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import rankwise
from tests.helpers.env import clean_env
from tests.helpers.jobs import FAST

SCRIPT = """\
import sys

import rankwise.wandb as wandb

how = sys.argv[1]
if how == "main":
    run = wandb.init(project="sc", save_code=True)
elif how == "dir":
    run = wandb.init(project="sc", settings=wandb.Settings(save_code=True, code_dir="pkg"))
else:
    run = wandb.init(project="sc", save_code=False)
run.log({"loss": 1.0})
print("RUN", run.id)
run.finish()
"""


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
        cwd=cwd, check=True, capture_output=True, timeout=30,
    )  # fmt: skip


def _run(src: Path, data: Path, how: str) -> rankwise.RunInfo:
    env = clean_env(**FAST, RANKWISE_DIR=str(data), RANKWISE_SILENT="1")
    env = {k: v for k, v in env.items() if not k.startswith("WANDB_")}
    out = subprocess.run(
        [sys.executable, "train.py", how], env=env, cwd=src, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    found = re.search(r"RUN (\S+)", out.stdout)
    assert found is not None, out.stdout
    return rankwise.Api(dir=data).run(found.group(1), project="sc")


def _code(run: rankwise.RunInfo, out: Path) -> dict[str, str]:
    """The files of the run's ``code`` artifacts, as downloaded, by path."""
    files: dict[str, str] = {}
    for art in run.logged_artifacts():
        if art.type != "code":
            continue
        root = out / art.name
        art.download(root=str(root))
        for entry in art.files():
            files[entry.path] = (root / entry.path).read_text()
    return files


def test_save_code_saves_the_main_script_and_reads_back(tmp_path: Path) -> None:
    src, data = tmp_path / "src", tmp_path / "data"
    (src / "pkg").mkdir(parents=True)
    (src / "train.py").write_text(SCRIPT)
    (src / "helper.py").write_text("X = 1\n")
    (src / "pkg" / "model.py").write_text("LAYERS = 12\n")
    (src / "pkg" / "notes.txt").write_text("not python\n")
    _git(src, "init", "-q")
    _git(src, "add", ".")
    _git(src, "commit", "-q", "-m", "first")
    (src / "helper.py").write_text("X = 2\n")  # a change: rankwise's save_code keeps the diff

    main = _run(src, data, "main")
    assert main.state == "finished"
    assert _code(main, tmp_path / "main") == {"train.py": SCRIPT}  # the main script only
    diff = main.diff()
    assert diff is not None and "X = 2" in diff

    in_dir = _run(src, data, "dir")
    assert _code(in_dir, tmp_path / "dir") == {"model.py": "LAYERS = 12\n"}

    off = _run(src, data, "off")
    assert _code(off, tmp_path / "off") == {}
    assert off.diff() is None and off.git is not None and off.git.commit  # git stays
