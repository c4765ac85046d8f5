"""W&B's row rules for ``log(data, step=None, commit=None)``, and ``define_metric``.

State: the current step ``S`` and one pending row. A call with ``step > S`` first emits
the pending row (if it holds anything) at ``S`` and moves ``S`` to ``step``; ``step ==
S`` merges into the pending row. The call then flushes when ``commit`` says so, else
when no ``step`` was given: the pending row is emitted at ``S`` and ``S`` goes up by one.
A stepped call therefore waits until the step advances, a call without a step comes, a
``commit=True`` or ``finish()``. Nested dicts merge leaf-wise while pending and are
flattened with dots when emitted (``{"a": {"b": 1}}`` -> ``a.b``).

The one deliberate difference: ``step < S`` is not dropped (W&B drops the whole call
with a warning) but emitted at once as its own row at that lower step (rankwise keeps
out-of-order steps; a warning says so once).

Values are converted as W&B's ``json_friendly`` does, then handed to rankwise: a 0-d
tensor or a one-element array becomes its number; a longer array a 32-bin
``Histogram`` (W&B keeps arrays of up to 32 values as a list; rankwise has no list
metric, so those become a histogram too); numpy scalars their Python value.

``define_metric`` (``Metrics``): names are exact, or globs with one trailing ``*``
(prefix match; keys starting with ``_`` never match a glob; an exactly defined key is
not matched by a glob). ``step_metric`` with ``step_sync`` (default on) inserts the last
seen value of the step metric into an emitted row that has the metric but not its step.
``summary`` is a comma list of ``min, max, mean, last, first, none``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ._term import warn_once
from .errors import Error

Emit = Callable[[int, dict[str, Any]], None]
SUMMARY_AGGS = ("min", "max", "mean", "last", "first", "none")
_TORCH_MODULES = ("torch",)
_PLAIN = frozenset((int, float, bool, str))


class History:
    """One process's pending row and step, emitting rows through ``emit(step, row)``."""

    def __init__(self, emit: Emit, metrics: Metrics | None = None, start: int = 0) -> None:
        self._emit = emit
        self.metrics = metrics or Metrics()
        self.step = start
        self._pending: dict[str, Any] = {}

    def log(self, data: Any, step: Any = None, commit: bool | None = None) -> None:
        if not isinstance(data, Mapping):
            raise TypeError("wandb.log must be passed a dictionary")
        for key in data:
            if key.__class__ is not str and not isinstance(key, str):
                raise TypeError(f"Key values passed to `wandb.log` must be strings, not {key!r}")
        if "_step" in data:
            data = {k: v for k, v in data.items() if k != "_step"}
        if step is not None:
            try:
                step = _int_step(step)
            except (TypeError, ValueError):
                raise TypeError(f"step must be an integer, not {step!r}") from None
            if step < self.step:
                warn_once(
                    "lower-step",
                    f"Tried to log to step {step} that is less than the current step "
                    f"{self.step}. W&B would drop this call; rankwise keeps it as a row of "
                    "its own at that step (charts by step fold back). Shown once.",
                )
                self.emit(step, _merge({}, data))
                return
            if step > self.step:
                self.flush_pending()
                self.step = step
        _merge(self._pending, data)
        flush = commit if commit is not None else step is None
        if flush:
            self.flush_pending()
            self.step += 1

    def flush_pending(self) -> None:
        """Emit the pending row at the current step, if it holds anything."""
        if self._pending:
            row, self._pending = self._pending, {}
            self.emit(self.step, row)

    def emit(self, step: int, row: dict[str, Any]) -> None:
        values: dict[str, Any] = {}
        _flatten(row, "", values)
        for key, value in values.items():
            if value.__class__ not in _PLAIN:
                values[key] = convert(value)
        values = self.metrics.on_row(values)
        if values:
            self._emit(step, values)


def _int_step(step: Any) -> int:
    if isinstance(step, bool):
        raise TypeError
    value = int(step)
    if value != step:
        raise ValueError
    return value


def _merge(into: dict[str, Any], data: Mapping[str, Any]) -> dict[str, Any]:
    for k, v in data.items():
        if v.__class__ in _PLAIN:
            into[k] = v
        elif isinstance(v, Mapping):
            sub = into.get(k)
            if not isinstance(sub, dict):
                sub = into[k] = {}
            _merge(sub, v)
        else:
            into[k] = v
    return into


def _flatten(row: Mapping[str, Any], prefix: str, out: dict[str, Any]) -> None:
    for k, v in row.items():
        key = prefix + k if prefix else k
        if v.__class__ is dict:
            _flatten(v, key + ".", out)
        else:
            out[key] = v


def convert(value: Any) -> Any:
    """W&B's ``json_friendly`` for what rankwise can record (module docstring)."""
    cls = value.__class__
    if cls in (int, float, bool, str) or value is None:
        return value
    module = cls.__module__.split(".")[0]
    if module in _TORCH_MODULES and hasattr(value, "detach"):
        value = value.detach()
        if value.dim() == 0 or value.numel() == 1:
            return value  # rankwise reads one-element tensors on its writer thread
        value = value.cpu().numpy()
        module = "numpy"
    if module == "numpy":
        size = getattr(value, "size", None)
        if getattr(value, "ndim", 0) == 0 or size == 1:
            try:
                return value.item() if hasattr(value, "item") else value
            except (TypeError, ValueError):
                return value
        if size is not None and hasattr(value, "shape"):
            if size == 0:
                return None
            from .data_types import Histogram

            return Histogram(value.reshape(-1), num_bins=32)
    if (
        isinstance(value, (list, tuple))
        and value
        and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
    ):
        from .data_types import Histogram

        return Histogram(list(value), num_bins=32)
    return value


