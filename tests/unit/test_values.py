"""What log() accepts as a number, and what it warns about."""

from __future__ import annotations

import decimal
import fractions
import math

import numpy as np
import pytest

from rankwise.sdk.values import coerce, to_number
from tests.helpers.env import need

torch = need("torch")  # log() takes tensors: these tests hand it real ones


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1, 1),
        (2.5, 2.5),
        (True, True),
        (np.float32(1.5), 1.5),
        (np.int64(7), 7),
        (np.bool_(True), True),
        (np.array(3.0), 3.0),
        (torch.tensor(4.0), 4.0),
        (torch.tensor([5]), 5),
        (torch.tensor(2.0, requires_grad=True) * 2, 4.0),
        (fractions.Fraction(1, 4), 0.25),
        (decimal.Decimal("0.5"), 0.5),
        (2**70, float(2**70)),
    ],
)
def test_numbers(value: object, expected: object) -> None:
    out = to_number(value)
    assert out == expected
    assert type(out) is type(expected)


@pytest.mark.parametrize("value", ["1.0", None, [1, 2], np.zeros(3), torch.zeros(2), object(), 1j])
def test_not_numbers(value: object) -> None:
    assert to_number(value) is None


def test_nan_and_inf_are_kept() -> None:
    out = coerce({"a": math.nan, "b": np.float64("inf"), "c": torch.tensor(-math.inf)}, _no_warn)
    assert math.isnan(out["a"]) and out["b"] == math.inf and out["c"] == -math.inf


def _no_warn(key: str, message: str) -> None:
    raise AssertionError(message)


def test_bad_keys_and_values_warn_once_and_keep_the_rest() -> None:
    seen: dict[str, str] = {}
    out = coerce(
        {"ok": 1.0, 3: 2.0, "text": "hi", "none": None, "nested": {"x": 1}}, seen.setdefault
    )
    assert out == {"ok": 1.0, "nested/x": 1}
    assert set(seen) == {"key:3", "value:text", "value:none"}
    assert "'text'" in seen["value:text"] and "not a number" in seen["value:text"]
    assert "string keys" in seen["key:3"]
