"""Shared fixtures. Every test writes under tmp_path only."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PYTHON = sys.executable


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh RANKWISE_DIR; the current run of this process is finished afterwards."""
    d = tmp_path / "data"
    monkeypatch.setenv("RANKWISE_DIR", str(d))
    for name in list(os.environ):
        if name.startswith("RANKWISE_") and name != "RANKWISE_DIR" and not name.startswith(
            "RANKWISE_TEST_"
        ):
            monkeypatch.delenv(name)
    yield d
    import rankwise

    rankwise.finish()


@pytest.fixture
def fast() -> dict[str, float]:
    """Settings that make writer activity visible quickly in tests."""
    return {"flush_interval": 0.02, "heartbeat_interval": 0.2, "finish_timeout": 10.0}
