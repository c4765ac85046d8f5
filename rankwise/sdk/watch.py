"""``run.watch(model)``: histograms of a model's gradients and parameters, and grad norms.

What is recorded, every ``log_freq``-th backward pass of the model:

* ``gradients/<name>`` (``log="gradients"`` or ``"all"``): a 64-bin histogram of each
  parameter's gradient, as the parameter's own tensor hook sees it: under DDP that is
  the rank's local gradient, before the all-reduce, so ``ranks="all"`` shows a rank whose
  data or numerics differ.
* ``parameters/<name>`` (``log="parameters"`` or ``"all"``): the same of each parameter's
  values, taken at the end of that backward pass (before the optimizer step).
* ``grad_norm/<name>`` and ``grad_norm/total`` (every ``log`` but ``"parameters"``;
  ``log=None`` records only these): the L2 norm of each parameter's gradient and of all
  of them together, as plain metrics, so in a shared run they chart like any metric and
  get the cross-rank band. A gradient with a NaN or Inf gives a NaN or Inf norm.

Names are ``named_parameters()``'s, as W&B gives them: a DDP-wrapped model's are
``module.fc.weight``. The first model watched in a run has no prefix; later ones get
W&B's ``graph_<n>`` with no separator (``gradients/graph_1fc.weight``,
``grad_norm/graph_1total``).

Histograms are exactly ``np.histogram(finite_values, bins=64)``'s, edges and counts, with
NaN, +Inf and -Inf counted apart (``HistogramRec.nan``/``posinf``/``neginf``), computed on
the tensor's own device (``rankwise.sdk.tensor_stats``). Nothing on the training thread
waits for a GPU: the hooks only queue device kernels, and at the end of the pass the
rows are stacked into one tensor per device with a CUDA event recorded; the stream
writer's thread waits for that event and copies the rows to the host when it builds the
records. On the CPU, where there is no device to wait for, numpy bins the values.

Counting: one counter per watched model counts its backward passes (a pass is one
autograd graph task in which any of its parameters got a gradient). DDP runs the same
backward passes on every rank, so every rank records at the same passes and the
cross-rank band lines up. Values are recorded at ``step = pass - 1``: with one backward
and one ``log()`` a training step from step 0, that is the step of that iteration's loss
(W&B's row). They do not move the run's step: ``log()`` goes on numbering as before. With
gradient accumulation, ``log_freq`` and the step count micro-batches. W&B counts each
gradient hook on its own and takes parameters at forward calls; one counter keeps every
parameter of a pass together, and a model whose parameters need no gradient records
nothing.

``watch`` twice on one model (or on a DDP wrapper and its ``.module``) does not add a
second set of hooks, unlike W&B (which adds one under a new ``graph_<n>`` prefix each
time): the model's settings are updated and its pass counter kept. ``unwatch(model)``
removes its hooks, ``unwatch()`` every model's; the run's end removes them too.

Bad arguments raise at the call (``ArgumentTypeError``, a ``TypeError``, for a
non-Module; ``UsageError``, a ``ValueError``, for ``log``, ``log_freq`` or ``ranks``), on
every rank alike. Nothing inside the hooks raises
into training: a failure is warned about once and that value skipped.
"""

from __future__ import annotations

import functools
import math
import threading
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .. import _log
from ..errors import ArgumentTypeError, UsageError
from ..names import is_key
from ..stream import records as R
from . import tensor_stats as stats
from .tensor_stats import BINS, EDGES, NAN, NORM, ROW

if TYPE_CHECKING:
    import torch

    from .handle import RunHandle

LOG_CHOICES = ("gradients", "parameters", "all", None)
RANKS_CHOICES = ("primary", "all")

WATCHER = "watch"  # the handle's slot holding the run's Watcher


