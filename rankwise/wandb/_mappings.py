"""``run.config`` and ``run.summary`` with W&B's semantics (``wandb_config.py``,
``wandb_summary.py``), recorded through the rankwise run underneath.

Config: attribute and item access (a missing attribute is ``AttributeError``, a missing
item ``KeyError``); keys starting with ``_`` are kept but hidden from ``keys``/``items``;
leading and trailing ``-`` are stripped from keys (``--lr`` -> ``lr``); changing a key
to a *different* value raises ``ConfigError`` unless ``allow_val_change=True``;
``update`` takes a dict, ``argparse.Namespace``, absl FLAGS, an object's ``__dict__`` or
the path of a YAML file; ``setdefaults`` sets only missing keys. A media value raises
``TypeError`` (as in W&B).

Summary: the last value of every logged key (or its ``define_metric`` aggregates) unless
written explicitly; an explicit write pins the key. A missing attribute raises
``KeyError`` (W&B's quirk); ``dict(summary)`` works.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ..media.base import Rich
from ._history import Metrics, _plain
from .errors import ConfigError

Record = Callable[[dict[str, Any]], None]


def _clean_key(key: Any) -> str:
    text = str(key)
    return text.strip("-") or text


def friendly(value: Any) -> Any:
    """W&B's ``json_friendly`` for config values."""
    if isinstance(value, Rich):
        raise TypeError(f"a {type(value).__name__} cannot be a config value: log it with wandb.log")
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, Mapping):
        return {str(k): friendly(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [friendly(v) for v in value]
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    item = getattr(value, "item", None)
    if callable(item) and getattr(value, "ndim", 1) == 0:
        return item()
    tolist = getattr(value, "tolist", None)
    if callable(tolist) and hasattr(value, "shape"):
        return tolist()
    return value


def as_items(d: Any) -> dict[str, Any]:
    """A dict of what ``config.update(d)`` / ``init(config=d)`` accepts."""
    if d is None:
        return {}
    if isinstance(d, (str, os.PathLike)):
        return _yaml(os.fspath(d))
    if isinstance(d, argparse.Namespace):
        return dict(vars(d))
    if isinstance(d, Mapping):
        return dict(d)
    flags = getattr(d, "flag_values_dict", None)
    if callable(flags):  # absl FLAGS
        return dict(flags())
    if hasattr(d, "__dict__"):
        return {k: v for k, v in vars(d).items() if not k.startswith("__")}
    raise TypeError(f"config cannot take a {type(d).__name__}: give a dict")


def clean_items(d: Any) -> dict[str, Any]:
    """``as_items`` with W&B's key stripping and value conversion applied."""
    return {_clean_key(k): friendly(v) for k, v in as_items(d).items()}


def _yaml(path: str) -> dict[str, Any]:
    try:
        import yaml  # type: ignore[import-untyped]
    except ImportError:
        raise ConfigError(f"config path {path!r} needs PyYAML: pip install pyyaml") from None
    with open(path, encoding="utf-8") as f:
        loaded = yaml.safe_load(f) or {}
    if not isinstance(loaded, dict):
        raise ConfigError(f"config file {path!r} does not hold a mapping")
    # W&B's config-defaults.yaml form: {key: {"value": v, "desc": ...}}
    return {
        k: v["value"] if isinstance(v, dict) and "value" in v else v
        for k, v in loaded.items()
        if k != "wandb_version"
    }


class Config:
    """``wandb.config`` / ``run.config``."""

    _items: dict[str, Any]
    _record: Record | None
    _locked: dict[str, Any]

    def __init__(self, record: Record | None = None) -> None:
        object.__setattr__(self, "_items", {})
        object.__setattr__(self, "_record", record)
        object.__setattr__(self, "_locked", {})

    def _set(self, items: Mapping[str, Any], allow_val_change: bool | None) -> None:
        changed: dict[str, Any] = {}
        for raw, value in items.items():
            key = _clean_key(raw)
            value = friendly(value)
            if key in self._locked:
                continue
            if key in self._items and not allow_val_change and self._items[key] != value:
                raise ConfigError(
                    f'Attempted to change value of key "{key}" from {self._items[key]} to '
                    f"{value}\nIf you really want to do this, pass allow_val_change=True "
                    "to config.update()"
                )
            self._items[key] = value
            changed[key] = value
        if changed and self._record is not None:
            self._record(changed)

    # -- writing --------------------------------------------------------------------
    def update(self, d: Any = None, allow_val_change: bool | None = None) -> None:
        self._set(as_items(d), allow_val_change)

    def setdefaults(self, d: Any) -> None:
        items = as_items(d)
        self._set({k: v for k, v in items.items() if _clean_key(k) not in self._items}, True)

    def update_locked(
        self, d: Any, user: str | None = None, _allow_val_change: bool = False
    ) -> None:
        items = {_clean_key(k): v for k, v in as_items(d).items()}
        self._set(items, True)
        self._locked.update(dict.fromkeys(items, user))

    def merge_locked(self, d: Any, user: str | None = None) -> None:
        self.update_locked(d, user)

    def __setitem__(self, key: str, value: Any) -> None:
        self._set({key: value}, False)

    def __setattr__(self, key: str, value: Any) -> None:
        self._set({key: value}, False)

    def __delitem__(self, key: str) -> None:
        del self._items[key]

    def persist(self) -> None:
        """Recorded as set: nothing to do."""

    # -- reading --------------------------------------------------------------------
    def __getitem__(self, key: str) -> Any:
        return self._items[key]

    def __getattr__(self, key: str) -> Any:
        if key.startswith("__"):
            raise AttributeError(key)
        try:
            return self._items[key]
        except KeyError:
            raise AttributeError(f"'Config' object has no attribute {key!r}") from None

    def get(self, key: str, default: Any = None) -> Any:
        return self._items.get(key, default)

    def keys(self) -> list[str]:
        return [k for k in self._items if not k.startswith("_")]

    def items(self) -> list[tuple[str, Any]]:
        return [(k, v) for k, v in self._items.items() if not k.startswith("_")]

    def values(self) -> list[Any]:
        return [v for _, v in self.items()]

    def as_dict(self) -> dict[str, Any]:
        return dict(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def __len__(self) -> int:
        return len(self.keys())

    def __repr__(self) -> str:
        return repr(dict(self.items()))


class Summary:
    """``wandb.summary`` / ``run.summary``."""

    _metrics: Metrics
    _pinned: dict[str, Any]
    _deleted: set[str]
    _record: Record | None

    def __init__(self, metrics: Metrics, record: Record | None = None) -> None:
        object.__setattr__(self, "_metrics", metrics)
        object.__setattr__(self, "_pinned", {})
        object.__setattr__(self, "_deleted", set())
        object.__setattr__(self, "_record", record)

    def _lookup(self, key: str) -> tuple[bool, Any]:
        if key in self._pinned:
            return True, self._pinned[key]
        if key in self._deleted:
            return False, None
        return self._metrics.summary_value(key)

    def __getitem__(self, key: str) -> Any:
        found, value = self._lookup(key)
        if not found:
            raise KeyError(key)
        return value

    def __getattr__(self, key: str) -> Any:
        if key.startswith("__"):
            raise AttributeError(key)
        return self[key]  # KeyError when missing, as W&B's summary does

    def get(self, key: str, default: Any = None) -> Any:
        found, value = self._lookup(key)
        return value if found else default

    def keys(self) -> list[str]:
        out = [k for k in self._metrics.last if self._lookup(k)[0]]
        out += [k for k in self._pinned if k not in self._metrics.last]
        return out

    def items(self) -> list[tuple[str, Any]]:
        return [(k, self[k]) for k in self.keys()]

    def values(self) -> list[Any]:
        return [self[k] for k in self.keys()]

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self._lookup(key)[0]

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def __len__(self) -> int:
        return len(self.keys())

    def __setitem__(self, key: str, value: Any) -> None:
        self.update({key: value})

    def __setattr__(self, key: str, value: Any) -> None:
        self.update({key: value})

    def __delitem__(self, key: str) -> None:
        if not self._lookup(key)[0]:
            raise KeyError(key)
        self._pinned.pop(key, None)
        self._deleted.add(key)

    def __delattr__(self, key: str) -> None:
        del self[key]

    def update(self, d: Mapping[str, Any] | None = None, **kw: Any) -> None:
        items = {str(k): _plain(v) for k, v in {**(d or {}), **kw}.items()}
        for key in items:
            self._deleted.discard(key)
        self._pinned.update(items)
        if items and self._record is not None:
            self._record(items)

    def unpinned(self) -> dict[str, Any]:
        """Keys with a ``define_metric`` summary, as they stand (written at finish)."""
        out = {}
        for key in self._metrics.last:
            if key in self._pinned or key in self._deleted:
                continue
            d = self._metrics.find(key)
            if d is not None and d.summary:
                found, value = self._metrics.summary_value(key)
                if found:
                    out[key] = value
        return out

    def __repr__(self) -> str:
        return repr(dict(self.items()))
