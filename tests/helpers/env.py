"""What every test that starts a process needs: where the repository is, a free port,
an environment without launcher or rankwise variables, and whether this is CI.

The pytest process itself may run under SLURM, torchrun or MPI, or with a developer's
``RANKWISE_*`` settings; none of that may leak into the jobs a test starts, or a
"single process" job would join the outer one.
"""

from __future__ import annotations

import importlib
import os
import socket
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
PYTHON = sys.executable

LAUNCH_PREFIXES = ("RANKWISE_", "SLURM_", "OMPI_", "PMI_", "PMIX_", "MPI_", "TORCHELASTIC_")
LAUNCH_NAMES = frozenset(
    {
        "RANK",
        "WORLD_SIZE",
        "LOCAL_RANK",
        "LOCAL_WORLD_SIZE",
        "GROUP_RANK",
        "GROUP_WORLD_SIZE",
        "MASTER_ADDR",
        "MASTER_PORT",
    }
)


def in_ci() -> bool:
    """``CI`` set to 1/true/yes: optional dependencies (PostgreSQL, Chromium, torch) must
    be there, so a test that needs one fails instead of skipping."""
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def skip_or_fail(reason: str) -> Any:
    """Skip the test (or the module, at import) locally; fail it under CI, where what it
    needs must be there. Every test that cannot run here goes through this."""
    import pytest

    if in_ci():
        pytest.fail(f"CI is set but this test cannot run: {reason}", pytrace=False)
    pytest.skip(reason, allow_module_level=True)


def need(module: str) -> Any:
    """Import an optional dependency a test needs (at module level or in a test): skip
    without it locally, fail under CI (``skip_or_fail``). Tests marked ``torchrun`` or
    ``torch`` get this for torch from conftest; never ``pytest.importorskip``, which
    skips under CI too."""
    try:
        return importlib.import_module(module)
    except ImportError:
        return skip_or_fail(f"needs {module}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without any launcher's or rankwise's variables, with
    the repository on ``PYTHONPATH`` and one thread per BLAS pool; then ``extra``."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(LAUNCH_PREFIXES) and k not in LAUNCH_NAMES
    }
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env["OMP_NUM_THREADS"] = "1"
    env.update(extra)
    return env
