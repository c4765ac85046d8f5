"""Waiting for a condition in a test: poll it, and fail the test with the condition's
name when it does not hold in time (never a fixed sleep)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest


def wait_until(predicate: Callable[[], Any], timeout: float = 20.0, every: float = 0.05) -> Any:
    """Poll ``predicate`` until it returns something truthy; fail the test after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"condition not met within {timeout}s: {predicate}")
        time.sleep(every)