def watch(
    run: RunHandle,
    models: Any,
    log: str | None = "gradients",
    log_freq: int = 100,
    ranks: str = "primary",
) -> None:
    """``run.watch``: see the module docstring."""
    modules = _modules(models, "watch")
    if log not in LOG_CHOICES:
        raise UsageError(
            f"run.watch(log={log!r}): use 'gradients', 'parameters', 'all' or None "
            "(None records only the gradient norms)"
        )
    if isinstance(log_freq, bool) or not isinstance(log_freq, int) or log_freq < 1:
        raise UsageError(f"run.watch(log_freq={log_freq!r}): give a whole number of passes >= 1")
    if ranks not in RANKS_CHOICES:
        raise UsageError(f"run.watch(ranks={ranks!r}): use 'primary' or 'all'")
    if not run.recording() or (ranks == "primary" and not run.is_primary):
        return
    if run.state() != "running":
        _log.warn(f"run.watch(): run {run.run_id!r} is {run.state()}; nothing watched")
        return
    watcher: Watcher | None = run.slots.get(WATCHER)
    if watcher is None:
        watcher = run.slots[WATCHER] = Watcher(run)
        run.add_component(watcher)
    for module in modules:
        watcher.watch(module, log, log_freq)


def unwatch(run: RunHandle, models: Any = None) -> None:
    """``run.unwatch``: remove the hooks of ``models`` (a module or a list), or of all."""
    watcher: Watcher | None = run.slots.get(WATCHER)
    if models is None:
        if watcher is not None:
            watcher.unwatch_all()
        return
    for module in _modules(models, "unwatch"):
        if watcher is not None and not watcher.unwatch(module):
            _log.warn(f"run.unwatch(): {type(module).__name__} was not watched; nothing removed")


def _modules(models: Any, what: str) -> list[Any]:
    import torch

    found = list(models) if isinstance(models, (list, tuple)) else [models]
    for model in found:
        if not isinstance(model, torch.nn.Module):
            raise ArgumentTypeError(
                f"run.{what}() takes a torch.nn.Module (the model you train, or its DDP "
                f"wrapper) or a list of them, not {type(model).__name__}"
            )
    return found


def _unwrap(model: torch.nn.Module) -> torch.nn.Module:
    """The module a DDP / DataParallel wrapper trains: one entry for both."""
    import torch

    wrappers = (torch.nn.parallel.DistributedDataParallel, torch.nn.DataParallel)
    inner = model.module if isinstance(model, wrappers) else model
    return inner if isinstance(inner, torch.nn.Module) else model


class Watcher:
    """The run's watched models (a ``Component``: the run's end removes their hooks)."""

    def __init__(self, handle: RunHandle) -> None:
        self.handle = handle
        self._models: dict[int, Watched] = {}
        self._count = 0  # models watched so far: W&B's graph_<n> prefix
        # A model watched again after unwatch() keeps its prefix, so its keys stay put.
        self._prefixes: weakref.WeakKeyDictionary[torch.nn.Module, str] = (
            weakref.WeakKeyDictionary()
        )
        self.warn_once = _log.Once()  # warn_once(key, message)

    def watch(self, model: torch.nn.Module, log: str | None, log_freq: int) -> None:
        for key, old in list(self._models.items()):
            if old.module() is None:  # dropped without unwatch(): forget it
                old.remove()
                del self._models[key]
        inner = _unwrap(model)
        entry = self._models.get(id(inner))
        if entry is None or entry.module() is not inner:
            prefix = self._prefixes.get(inner)
            if prefix is None:
                prefix = self._prefixes[inner] = f"graph_{self._count}" if self._count else ""
                self._count += 1
            entry = self._models[id(inner)] = Watched(self, inner, prefix)
        entry.configure(model, log, log_freq)

    def unwatch(self, model: torch.nn.Module) -> bool:
        inner = _unwrap(model)
        entry = self._models.get(id(inner))
        if entry is None or entry.module() is not inner:
            return False
        del self._models[id(inner)]
        entry.remove()
        return True

    def unwatch_all(self) -> None:
        for entry in self._models.values():
            entry.remove()
        self._models.clear()

    def stop(self, deadline: float) -> None:
        self.unwatch_all()
        if self.handle.slots.get(WATCHER) is self:
            del self.handle.slots[WATCHER]

    def recording(self) -> bool:
        return self.handle.recording()  # False in a forked child

    def failed(self, exc: BaseException) -> None:
        self.warn_once(
            f"fail:{type(exc).__name__}",
            f"run.watch could not record a histogram or norm ({exc!r}): that value is "
            "skipped and training goes on (shown once)",
        )

    def hand_off(self, batch: Batch) -> None:
        """Queue ``batch``'s records; the writer thread builds them, in order with log()."""
        put = self.handle.put_control
        if batch.norm_keys:
            put(batch.metrics)
        for i in range(len(batch.hist_keys)):
            put(functools.partial(batch.histogram, i))


