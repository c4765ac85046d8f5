"""Live TensorBoard capture: ``rankwise.init(tensorboard=True)``.

The ``add_*`` methods of ``torch.utils.tensorboard.SummaryWriter`` and
``tensorboardX.SummaryWriter`` are wrapped: each call runs the writer's own method first
(the event files are written exactly as before), then hands the same value to
``run.log()`` of the process's recording run, with ``global_step`` as the step
(``add_scalar``'s one value queued as ``Run._log_one`` does, without a dict, by a wrapper
made with the writer's own parameters). Wrapping was chosen over tailing the event files
because it costs one tuple on the queue per call (``benchmarks/bench_tensorboard.py``: a
few percent of ``add_scalar`` alone; benchmarks/README.md) and keeps tensors as they
are: ``log()`` reads them on the writer thread (``rankwise.sdk.values``), histograms and
images are binned and encoded on the media encoder's thread, so nothing is read back on
the training thread. For tensorboardX,
capturing its scalar events on its own logger thread (``EventsWriter.write_event``)
instead was measured and not kept (``bench_tensorboard.py scalar --logger-thread``): the
training thread paid more than for the wrapper (1.11–1.15 against 1.09–1.11 of ``add_scalar``
alone; the logger thread's parsing shares the GIL), values would be float32, and
``global_step=None``, a ``commit=False`` row and ``run.step`` need the call's place among
the training thread's ``run.log()`` calls, which that thread no longer sees.

What is recorded: ``add_scalar``, ``add_scalars`` (as ``main_tag/name``),
``add_histogram``, ``add_image`` (CHW, HWC or HW), ``add_text`` and ``add_hparams`` (the
hyperparameters into the config, the metrics as values). Keys follow W&B's rule for log
directories: a process's only writer keeps its tags as they are (``train/loss`` stays
``train/loss``) unless its directory is named ``train`` or ``validation``; once a process
has written through several log directories, each new one's tags are prefixed by its path
below their common parent. A call without ``global_step`` is recorded at the stream's last
step. A tracking problem is one warning; the writer's own call is never affected.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import inspect
import os
from collections.abc import Callable
from threading import get_ident
from typing import Any

from .. import _log
from .run import _MAX_STEP, _now  # noqa: F401 (the made add_scalar's globals)

# The run the wrapped writers report to (the process's recording run), or None.
_target: Any = None
_patched: set[type] = set()
_logdirs: list[str] = []
# Threads inside a wrapped call other than add_scalar: what that call writes through
# writers of its own (add_hparams makes one) is not recorded a second time.
_inside: set[int] = set()

# (module, class name) of the writers wrapped, in the order they are looked for.
WRITERS = (
    ("torch.utils.tensorboard.writer", "SummaryWriter"),
    ("tensorboardX.writer", "SummaryWriter"),
)


def capture(run: Any) -> int:
    """Send what the SummaryWriters of this process write to ``run`` (a recording
    ``rankwise.Run``) from now on, until it ends; returns how many writer classes are
    wrapped."""
    global _target
    if not run:
        return len(_patched)
    _target = run
    for module, name in WRITERS:
        cls = _writer_class(module, name)
        if cls is not None and cls not in _patched:
            _wrap(cls)
            _patched.add(cls)
    if not _patched:
        _warn(
            "none",
            "tensorboard=True: neither torch.utils.tensorboard (needs the tensorboard "
            "package) nor tensorboardX can be imported, so there is nothing to record",
        )
    return len(_patched)


def _writer_class(module: str, name: str) -> type | None:
    top = module.split(".")[0]
    try:
        if importlib.util.find_spec(top) is None:
            return None
        if top == "torch" and importlib.util.find_spec("tensorboard") is None:
            return None  # torch.utils.tensorboard needs the tensorboard package
        cls = getattr(importlib.import_module(module), name)
    except Exception:
        return None
    return cls if isinstance(cls, type) else None


_warn = _log.Once()


def _namespace(writer: Any) -> str:
    """The key prefix of ``writer``'s tags ("" for none), fixed at its first call."""
    cached = writer.__dict__.get("_rankwise_ns")
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    logdir = getattr(writer, "log_dir", None) or getattr(writer, "logdir", None) or ""
    logdir = os.path.abspath(str(logdir))
    if logdir not in _logdirs:
        _logdirs.append(logdir)
    one = len(_logdirs) == 1
    root = os.path.dirname(logdir) if one else os.path.commonpath(_logdirs)
    ns = os.path.relpath(logdir, root).replace(os.sep, "/")
    ns = "" if ns == "." else ns
    if len(_logdirs) == 1 and ns not in ("train", "validation"):
        ns = ""
    prefix = f"{ns}/" if ns else ""
    writer.__dict__["_rankwise_ns"] = prefix
    return prefix


