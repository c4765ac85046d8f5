"""What ``python -m rankwise.wandb`` exports so that the shim reaches every process its
program starts: the marker ``RANKWISE_WANDB_SHIM=1`` and the start-up hook's directory
(``rankwise/wandb/_hook``) first on ``PYTHONPATH``. A Python process started with both
runs the hook's ``sitecustomize`` at start-up, which installs the shim before any user
code; a process without the marker is left alone."""

from __future__ import annotations

import os
from pathlib import Path

MARKER = "RANKWISE_WANDB_SHIM"
HOOK_DIR = str(Path(__file__).resolve().parent / "_hook")


def export(environ: os._Environ[str] | dict[str, str] = os.environ) -> None:
    """Set the marker and put the hook first on ``PYTHONPATH`` in ``environ`` (once)."""
    environ[MARKER] = "1"
    path = environ.get("PYTHONPATH", "")
    if HOOK_DIR not in path.split(os.pathsep):
        environ["PYTHONPATH"] = HOOK_DIR + (os.pathsep + path if path else "")
