"""A git repository made by a test: one commit on ``main``, a remote whose URL carries a
secret, and a dirty tracked file (what ran: ``tests/e2e/test_provenance.py``,
``tests/browser/test_overview_browser.py``)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

SECRET_TOKEN = "tok-5ecr3t-in-url"
REMOTE = f"https://alice:{SECRET_TOKEN}@git.example.com/team/repo.git"


def _git(repo: Path, *args: str) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@e", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@e")  # fmt: skip
    out = subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True,
                         check=True, timeout=30)  # fmt: skip
    return out.stdout.strip()


def make_repo(repo: Path) -> str:
    """A repository with one commit on ``main`` and a dirty tracked file; its commit."""
    repo.mkdir(parents=True, exist_ok=True)
    _git(repo, "init", "-q", "-b", "main")
    (repo / "model.py").write_text("LR = 0.1\n")
    (repo / "train.py").write_text("print('hi')\n")
    _git(repo, "add", "model.py", "train.py")
    _git(repo, "commit", "-q", "-m", "first")
    _git(repo, "remote", "add", "origin", REMOTE)
    (repo / "model.py").write_text("LR = 0.3  # tuned\n")  # dirty, tracked
    (repo / "untracked.txt").write_text("not in the diff\n")
    return _git(repo, "rev-parse", "HEAD")