def _arg(args: tuple[Any, ...], kwargs: dict[str, Any], i: int, name: str) -> Any:
    return args[i] if len(args) > i else kwargs.get(name)


def _step(run: Any, a: tuple[Any, ...], k: dict[str, Any], i: int = 2) -> int:
    """The call's ``global_step``, or the stream's last step when it has none."""
    step = _arg(a, k, i, "global_step")
    if step is None:
        return max(int(run.step), 0)
    return step  # type: ignore[no-any-return]


def _scalar(run: Any, w: Any, a: tuple[Any, ...], k: dict[str, Any]) -> None:
    tag = _arg(a, k, 0, "tag")
    run.log({_namespace(w) + tag: _arg(a, k, 1, "scalar_value")}, step=_step(run, a, k))


def _scalars(run: Any, w: Any, a: tuple[Any, ...], k: dict[str, Any]) -> None:
    main = _namespace(w) + _arg(a, k, 0, "main_tag")
    values = _arg(a, k, 1, "tag_scalar_dict")
    run.log({f"{main}/{name}": v for name, v in values.items()}, step=_step(run, a, k))


def _histogram(run: Any, w: Any, a: tuple[Any, ...], k: dict[str, Any]) -> None:
    from ..media import Histogram

    tag = _namespace(w) + _arg(a, k, 0, "tag")
    run.log({tag: Histogram(_arg(a, k, 1, "values"))}, step=_step(run, a, k))


def _image(run: Any, w: Any, a: tuple[Any, ...], k: dict[str, Any]) -> None:
    from ..media import Image

    tag = _namespace(w) + _arg(a, k, 0, "tag")
    data = _arg(a, k, 1, "img_tensor")
    form = str(_arg(a, k, 4, "dataformats") or "CHW").upper()
    torch_like = hasattr(data, "permute")
    if form == "HWC" and torch_like:
        data = data.permute(2, 0, 1)  # a view: rankwise.Image reads torch tensors as CHW
    elif form == "CHW" and not torch_like:
        data = data.transpose(1, 2, 0)  # a view: numpy arrays are read as HWC
    elif form not in ("CHW", "HWC", "HW"):
        _warn(f"image:{form}", f"add_image(dataformats={form!r}) is not recorded by rankwise")
        return
    run.log({tag: Image(data)}, step=_step(run, a, k))


def _text(run: Any, w: Any, a: tuple[Any, ...], k: dict[str, Any]) -> None:
    from ..media import Text

    tag = _namespace(w) + _arg(a, k, 0, "tag")
    run.log({tag: Text(str(_arg(a, k, 1, "text_string")))}, step=_step(run, a, k))


def _hparams(run: Any, w: Any, a: tuple[Any, ...], k: dict[str, Any]) -> None:
    hparams = _arg(a, k, 0, "hparam_dict") or {}
    metrics = _arg(a, k, 1, "metric_dict") or {}
    run.config.update(dict(hparams))
    if metrics:
        prefix = _namespace(w)
        run.log({prefix + name: v for name, v in metrics.items()}, step=_step(run, a, k, 4))


RECORDERS: dict[str, Callable[[Any, Any, tuple[Any, ...], dict[str, Any]], None]] = {
    "add_scalar": _scalar,
    "add_scalars": _scalars,
    "add_histogram": _histogram,
    "add_image": _image,
    "add_text": _text,
    "add_hparams": _hparams,
}


def _wrap(cls: type) -> None:
    for name, record in RECORDERS.items():
        original = cls.__dict__.get(name)
        if original is None or getattr(original, "_rankwise", False):
            continue
        if name == "add_scalar":
            setattr(cls, name, _wrapped_scalar(original))
        else:
            setattr(cls, name, _wrapped(original, record, name))


def _failed(name: str, exc: Exception) -> None:
    _warn(f"call:{name}", f"tensorboard {name}() could not be recorded ({exc!r}); the event "
          "file has it (shown once per method)")  # fmt: skip


def _wrapped(original: Any, record: Any, name: str) -> Any:
    @functools.wraps(original)
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        if _inside and get_ident() in _inside:  # a writer add_hparams makes, and its calls
            return original(self, *args, **kwargs)
        _inside.add(get_ident())
        try:
            out = original(self, *args, **kwargs)
        finally:
            _inside.discard(get_ident())
        run = _target
        if run is not None and not run._closed:
            try:
                record(run, self, args, kwargs)
            except Exception as exc:
                _failed(name, exc)
        return out

    method._rankwise = True  # type: ignore[attr-defined]
    return method


