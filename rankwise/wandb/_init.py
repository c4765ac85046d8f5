"""``wandb.init()`` on rankwise: modes, settings, run ids, labels and attaching.

How W&B's choices map onto rankwise (every process that calls ``init`` records; the
others record nothing, so a rank-0-only script stays rank-0-only):

==================  ================================================================
W&B                 rankwise
==================  ================================================================
``id=``             the run id (default: a fresh random id per ``init``, as W&B)
one run a process   each ``init`` without ``id`` is its own run (``run_mode="shared"``
                    over a fresh id), primary stream
``mode="shared"``   a stream of run ``id`` labelled ``x_label`` (else ``rank-<rank>``
                    under a launcher, else ``<host>-<pid>``); primary unless
                    ``x_primary=False`` or ``x_update_finish_state=False``; config is
                    recorded only by ``x_primary`` processes
``online``          local files, uploaded when ``RANKWISE_SERVER`` names a rankwise
                    server (W&B's ``WANDB_BASE_URL`` is not used: it names W&B's server)
``offline``         local files only (``RANKWISE_SERVER`` ignored)
``disabled``        a ``RunDisabled``: every call works, nothing is recorded
``dir=``            the data directory is ``<dir>/rankwise-runs`` (W&B:
                    ``<dir>/wandb``); default ``RANKWISE_DIR`` or ``./rankwise-runs``
``x_stats_gpu_…``   ``gpu_device_ids``; ``x_disable_stats`` turns system metrics off
``save_code=True``  the primary logs the main script (``code_dir`` set: the ``*.py``
                    files under it) as the run's ``code`` artifact (``log_code``);
                    ``save_code=False`` also turns off rankwise's ``save_code`` (the
                    ``git diff`` kept at init)
==================  ================================================================

A run object used in another process (pickled to an ``mp.Process`` child, or inherited
by a forked one) attaches that process as a stream of its own (``attached``), never
primary; such a stream is ended when the child process exits.
"""

from __future__ import annotations

import json
import os
import re
import socket
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .._datadir import default_dir, subdir
from . import _state
from ._run import Run, RunDisabled
from ._settings import Settings
from ._state import RESUME, as_id, open_run
from ._term import set_silent, termwarn, warn_once
from .errors import UsageError

_BAD_ID = re.compile(r"[/\\#?%:]")

REINIT = {None: "return_previous", "default": "return_previous", False: "return_previous",
          True: "finish_previous", "return_previous": "return_previous",
          "finish_previous": "finish_previous", "create_new": "create_new"}  # fmt: skip


def data_dir(root_dir: str | os.PathLike[str] | None, read: bool = False) -> Path:
    """Where runs are written: ``<dir>/rankwise-runs``, else ``RANKWISE_DIR`` or
    ``./rankwise-runs`` (``rankwise._datadir``; for reading, an earlier rankwise's
    ``rankwise`` folder when there is no ``rankwise-runs``)."""
    if root_dir:
        return subdir(Path(root_dir).expanduser(), read=read).absolute()
    return default_dir(read=read).absolute()


def resolve(settings: Settings | Mapping[str, Any] | None, **explicit: Any) -> Settings:
    """Environment, then ``setup()``'s settings, then ``settings``, then the arguments."""
    out = Settings.from_env()
    if _state.setup_settings is not None:
        out.update(_state.setup_settings)
    if settings is not None:
        if not isinstance(settings, (Settings, Mapping)):
            raise UsageError(
                f"settings must be a wandb.Settings or a dict, not {type(settings).__name__}"
            )
        out.update(settings)
    out.update({k: v for k, v in explicit.items() if v is not None})
    return out


def init(
    *,
    entity: str | None,
    project: str | None,
    dir: Any,
    id: str | None,
    name: str | None,
    notes: str | None,
    tags: Sequence[str] | None,
    config: Any,
    group: str | None,
    job_type: str | None,
    mode: str | None,
    reinit: Any,
    resume: Any,
    settings: Settings | Mapping[str, Any] | None,
    sync_tensorboard: bool | None,
    extra: dict[str, Any],
    save_code: bool | None = None,
) -> Run:
    for key, value in extra.items():
        if value:
            warn_once(f"init-{key}", f"wandb.init({key}=...) is not supported by rankwise: ignored")
    s = resolve(
        settings, entity=entity, project=project, root_dir=dir, run_id=id, run_name=name,
        run_notes=notes, run_tags=tags, run_group=group, run_job_type=job_type, mode=mode,
        reinit=reinit, resume=resume, save_code=save_code,
    )  # fmt: skip
    if s.silent or s.quiet:
        set_silent(True)
    if s.resume not in RESUME:
        raise UsageError(f"resume={s.resume!r} is not one of allow, must, never, auto")
    how = REINIT.get(s.reinit)
    if how is None:
        raise UsageError(
            f"reinit={s.reinit!r} is not one of return_previous, finish_previous, create_new"
        )
    run_id = s.run_id
    if run_id is not None and _BAD_ID.search(str(run_id)):
        raise UsageError(f"Run ID {run_id!r} cannot contain: / \\ # ? % :")

    # A run made by another process (pickled here, or inherited through fork) is joined.
    current = _state.current
    inherited = _state.adopted
    if inherited is None and current is not None and current._pid != os.getpid():
        inherited = current
    joins = inherited is not None and how != "create_new" and not inherited._finished
    if inherited is not None and joins and run_id in (None, inherited.id):
        label = s.x_label if "x_label" in s.given() else None
        inherited._attach = {**inherited._attach, "child_label": label}
        inherited._ensure()
        _state.current = inherited
        return _as_run(inherited)
    if current is not None and current._pid == os.getpid() and not current._finished:
        if how == "return_previous":
            if run_id is not None and run_id != current.id:
                termwarn(f"wandb.init(id={run_id!r}) while run {current.id} is active: "
                         "returning the active run (pass reinit='finish_previous')")  # fmt: skip
            return _as_run(current)
        if how == "finish_previous":
            current.finish()

    run = _new_run(s, config, how == "create_new")
    if how != "create_new":
        _state.current = run
    if (sync_tensorboard or s.sync_tensorboard) and run.rankwise_run:
        from ..sdk import tensorboard

        tensorboard.capture(run.rankwise_run)
    if s.save_code:
        _save_code(run, s.code_dir)
    return run


