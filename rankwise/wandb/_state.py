"""This process's ``wandb`` runs: which one is ``wandb.run``, the ones it records, and
attaching it to a run made in another process.

``_init`` (which makes runs) and ``_run`` (the ``Run`` class, which attaches itself when
used in another process) both read and change this state, and neither imports the
other: this module knows a run only as ``Member`` (what the state needs of one) and
imports neither. The module ``rankwise.wandb`` follows ``current`` through the hooks:
``on_current_finished`` resets its globals, ``on_current_attached`` sets them again for a
forked child's run.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from .._environ import scoped_env
from ..settings import default_server
from ._settings import Settings


class Member(Protocol):
    """What the state needs of a ``wandb.Run`` (``rankwise.wandb._run.Run``)."""

    _pid: int  # the process that made (or last attached) it
    _finished: bool
    _attach: dict[str, Any]  # what another process needs to attach (``attached``)

    @property
    def id(self) -> str: ...

    def finish(self, exit_code: int | None = None, quiet: bool | None = None) -> None: ...

    def _ensure(self) -> None:
        """In a process other than the one that made it, attach to it first."""
        ...

    def _rebuild(self, inner: Any, spec: Mapping[str, Any], settings: Settings) -> None:
        """Become this process's stream ``inner`` of the run ``spec`` describes."""
        ...


current: Member | None = None  # wandb.run of this process
adopted: Member | None = None  # a run unpickled in this process (W&B's attach)
opened: list[Member] = []  # runs this process records, ended at a multiprocessing child's exit
setup_settings: Settings | None = None  # wandb.setup()'s, the defaults of init
on_current_finished: list[Callable[[Any], None]] = []  # the module's globals reset
on_current_attached: list[Callable[[Any], None]] = []  # ... and set again (a forked child)
_finalizer = [False]

RESUME = {None: "allow", False: "allow", True: "allow", "allow": "allow", "auto": "allow",
          "must": "must", "never": "never"}  # fmt: skip


def as_id(text: str) -> str:
    """A stream label rankwise accepts (``[A-Za-z0-9][A-Za-z0-9._-]*``)."""
    out = re.sub(r"[^A-Za-z0-9._-]", "-", text)[:128]
    return out if out[:1].isalnum() else f"p{out}"[:128]


def open_run(
    s: Settings,
    root: Path,
    project: str,
    run_id: str,
    label: str,
    primary: bool,
    config: dict[str, Any],
    mode: str,
    keep_current: bool,
    group_etc: dict[str, Any] | None = None,
) -> Any:
    """This process's stream of the rankwise run ``project/run_id`` (``rankwise.init``)."""
    from ..sdk import session

    console = {"off": "off", "wrap": "wrap", "redirect": "redirect"}.get(str(s.console))
    opts: dict[str, Any] = {}
    if s.finish_timeout:
        opts["finish_timeout"] = float(s.finish_timeout)
    if s.save_code is False:
        opts["save_code"] = False  # no code kept: not the git diff either
    server = default_server() if mode in ("online", "shared") else None
    silent = "1" if (s.silent or s.quiet or os.environ.get("RANKWISE_SILENT")) else None
    meta = group_etc if group_etc is not None else {
        "name": s.run_name, "group": s.run_group, "job_type": s.run_job_type,
        "tags": list(s.run_tags or ()), "notes": s.run_notes,
    }  # fmt: skip
    saved = session.current
    if keep_current:
        session.current = None  # reinit="create_new": the earlier run stays open
    with scoped_env(RANKWISE_SERVER=server, RANKWISE_SILENT=silent):
        try:
            return session.init(
                project=project, id=run_id, run_mode="shared", rank_scope="global",
                dir=root, resume=RESUME[s.resume], label=label, config=config,
                settings=opts, console=console, system=not s.x_disable_stats,
                gpu_device_ids=s.x_stats_gpu_device_ids, primary=primary, **meta,
            )  # fmt: skip
        finally:
            if keep_current and session.current is None:
                session.current = saved


def attached(spec: Mapping[str, Any], into: Member) -> None:
    """Make ``into`` (a run object from another process, or a fresh one) this process's
    stream of the run ``spec`` describes (a run made elsewhere)."""
    label = spec.get("child_label") or as_id(f"{spec.get('label', 'rank-0')}-child-{os.getpid()}")
    s = Settings(mode="offline" if spec.get("mode") == "offline" else "online")
    inner = open_run(
        s, Path(spec["root"]), spec["project"], spec["run_id"], label, False, {},
        str(spec.get("mode")), keep_current=False,
        group_etc={"name": None, "group": None, "job_type": None, "tags": [], "notes": None},
    )  # fmt: skip
    into._rebuild(inner, spec, s)
    note_opened(into)


def adopt(run: Member) -> None:
    global adopted
    adopted = run


def forget(run: Member) -> None:
    """A run's ``on_finish``: it is no longer ``wandb.run`` (nor the adopted one)."""
    global current, adopted
    if current is run:
        current = None
        for hook in on_current_finished:
            hook(run)
    if adopted is run:
        adopted = None


def note_opened(run: Member) -> None:
    """A multiprocessing child leaves through ``os._exit`` (no atexit): end its runs in
    multiprocessing's own exit hook instead."""
    opened.append(run)
    if _finalizer[0]:
        return
    import multiprocessing

    if multiprocessing.parent_process() is None:
        return
    from multiprocessing import util

    util.Finalize(None, _end_all, exitpriority=100)
    _finalizer[0] = True


def _end_all() -> None:
    for run in list(opened):
        if run._pid == os.getpid():
            with contextlib.suppress(Exception):
                run.finish()