class Watched:
    """One watched model: its parameters' hooks and its backward-pass counter."""

    def __init__(self, watcher: Watcher, module: torch.nn.Module, prefix: str) -> None:
        self.watcher = watcher
        self.module = weakref.ref(module)
        self.prefix = prefix
        self.passes = 0
        self.log: str | None = "gradients"
        self.log_freq = 100
        self._task: int | None = None  # the autograd graph task of the pass hooks are in
        self._logging = False  # this pass is recorded
        self._lock = threading.Lock()
        self._hooks: list[Any] = []
        self._names: list[str] = []
        # Weak: a model dropped without unwatch() does not stay alive through its watch.
        self._params: list[weakref.ref[torch.nn.Parameter]] = []
        # (parameter index, histogram row or None, norm) of this pass's gradients
        self._rows: list[tuple[int, torch.Tensor | None, torch.Tensor]] = []

    def configure(self, model: torch.nn.Module, log: str | None, log_freq: int) -> None:
        self.remove()
        self.log, self.log_freq = log, log_freq
        named = list(model.named_parameters())
        self._names = [name for name, _ in named]
        self._params = [weakref.ref(p) for _, p in named]
        for i, (_, p) in enumerate(named):
            if p.requires_grad:
                hook = functools.partial(self._on_grad, i)
                self._hooks.append(p.register_hook(hook))  # type: ignore[no-untyped-call]
        if not self._hooks:
            self.watcher.warn_once(
                f"nograd:{self.prefix}",
                f"run.watch({type(model).__name__}): no parameter requires grad, so no "
                "backward pass reaches it and nothing is recorded",
            )

    def remove(self) -> None:
        for hook in self._hooks:
            hook.remove()
        self._hooks = []
        self._rows = []

    # -- on the backward pass (autograd's thread) ---------------------------------------
    def _on_grad(self, i: int, grad: torch.Tensor) -> None:
        try:
            task = _graph_task()
            if task != self._task:
                self._start_pass(task)
            if self._logging and self.log != "parameters":
                hist = self.log is not None
                row = stats.row(grad, hist)
                self._rows.append((i, row if hist else None, row[NORM]))
        except Exception as exc:
            self.watcher.failed(exc)

    def _start_pass(self, task: int) -> None:
        with self._lock:
            if task == self._task:
                return  # another device's thread started it
            self._task = task
            self._rows = []  # a recorded pass that never ended (its backward failed)
            self.passes += 1
            self._logging = self.passes % self.log_freq == 0 and self.watcher.recording()
            if self._logging or task < 0:
                _queue_callback(self._end_pass)

    def _end_pass(self) -> None:
        """Runs once the backward pass is over: hand this pass's rows to the writer."""
        try:
            if _graph_task is _no_task_id:
                self._task = None
            if not self._logging:
                return
            self._logging = False
            rows, self._rows = self._rows, []
            names, prefix = self._names, self.prefix
            batch = Batch(self.passes - 1, f"grad_norm/{prefix}total", self.watcher)
            for i, row, norm in rows:
                batch.norm(f"grad_norm/{prefix}{names[i]}", norm)
                if row is not None:
                    batch.add(f"gradients/{prefix}{names[i]}", row)
            if self.log in ("parameters", "all"):
                for name, ref in zip(names, self._params, strict=True):
                    p = ref()
                    if p is None:
                        continue
                    try:
                        batch.add(f"parameters/{prefix}{name}", stats.row(p, hist=True))
                    except Exception as exc:
                        self.watcher.failed(exc)
            batch.seal()
            self.watcher.hand_off(batch)
        except Exception as exc:
            self.watcher.failed(exc)