@dataclass
class Definition:
    name: str
    step_metric: str | None = None
    step_sync: bool = False
    summary: tuple[str, ...] = ()
    goal: str | None = None
    hidden: bool = False


@dataclass
class Aggregate:
    first: Any = None
    last: Any = None
    min: float | None = None
    max: float | None = None
    total: float = 0.0
    count: int = 0

    def add(self, value: Any) -> None:
        if self.count == 0 and self.first is None:
            self.first = value
        self.last = value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            v = float(value)
            self.min = v if self.min is None else min(self.min, v)
            self.max = v if self.max is None else max(self.max, v)
            self.total += v
            self.count += 1
        elif hasattr(value, "item") and getattr(value, "numel", lambda: 0)() == 1:
            self.add(float(value.item()))


@dataclass
class Metrics:
    """``define_metric`` definitions, the last value of each key and its aggregates."""

    exact: dict[str, Definition] = field(default_factory=dict)
    globs: list[Definition] = field(default_factory=list)
    last: dict[str, Any] = field(default_factory=dict)
    aggs: dict[str, Aggregate] = field(default_factory=dict)
    order: list[Definition] = field(default_factory=list)  # as defined, for as_config

    def define(
        self,
        name: str,
        step_metric: str | None = None,
        step_sync: bool | None = None,
        hidden: bool | None = None,
        summary: str | None = None,
        goal: str | None = None,
    ) -> Definition:
        if not isinstance(name, str) or not name:
            raise Error("define_metric() requires non-empty string name")
        star = name.find("*")
        if star != -1 and star != len(name) - 1:
            raise Error(
                f"define_metric({name!r}): only a trailing '*' glob is supported (e.g. 'train/*')"
            )
        aggs: tuple[str, ...] = ()
        if summary:
            aggs = tuple(s.strip() for s in summary.split(",") if s.strip())
            for agg in aggs:
                if agg not in SUMMARY_AGGS:
                    raise Error(
                        f"define_metric(summary={summary!r}): {agg!r} is not one of "
                        f"{', '.join(SUMMARY_AGGS)}"
                    )
        if goal not in (None, "minimize", "maximize"):
            raise Error(f"define_metric(goal={goal!r}): use 'minimize' or 'maximize'")
        sync = bool(step_metric) if step_sync is None else bool(step_sync)
        d = Definition(name, step_metric, sync, aggs, goal, bool(hidden))
        self.order = [o for o in self.order if o.name != name] + [d]
        if star == -1:
            self.exact[name] = d
        else:
            self.globs = [g for g in self.globs if g.name != name] + [d]
        return d

    def find(self, key: str) -> Definition | None:
        d = self.exact.get(key)
        if d is not None or key.startswith("_"):
            return d
        for g in reversed(self.globs):
            if key.startswith(g.name[:-1]):
                return g
        return None

    def on_row(self, row: dict[str, Any]) -> dict[str, Any]:
        if self.exact or self.globs:
            for key in list(row):
                d = self.find(key)
                if d is None:
                    continue
                step_key = d.step_metric if d.step_sync else None
                if step_key and step_key not in row and step_key in self.last:
                    row[step_key] = self.last[step_key]
                if d.summary:  # aggregates only where a definition asks for them
                    agg = self.aggs.get(key)
                    if agg is None:
                        agg = self.aggs[key] = Aggregate()
                    agg.add(row[key])
        self.last.update(row)
        return row

    def summary_value(self, key: str) -> tuple[bool, Any]:
        """(present, value): what ``summary[key]`` is without an explicit write."""
        if key not in self.last:
            return False, None
        d = self.find(key)
        if d is None or not d.summary:
            return True, _plain(self.last[key])
        if "none" in d.summary:
            return False, None
        agg = self.aggs.get(key) or Aggregate()
        out: dict[str, Any] = {}
        for name in d.summary:
            if name == "mean":
                out["mean"] = agg.total / agg.count if agg.count else None
            elif name in ("first", "last"):
                out[name] = _plain(getattr(agg, name))
            else:
                out[name] = getattr(agg, name)
        return True, out

    def as_config(self) -> list[dict[str, Any]]:
        """The definitions, as W&B stores them in config ``_wandb.m``."""
        out = []
        for d in self.order:
            item: dict[str, Any] = {"name": d.name}
            if d.step_metric:
                item["step_metric"] = d.step_metric
                item["step_sync"] = d.step_sync
            if d.summary:
                item["summary"] = list(d.summary)
            if d.goal:
                item["goal"] = d.goal
            if d.hidden:
                item["hidden"] = True
            out.append(item)
        return out


def _plain(value: Any) -> Any:
    item = getattr(value, "item", None)
    if callable(item):
        try:
            return item()
        except Exception:
            return value
    return value