def _save_code(run: Run, code_dir: Any) -> None:
    """W&B's ``save_code``: the main script (``code_dir`` given: the ``*.py`` files under
    it) as a ``code`` artifact of the run, logged by the primary only. A script that
    cannot be found (``python -c``, a prompt) is a warning; nothing here raises."""
    from .. import _log
    from ..sdk.provenance import program_path

    inner = run.rankwise_run
    if inner is None or not inner.is_primary:
        return
    try:
        if code_dir is not None:
            inner.log_code(os.fspath(code_dir))
            return
        program = program_path()
        if program is None:
            _log.warn("wandb.init(save_code=True): no main script to save (python -c or a prompt)")
            return

        def main_only(path: str, root: str | None = None) -> bool:
            return os.path.abspath(path) == program

        inner.log_code(os.path.dirname(program), include_fn=main_only)
    except Exception as exc:
        _log.warn(f"wandb.init(save_code=True): the code was not saved: {exc}")


def _label_for(s: Settings, ident: Any, shared: bool) -> str:
    if s.x_label:
        return as_id(str(s.x_label))
    if ident.world_size > 1:
        return f"rank-{ident.rank}"
    if shared:
        return as_id(f"{socket.gethostname()}-{os.getpid()}")
    return "rank-0"


def _new_run(s: Settings, config: Any, keep_current: bool) -> Run:
    from ..sdk.dist import detect, random_id
    from ._mappings import clean_items

    mode = {"dryrun": "offline", "run": "online"}.get(s.mode, s.mode)
    project = s.project or "uncategorized"
    run_id = str(s.run_id) if s.run_id else random_id()
    root = data_dir(s.root_dir)
    items = clean_items(config)
    common: dict[str, Any] = dict(
        project=project, run_id=run_id, entity=s.entity, name=s.run_name, group=s.run_group,
        job_type=s.run_job_type, tags=tuple(s.run_tags or ()), notes=s.run_notes, mode=mode,
        settings=s, on_finish=_state.forget,
    )  # fmt: skip
    if mode == "disabled":
        run: Run = RunDisabled(None, attach={"root": str(root), "project": project,
                                             "run_id": run_id}, **common)  # fmt: skip
        run.config.update(items)
        return run
    ident = detect()
    shared = mode == "shared"
    label = _label_for(s, ident, shared)
    primary = bool(s.x_primary and s.x_update_finish_state) if shared else True
    record_config = bool(s.x_primary) if shared else True
    inner = open_run(
        s,
        root,
        project,
        run_id,
        label,
        primary,
        items if record_config else {},
        mode,
        keep_current,
    )
    attach = {"root": str(root), "project": project, "run_id": run_id, "label": label,
              "mode": mode, "entity": s.entity}  # fmt: skip
    run = Run(inner, attach=attach, record_config=record_config, **common)
    run.config._items.update(items)
    run.config._items["_wandb"] = dict(run._wandb_meta)
    if not record_config:
        run._record_config = False
    _state.note_opened(run)
    return run


def _as_run(member: _state.Member) -> Run:
    """``wandb.run`` as the ``Run`` it is (``_state`` knows runs only as ``Member``)."""
    assert isinstance(member, Run)
    return member


def attach_id(
    attach_id: str | None = None, run_id: str | None = None, run: Run | None = None
) -> Run | None:
    """``wandb._attach``: the run an ``_attach_id`` names, attached to this process."""
    if run is not None:
        run._ensure()
        return run
    if attach_id is None:
        return None
    spec = json.loads(attach_id)
    current = _state.current
    if current is not None and current.id == spec.get("run_id") and current._pid == os.getpid():
        return _as_run(current)
    run = Run.__new__(Run)
    _state.attached(spec, into=run)
    return run
