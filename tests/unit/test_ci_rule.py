"""The CI rule itself: what a test needs and lacks skips it locally and fails it under CI
(``tests.helpers.env``); ``.ci/run`` sets ``CI`` so that the rule holds there."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from tests.helpers.env import REPO, need, skip_or_fail

MISSING = "rankwise_no_such_module_for_the_ci_rule"


def outcome(fn: Callable[[], object]) -> str:
    """What ``fn`` does to the test calling it: skip, fail or nothing (caught here, so
    that a helper that skips where it must fail cannot skip this test too)."""
    try:
        fn()
    except pytest.fail.Exception as exc:
        return f"failed: {exc}"
    except pytest.skip.Exception as exc:
        return f"skipped: {exc}"
    return "ran"


def test_a_missing_module_skips_locally(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    assert outcome(lambda: need(MISSING)) == f"skipped: needs {MISSING}"


@pytest.mark.parametrize("ci", ["true", "1", "yes"])
def test_a_missing_module_fails_under_ci(monkeypatch: pytest.MonkeyPatch, ci: str) -> None:
    monkeypatch.setenv("CI", ci)
    got = outcome(lambda: need(MISSING))
    assert got == f"failed: CI is set but this test cannot run: needs {MISSING}", got
    got = outcome(lambda: skip_or_fail("needs root"))
    assert got == "failed: CI is set but this test cannot run: needs root", got


def test_a_present_module_is_returned(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    assert need("json").dumps([1]) == "[1]"


def test_no_test_skips_around_the_rule() -> None:
    """``pytest.importorskip`` (and a bare ``pytest.skip`` on a missing dependency)
    would skip under CI too: tests go through ``need``/``skip_or_fail`` instead."""
    offenders = [
        f"{path.relative_to(REPO)}:{n}"
        for path in sorted((REPO / "tests").rglob("*.py"))
        if path.name != "test_ci_rule.py"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"\bimportorskip\(", line)
    ]
    assert not offenders, offenders


def test_ci_run_exports_ci() -> None:
    script = (REPO / ".ci" / "run").read_text()
    assert re.search(r"^export CI=true$", script, re.M), "the CI entry point must set CI"