# add_scalar, the hot one, made with the writer's own parameters (names and defaults) so
# that CPython specializes the calls to it as it does those to the writer's method (not
# those to a ``*args, **kw`` function), and with ``Run._log_one``'s fast path inlined (one
# frame less): what it would not queue at once it hands to ``_log_one`` (the same checks,
# then ``log()``). Keep the two in step.
_SCALAR_SOURCE = """
def make(original):
    def add_scalar(self, {params}):
        out = original(self, {params})
        run = _target
        if run is None or run._closed or (_inside and get_ident() in _inside):
            return out
        try:
            try:
                ns = self._rankwise_ns  # the writer's key prefix, set by _namespace
            except AttributeError:
                ns = _namespace(self)
            if ns:
                tag = ns + tag
            if global_step is None:
                global_step = max(run._step, 0)
            room = run._room - 4  # the call's units: CALL_UNITS + one value
            if (
                room >= 0
                and global_step.__class__ is int
                and run._step <= global_step <= _MAX_STEP
                and run._held is None
            ):
                run._step = global_step
                run._room = room
                run._queue.append((_now(), global_step, None, tag, scalar_value))
            else:
                run._log_one(tag, scalar_value, global_step)
        except Exception as exc:
            _failed("add_scalar", exc)
        return out
    return add_scalar
"""
# The names the made add_scalar starts with, and those its body uses besides: a writer
# method with other parameters gets the general wrapper (_wrapped_scalar_any).
_SCALAR_FIRST = ("self", "tag", "scalar_value", "global_step")
_SCALAR_TAKEN = frozenset(
    ("make", "original", "out", "run", "ns", "room", "exc", "max", "AttributeError",
     "Exception", "_target", "_inside", "get_ident", "_namespace", "_failed", "_now",
     "_MAX_STEP", "int")
)  # fmt: skip
_VARIADIC = inspect.CO_VARARGS | inspect.CO_VARKEYWORDS


def _wrapped_scalar(original: Any) -> Any:
    """``add_scalar``: its arguments by name and passed on as they came (the writer's own
    defaults filled in), no helper calls, and the value queued as ``Run._log_one`` does
    (no dict made on this thread). A writer method whose parameters are not plain ones
    starting ``self, tag, scalar_value, global_step`` gets ``_wrapped_scalar_any``."""
    code = getattr(original, "__code__", None)
    if (
        code is None
        or code.co_flags & _VARIADIC
        or code.co_kwonlyargcount
        or code.co_posonlyargcount
    ):
        return _wrapped_scalar_any(original)
    names = code.co_varnames[: code.co_argcount]
    if (
        names[:4] != _SCALAR_FIRST
        or _SCALAR_TAKEN.intersection(names)
        or not all(n.isidentifier() for n in names)
    ):
        return _wrapped_scalar_any(original)
    made: dict[str, Any] = {}
    source = _SCALAR_SOURCE.format(params=", ".join(names[1:]))
    exec(compile(source, f"<rankwise add_scalar of {code.co_filename}>", "exec"), globals(), made)
    add_scalar: Any = functools.wraps(original)(made["make"](original))
    add_scalar.__defaults__ = original.__defaults__
    add_scalar._rankwise = True
    return add_scalar


def _wrapped_scalar_any(original: Any) -> Any:
    """``add_scalar`` of any signature: its first arguments by name, the writer's method
    called without ``*args, **kw`` when there are none, and the value handed to
    ``Run._log_one``."""

    @functools.wraps(original)
    def add_scalar(
        self: Any, tag: Any, scalar_value: Any, global_step: Any = None, *args: Any, **kw: Any
    ) -> Any:
        if args or kw:
            out = original(self, tag, scalar_value, global_step, *args, **kw)
        else:
            out = original(self, tag, scalar_value, global_step)
        run = _target
        if run is None or run._closed or (_inside and get_ident() in _inside):
            return out
        try:
            try:
                ns = self._rankwise_ns  # the writer's key prefix, set by _namespace
            except AttributeError:
                ns = _namespace(self)
            if global_step is None:
                global_step = max(run._step, 0)
            run._log_one(ns + tag if ns else tag, scalar_value, global_step)
        except Exception as exc:
            _failed("add_scalar", exc)
        return out

    add_scalar._rankwise = True  # type: ignore[attr-defined]
    return add_scalar
