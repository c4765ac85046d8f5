"""``run.config`` and ``run.summary``: mutable mappings whose changes are recorded."""

from __future__ import annotations

import argparse
import dataclasses
import enum
import os
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from typing import Any

from .. import _log
from ..errors import ConfigError, UsageError

_SCALARS = (str, int, float, bool, type(None))


Warn = Callable[[str, str], None]  # (once-key, message)


def _warn_always(_key: str, message: str) -> None:
    _log.warn(message)


def to_json_like(value: Any, path: str, what: str = "config", warn: Warn = _warn_always) -> Any:
    """``value`` as str / number / bool / None / list / dict.

    A value that is none of these and converts to none of them is stored as its string
    form (``str(value)``), with a warning naming the key: a config or summary value never
    stops training. ``what`` ("config" or "summary") names the mapping in messages.
    """
    if isinstance(value, _SCALARS):
        return value
    if isinstance(value, Mapping):
        return {
            _key(k, path, what, warn): to_json_like(v, f"{path}.{k}", what, warn)
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [to_json_like(v, f"{path}[{i}]", what, warn) for i, v in enumerate(value)]
    if isinstance(value, (set, frozenset)):
        return [to_json_like(v, f"{path}[]", what, warn) for v in sorted(value, key=repr)]
    if isinstance(value, enum.Enum):
        return to_json_like(value.value, path, what, warn)
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, argparse.Namespace):
        return to_json_like(vars(value), path, what, warn)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_json_like(_fields(value), path, what, warn)
    item = getattr(value, "item", None)
    if callable(item) and getattr(value, "ndim", None) == 0:  # numpy / torch scalars
        try:
            return to_json_like(item(), path, what, warn)
        except Exception:
            pass
    text = _string_form(value)
    warn(
        f"{what}:{path}",
        f"{what} value {path!r} is a {type(value).__name__}, not JSON-like: stored as its "
        f"string form {text[:60]!r}{'...' if len(text) > 60 else ''}. Store a str, number, "
        "bool, None, list or dict to keep it structured.",
    )
    return text


def _fields(obj: Any) -> dict[str, Any]:
    # Not dataclasses.asdict(): it deep-copies every field and raises on a lock or a
    # socket; nested dataclasses are converted by to_json_like anyway.
    return {f.name: getattr(obj, f.name, None) for f in dataclasses.fields(obj)}


def _string_form(value: Any) -> str:
    try:
        return str(value)
    except Exception:
        return object.__repr__(value)


def _key(key: Any, path: str, what: str = "config", warn: Warn = _warn_always) -> str:
    if isinstance(key, str):
        return key
    if not isinstance(key, (int, float, bool)):
        warn(
            f"{what}-key:{path}:{key!r}",
            f"{what} key {key!r} under {path!r} is a {type(key).__name__}, not a str: "
            "stored as its string form. Use string keys.",
        )
    return _string_form(key)


def as_config_dict(config: Any, warn: Warn = _warn_always) -> dict[str, Any]:
    """What ``init(config=...)`` accepts: a mapping, argparse.Namespace or dataclass."""
    if config is None:
        return {}
    if isinstance(config, argparse.Namespace):
        config = vars(config)
    elif dataclasses.is_dataclass(config) and not isinstance(config, type):
        config = _fields(config)
    if isinstance(config, (list, tuple)):
        try:
            config = dict(config)
        except (TypeError, ValueError):
            pass
    if not isinstance(config, Mapping):
        raise ConfigError(
            f"config must be a dict, argparse.Namespace or dataclass, not {type(config).__name__}"
        )
    return {
        _key(k, "config", "config", warn): to_json_like(v, str(k), "config", warn)
        for k, v in config.items()
    }


class _Once:
    """Warns once per key for the life of one mapping."""

    def __init__(self) -> None:
        self.seen: set[str] = set()

    def __call__(self, key: str, message: str) -> None:
        if key not in self.seen:
            self.seen.add(key)
            _log.warn(message)


class Config(MutableMapping[str, Any]):
    """``run.config``: a dict whose updates are recorded in the stream.

    Keys also read as attributes (``run.config.lr``).
    """

    def __init__(self, initial: dict[str, Any], on_change: Callable[[dict[str, Any]], None]):
        object.__setattr__(self, "_data", dict(initial))
        object.__setattr__(self, "_on_change", on_change)
        object.__setattr__(self, "_warn", _Once())

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.update({key: value})

    def __delitem__(self, key: str) -> None:
        raise UsageError("config keys cannot be deleted once recorded; set a new value instead")

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def update(self, other: Any = (), /, **kwargs: Any) -> None:
        items = as_config_dict(other, self._warn) if not isinstance(other, tuple) else {}
        items.update(as_config_dict(kwargs, self._warn))
        if items:
            self._data.update(items)
            self._on_change(items)

    def __getattr__(self, name: str) -> Any:
        try:
            return self._data[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name: str, value: Any) -> None:
        self[name] = value

    def __repr__(self) -> str:
        return f"Config({self._data!r})"


class Summary(MutableMapping[str, Any]):
    """``run.summary``: the last logged value of each metric, unless the user set one."""

    def __init__(
        self,
        last_values: Callable[[], Mapping[str, Any]],
        on_change: Callable[[dict[str, Any]], None],
    ) -> None:
        self._user: dict[str, Any] = {}
        self._last_values = last_values
        self._on_change = on_change
        self._warn = _Once()

    def _merged(self) -> dict[str, Any]:
        merged = dict(self._last_values())
        merged.update(self._user)
        return merged

    def __getitem__(self, key: str) -> Any:
        if key in self._user:
            return self._user[key]
        return self._last_values()[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.update({key: value})

    def __delitem__(self, key: str) -> None:
        raise UsageError("summary keys cannot be deleted; set a new value instead")

    def __iter__(self) -> Iterator[str]:
        return iter(self._merged())

    def __len__(self) -> int:
        return len(self._merged())

    def update(self, other: Any = (), /, **kwargs: Any) -> None:
        raw = dict(other, **kwargs)
        w = self._warn
        items = {
            _key(k, "summary", "summary", w): to_json_like(v, str(k), "summary", w)
            for k, v in raw.items()
        }
        if items:
            self._user.update(items)
            self._on_change(items)

    def __repr__(self) -> str:
        return f"Summary({self._merged()!r})"