class Batch:
    """One recorded pass's rows: made on the device, read on the writer thread."""

    def __init__(self, step: int, total_key: str, watcher: Watcher) -> None:
        self.step = step
        self.total_key = total_key
        self.hist_keys: list[str] = []
        self.norm_keys: list[str] = []
        self._watcher = watcher
        self._hists: list[torch.Tensor] = []
        self._norms: list[torch.Tensor] = []
        self._order: list[int] = []
        self._groups: list[tuple[torch.Tensor, Any]] = []  # per device: stacked rows, event
        self._host: Any = None  # the numpy rows, once read
        self._lock = threading.Lock()

    def add(self, key: str, row: torch.Tensor) -> None:
        if self._key_ok(key):
            self.hist_keys.append(key)
            self._hists.append(row)

    def norm(self, key: str, value: torch.Tensor) -> None:
        if self._key_ok(key):
            self.norm_keys.append(key)
            self._norms.append(value.reshape(1).expand(ROW))

    def _key_ok(self, key: str) -> bool:
        if is_key(key):
            return True
        self._watcher.warn_once(f"key:{key}", f"run.watch: {key!r} cannot be a key; skipped")
        return False

    def seal(self) -> None:
        """Stack the rows per device and mark when they are ready (no wait here)."""
        import torch

        pending = self._hists + self._norms  # the order the records read them in
        self._hists, self._norms = [], []
        devices: dict[torch.device, list[int]] = {}
        for j, row in enumerate(pending):
            devices.setdefault(row.device, []).append(j)
        self._order = [j for js in devices.values() for j in js]
        for device, js in devices.items():
            stacked = torch.stack([pending[j] for j in js])
            event = None
            if device.type == "cuda":
                event = torch.cuda.Event()  # type: ignore[no-untyped-call]
                event.record(torch.cuda.current_stream(device))
            self._groups.append((stacked, event))

    def _rows(self) -> Any:
        """All rows as one float64 array, in the order added (writer thread)."""
        with self._lock:
            if self._host is None:
                import numpy as np

                parts = []
                for stacked, event in self._groups:
                    if event is not None:
                        event.synchronize()
                    parts.append(stacked.cpu().numpy())
                rows = np.concatenate(parts) if parts else np.zeros((0, ROW))
                host = np.empty_like(rows)
                host[self._order] = rows
                self._host = host
                self._groups = []
            return self._host

    def metrics(self, seq: int, t: float) -> R.Record:
        rows = self._rows()
        first = len(self.hist_keys)
        norms = [float(rows[first + j, 0]) for j in range(len(self.norm_keys))]
        values: dict[str, R.Number] = dict(zip(self.norm_keys, norms, strict=True))
        values[self.total_key] = math.sqrt(math.fsum(n * n for n in norms))
        return R.Metrics(seq, t, self.step, values)

    def histogram(self, i: int, seq: int, t: float) -> R.Record:
        row = self._rows()[i]
        return histogram_record(
            seq,
            t,
            self.step,
            self.hist_keys[i],
            row[:BINS].tolist(),
            row[EDGES : EDGES + BINS + 1].tolist(),
            int(row[NAN]),
            int(row[NAN + 1]),
            int(row[NAN + 2]),
        )


def histogram_record(
    seq: int,
    t: float,
    step: int,
    key: str,
    counts: list[float],
    edges: list[float],
    nan: int,
    posinf: int,
    neginf: int,
) -> R.Record:
    """The one place a watch histogram becomes a record (media-sdk's ``HistogramRec``)."""
    return R.HistogramRec(seq, t, step, key, counts, edges, nan, posinf, neginf)


# -- backward passes ------------------------------------------------------------------------
def _no_task_id() -> int:
    return -1  # without graph task ids every pass queues a callback that ends it


def _find_graph_task() -> Callable[[], int]:
    import torch

    found = getattr(torch._C, "_current_graph_task_id", None)
    return found if callable(found) else _no_task_id


class _LazyTask:
    def __call__(self) -> int:
        global _graph_task
        _graph_task = _find_graph_task()
        return _graph_task()


_graph_task: Callable[[], int] = _LazyTask()


def _queue_callback(fn: Callable[[], None]) -> None:
    from torch.autograd import Variable

    Variable._execution_engine.queue_callback(fn)
