"""Turning what users pass to ``log()`` into numbers; runs on the writer thread.

Accepted as they are: ``bool``, ``int``, ``float`` (NaN and ±Inf included), numpy scalars
and 0-d arrays, torch tensors with one element (CPU or CUDA; read here, on the writer
thread, so the training thread never waits for the device), and any ``numbers.Real``.
Nested mappings are flattened with ``/`` (``{"train": {"loss": x}}`` → ``train/loss``).
Anything else is skipped with one warning per key; the rest of the call is kept. So is a
key that breaks ``rankwise.names``' key rule (control or bidi characters, not NFC, over
250 characters): a stored key is always one the dashboard and the API can show as is.

``log()`` itself only copies the dict (a per-value type check there would triple its
cost), so a value is read here, when the writer thread encodes it — within
``flush_interval`` of the call. A tensor or array that the program modifies *in place*
after ``log()`` may therefore be recorded with its newer value: log a fresh tensor (the
usual ``loss``), a Python number, or ``t.clone()`` of a buffer you reuse.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Mapping
from typing import Any

from ..names import KEY_RULE, is_key
from .encoder import rich_value

Number = bool | int | float
_INT64 = 2**63
_PLAIN = (float, int, bool)


def to_number(value: Any) -> Number | None:
    """The number ``value`` stands for, or None when it is not one."""
    cls = value.__class__
    if cls is float or cls is bool:
        return value  # type: ignore[no-any-return]
    if cls is int:
        return value if -_INT64 <= value < _INT64 else float(value)
    item = getattr(value, "item", None)
    if item is not None and callable(item):
        # numpy scalars / arrays and torch tensors: exactly one element
        size = getattr(value, "size", None)
        numel = getattr(value, "numel", None)
        try:
            n = numel() if callable(numel) else (size if isinstance(size, int) else 1)
            if n != 1:
                return None
            if hasattr(value, "detach"):
                value = value.detach()
            out = item()
        except Exception:
            return None
        return to_number(out) if out.__class__ in _PLAIN else _real(out)
    return _real(value)


def _real(value: Any) -> Number | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, numbers.Integral):
        return to_number(int(value))
    # Real (Fraction, ...) and non-complex Numbers (Decimal) convert to float.
    real = isinstance(value, numbers.Real)
    if real or (isinstance(value, numbers.Number) and not isinstance(value, numbers.Complex)):
        try:
            return float(value)
        except (TypeError, ValueError, OverflowError):
            return None
    return None


def _describe(value: Any) -> str:
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"a {type(value).__name__} ({text})"


_FAST_VALUES = frozenset((float, bool))
_FAST_KEYS = frozenset((str,))
# Keys already found valid (``names.is_key``): the usual call logs the same few keys
# every step, so each is checked once. Bounded: past the cap, keys are checked each time.
_VALID_KEYS: set[str] = set()
_VALID_KEYS_CAP = 100_000


def _key_ok(name: str, warn_once: Callable[[str, str], None]) -> bool:
    if name in _VALID_KEYS:
        return True
    if is_key(name):
        if len(_VALID_KEYS) < _VALID_KEYS_CAP:
            _VALID_KEYS.add(name)
        return True
    warn_once(
        f"name:{name!r}",
        f"log() key {_short(name)} cannot be stored, skipped (this warning is shown once per "
        f"key): {KEY_RULE}.",
    )
    return False


def _short(name: str) -> str:
    text = repr(name)
    return text if len(text) <= 80 else text[:77] + "..."


def coerce(
    data: Mapping[Any, Any],
    warn_once: Callable[[str, str], None],
    prefix: str = "",
    out: dict[str, Number] | None = None,
    rich: list[tuple[str, Any]] | None = None,
) -> dict[str, Number]:
    """Metric values of one ``log()`` call as ``{str: number}``; warns about the rest.

    ``data`` is the private copy ``log()`` made: when every key is a ``str`` and every
    value a ``float`` or ``bool`` (the usual call) it is returned as it is. Rich values
    (``rankwise.Image``...) that ``log()`` did not take itself go to ``rich`` as ``(key,
    value)`` when it is given.
    """
    if out is None:
        if (
            _FAST_VALUES.issuperset(map(type, data.values()))
            and _FAST_KEYS.issuperset(map(type, data))
            and _VALID_KEYS.issuperset(data)
        ):
            return data  # type: ignore[return-value]
        out = {}
    for key, value in data.items():
        if key.__class__ is not str:
            if isinstance(key, str):
                key = str(key)
            else:
                warn_once(
                    f"key:{key!r}",
                    f"log() key {key!r} is a {type(key).__name__}, not a str: skipped. "
                    "Use string keys such as 'train/loss'.",
                )
                continue
        if not key:
            warn_once(
                f"key:{prefix}",
                f"log() key {prefix!r} is empty: skipped (shown once). Name every metric, "
                "for example 'train/loss'.",
            )
            continue
        name = prefix + key
        cls = value.__class__
        if cls is float or cls is bool or (cls is int and -_INT64 <= value < _INT64):
            if _key_ok(name, warn_once):
                out[name] = value
            continue
        if isinstance(value, Mapping):
            coerce(value, warn_once, name + "/", out, rich)
            continue
        if not _key_ok(name, warn_once):
            continue
        number = to_number(value)
        if number is None and rich is not None and rich_value(value):
            rich.append((name, value))
            continue
        if number is None:
            warn_once(
                f"value:{name}",
                f"log() value for key {name!r} is {_describe(value)}, not a number: skipped "
                "(this warning is shown once per key). Log int, float, bool, a numpy scalar "
                "or a one-element tensor; an array as rankwise.Image(x) or "
                "rankwise.Histogram(x).",
            )
            continue
        out[name] = number
    return out
