"""``import rankwise.wandb as wandb``: W&B's Python API, recorded by rankwise.

Code written for W&B runs unchanged but for that import line, with W&B's semantics for
the names it uses (module globals ``run``/``config``/``summary``/``log``..., ``init`` and
its parameters, ``Settings``, the row rules of ``log``, ``config``, ``summary``,
``define_metric``, media, ``watch``, artifacts, ``Api``): see ``docs/wandb-migration.md``
for the table of names and for where rankwise deliberately differs (a lower ``step`` is
kept; ``log`` on a process that never called ``init`` does nothing; ``watch`` twice on a
model adds no second hooks). What rankwise adds: every process that calls ``init``
records, and a shared run has a stream per rank with the cross-rank band and rank health.

Light at import: neither torch nor numpy is imported here. ``install()`` (opt-in) makes
this package importable as ``wandb`` for third-party integrations (``rankwise.wandb.
install``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from . import _init, _state, errors
from ._mappings import Config
from ._run import Run, RunDisabled
from ._run_extras import AlertLevel
from ._settings import Settings
from ._term import termerror, termlog, termwarn, warn_once
from ._version import __version__  # the W&B API this module follows
from .errors import CommError, Error, UsageError

if TYPE_CHECKING:
    from ..artifacts.artifact import Artifact
    from ._api import Api
    from .data_types import Audio, Histogram, Html, Image, Table, Video


_LAZY = {
    **dict.fromkeys(("Audio", "Histogram", "Html", "Image", "Table", "Video"), "data_types"),
    "Api": "_api",
    "Artifact": "..artifacts.artifact",
    "plot": "plot",
    "sdk": "sdk",
    "wandb_run": "wandb_run",
}
_ever_initialized = [False]


class _PreInitObject:
    """``wandb.config``/``wandb.summary`` before ``init``: any use raises ``wandb.Error``."""

    def __init__(self, name: str) -> None:
        object.__setattr__(self, "_name", name)

    def _fail(self, what: str) -> Error:
        return Error(f"You must call wandb.init() before {self._name}{what}")

    def __getattr__(self, key: str) -> Any:
        if key.startswith("__"):
            raise AttributeError(key)
        raise self._fail(f".{key}")

    def __setattr__(self, key: str, value: Any) -> None:
        raise self._fail(f".{key}")

    def __getitem__(self, key: str) -> Any:
        raise self._fail(f"[{key!r}]")

    def __setitem__(self, key: str, value: Any) -> None:
        raise self._fail(f"[{key!r}]")

    def __repr__(self) -> str:
        return f"<{self._name} before wandb.init()>"


def _pre_init(name: str) -> Any:
    def call(*args: Any, **kwargs: Any) -> Any:
        raise Error(f"You must call wandb.init() before wandb.{name}()")

    call.__name__ = name
    return call


def _pre_init_log(
    data: Mapping[str, Any], step: int | None = None, commit: bool | None = None, sync: Any = None
) -> None:
    """``wandb.log`` before ``init``: a no-op on a process that never called ``init``
    (other ranks of a rank-0-tracking script), ``wandb.Error`` after a run finished."""
    if _ever_initialized[0]:
        raise Error("You must call wandb.init() before wandb.log()")


_RUN_METHODS = (
    "watch", "unwatch", "save", "use_artifact", "log_artifact", "log_model", "use_model",
    "link_model", "define_metric", "alert", "mark_preempting", "log_code",
)  # fmt: skip

run: Run | None = None
config: Any = _PreInitObject("wandb.config")
summary: Any = _PreInitObject("wandb.summary")
log: Any = _pre_init_log
watch: Any
unwatch: Any
save: Any
use_artifact: Any
log_artifact: Any
log_model: Any
use_model: Any
link_model: Any
define_metric: Any
alert: Any
mark_preempting: Any
log_code: Any


def _reset_globals(_run: Run | None = None) -> None:
    g = globals()
    g["run"] = None
    g["config"] = _PreInitObject("wandb.config")
    g["summary"] = _PreInitObject("wandb.summary")
    g["log"] = _pre_init_log
    for name in _RUN_METHODS:
        g[name] = _pre_init(name)


def _set_globals(r: Run) -> None:
    g = globals()
    g["run"] = r
    g["config"] = r.config
    g["summary"] = r.summary
    g["log"] = r.log
    for name in _RUN_METHODS:
        g[name] = getattr(r, name)


_reset_globals()
_state.on_current_finished.append(_reset_globals)
_state.on_current_attached.append(_set_globals)


def init(
    entity: str | None = None,
    project: str | None = None,
    dir: str | os.PathLike[str] | None = None,
    id: str | None = None,
    name: str | None = None,
    notes: str | None = None,
    tags: Sequence[str] | None = None,
    config: Any = None,
    config_exclude_keys: list[str] | None = None,
    config_include_keys: list[str] | None = None,
    allow_val_change: bool | None = None,
    group: str | None = None,
    job_type: str | None = None,
    mode: str | None = None,
    force: bool | None = None,
    anonymous: str | None = None,
    reinit: bool | str | None = None,
    resume: bool | str | None = None,
    resume_from: str | None = None,
    fork_from: str | None = None,
    save_code: bool | None = None,
    tensorboard: bool | None = None,
    sync_tensorboard: bool | None = None,
    monitor_gym: bool | None = None,
    settings: Settings | Mapping[str, Any] | None = None,
) -> Run:
    """Start a run in this process (W&B's ``wandb.init``); see ``rankwise.wandb._init``
    for how each mode, ``id``, ``dir`` and the ``Settings`` map onto rankwise."""
    if config is not None and (config_exclude_keys or config_include_keys):
        warn_once("config-keys", "config_exclude_keys/config_include_keys are deprecated")
        from ._mappings import as_items

        items = as_items(config)
        if config_include_keys:
            items = {k: v for k, v in items.items() if k in config_include_keys}
        for key in config_exclude_keys or ():
            items.pop(key, None)
        config = items
    r = _init.init(
        entity=entity, project=project, dir=dir, id=id, name=name, notes=notes, tags=tags,
        config=config, group=group, job_type=job_type, mode=mode, reinit=reinit,
        resume=resume, settings=settings, sync_tensorboard=sync_tensorboard or tensorboard,
        extra={"resume_from": resume_from, "fork_from": fork_from, "monitor_gym": monitor_gym},
        save_code=save_code,
    )  # fmt: skip
    if r is _state.current:
        _ever_initialized[0] = True
        _set_globals(r)
    return r


def finish(exit_code: int | None = None, quiet: bool | None = None) -> None:
    """Finish ``wandb.run`` (nothing when there is none)."""
    if run is not None:
        run.finish(exit_code=exit_code, quiet=quiet)


def setup(settings: Settings | Mapping[str, Any] | None = None) -> Any:
    """W&B starts its service process here; rankwise has none. The settings given become
    this process's defaults for ``init``. Returns a handle with ``teardown()``."""
    if settings is not None:
        _state.setup_settings = (
            settings if isinstance(settings, Settings) else Settings.from_dict(settings)
        )
    return _Setup()


class _Setup:
    settings = property(lambda self: _state.setup_settings or Settings())

    def teardown(self, exit_code: int | None = None) -> None:
        teardown(exit_code)


def teardown(exit_code: int | None = None) -> None:
    if run is not None:
        run.finish(exit_code=exit_code)
    _state.setup_settings = None


def login(
    anonymous: str | None = None,
    key: str | None = None,
    relogin: bool | None = None,
    host: str | None = None,
    force: bool | None = None,
    timeout: int | None = None,
    verify: bool = False,
    referrer: str | None = None,
) -> bool:
    """Nothing to log in to for local runs (a server's ingest token is ``RANKWISE_TOKEN``)."""
    return True


def require(requirement: str | Sequence[str] | None = None, experiment: Any = None) -> None:
    """W&B's feature switches: nothing to switch here."""


def _attach(
    attach_id: str | None = None, run_id: str | None = None, *, run: Run | None = None
) -> Run | None:
    """Lightning's ``wandb._attach``: the run of ``attach_id`` in this process."""
    r = _init.attach_id(attach_id, run_id, run)
    if r is not None and run is None and _state.current is None:
        _state.current = r
        _ever_initialized[0] = True
        _set_globals(r)
    return r


attach = _attach


def _unsupported(name: str) -> Any:
    def call(*args: Any, **kwargs: Any) -> None:
        warn_once(name, f"wandb.{name}() is not supported by rankwise: ignored (returns None)")

    call.__name__ = name
    return call


sweep = _unsupported("sweep")
agent = _unsupported("agent")
controller = _unsupported("controller")


def restore(
    name: str,
    run_path: str | None = None,
    replace: bool = False,
    root: str | os.PathLike[str] | None = None,
) -> Any:
    """W&B's ``wandb.restore``: the file ``name`` saved with a run's code
    (``run.log_code``) or ``save()``, written under ``root`` (default the current run's
    ``run.dir``, else ``.``) and opened for reading; None when the run has no such file.
    ``run_path`` is ``"entity/project/run_id"`` (or ``"project/run_id"``); without it,
    the current run."""
    from ._run_extras import restore_file

    return restore_file(run, name, run_path, replace, root)


def install() -> None:
    """Make this module importable as ``wandb`` (opt-in; see ``rankwise.wandb.install``)."""
    from .install import install as _install

    _install()


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        where = _LAZY[name]
        module = importlib.import_module(where if where.startswith(".") else f".{where}", __name__)
        value = module if name == where else getattr(module, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'rankwise.wandb' has no attribute {name!r}")


__all__ = [
    "AlertLevel", "Api", "Artifact", "Audio", "CommError", "Config", "Error", "Histogram",
    "Html", "Image", "Run", "RunDisabled", "Settings", "Table", "UsageError", "Video",
    "__version__", "agent", "alert", "config", "controller", "define_metric", "errors",
    "finish", "init", "install", "log", "log_artifact", "log_code", "log_model", "login",
    "mark_preempting", "require", "restore", "run", "save", "setup", "summary", "sweep",
    "teardown", "termerror", "termlog", "termwarn", "unwatch", "use_artifact", "use_model",
    "watch",
]  # fmt: skip
