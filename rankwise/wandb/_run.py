"""``wandb.Run`` over a rankwise ``Run``: W&B's rows, config, summary and attributes.

One compat ``Run`` wraps the rankwise run of this process (one stream). ``log`` keeps
W&B's row rules (``_history``) and hands each finished row to the rankwise run at its
step. A run is picklable (W&B's ``__getstate__`` keeps only what attaching needs): in
another process, and in a forked child, the first call on it attaches that process to the
same run as a stream of its own (label ``<parent label>-child-<pid>``, or the child's
``x_label``), which never decides the run's final state.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from . import _state
from ._history import History, Metrics
from ._mappings import Config, Summary
from ._run_extras import RunExtras
from ._term import warn_once
from .errors import UsageError


class Run(RunExtras):
    """What ``wandb.init()`` returns. See the module docstring."""

    def __init__(
        self,
        inner: Any,
        *,
        project: str,
        run_id: str,
        entity: str | None,
        name: str | None,
        group: str | None,
        job_type: str | None,
        tags: Sequence[str],
        notes: str | None,
        mode: str,
        settings: Any,
        attach: dict[str, Any],
        record_config: bool = True,
        on_finish: Callable[[Run], None] | None = None,
    ) -> None:
        self._inner = inner
        self._pid = os.getpid()
        self._attach = attach
        self._finished = False
        self._on_finish = on_finish
        self._project = project
        self._id = run_id
        self._entity = entity or ""
        self._name = name
        self._group = group
        self._job_type = job_type
        self._tags = tuple(tags)
        self._notes = notes
        self._mode = mode
        self.settings = settings
        self._record_config = record_config
        self._metrics = Metrics()
        start = (int(inner.step) + 1) if inner is not None and inner.step >= 0 else 0
        self._history = History(self._emit, self._metrics, start)
        self.config = Config(self._config_changed)
        self.summary = Summary(self._metrics, self._summary_changed)
        self._wandb_meta: dict[str, Any] = {}
        self._alerts: dict[str, float] = {}
        self._saved: list[tuple[str, str]] = []  # (source, destination) re-copied at finish
        self._warned: set[str] = set()
        self.start_time = time.time()
        if entity:
            self._meta("entity", entity)

    # -- identity --------------------------------------------------------------------
    @property
    def id(self) -> str:
        return self._id

    @property
    def name(self) -> str:
        return self._name or self._id

    @name.setter
    def name(self, value: str) -> None:
        self._name = value
        self._meta("name", value)
        self._live_edit("name", value)

    @property
    def project(self) -> str:
        return self._project

    @property
    def entity(self) -> str:
        return self._entity

    @property
    def path(self) -> str:
        return "/".join(p for p in (self._entity, self._project, self._id) if p)

    @property
    def group(self) -> str:
        return self._group or ""

    @property
    def job_type(self) -> str:
        return self._job_type or ""

    @property
    def tags(self) -> tuple[str, ...]:
        return self._tags

    @tags.setter
    def tags(self, value: Sequence[str]) -> None:
        self._tags = tuple(value)
        self._meta("tags", list(self._tags))
        self._live_edit("tags", list(self._tags))

    @property
    def notes(self) -> str | None:
        return self._notes

    @notes.setter
    def notes(self, value: str) -> None:
        self._notes = value
        self._meta("notes", value)
        self._live_edit("notes", value)

    @property
    def url(self) -> str | None:
        url = getattr(self._inner, "url", None)
        if url is None and self._mode == "offline":
            warn_once("offline-url", "run.url is None: the run is offline")
        return url

    def get_url(self) -> str | None:
        return self.url

    @property
    def project_url(self) -> str | None:
        url = self.url
        return url.rsplit("/runs/", 1)[0] if url and "/runs/" in url else None

    def get_project_url(self) -> str | None:
        return self.project_url

    @property
    def dir(self) -> str:
        """The run's files folder (``<data dir>/<project>/<id>/files``), as W&B's
        ``run.dir``: ``save()`` copies files here."""
        root = Path(self._attach["root"]) / self._project / self._id / "files"
        if not self.disabled:
            root.mkdir(parents=True, exist_ok=True)
        return str(root)

    @property
    def sync_dir(self) -> str:
        return str(Path(self._attach["root"]) / self._project / self._id)

    @property
    def step(self) -> int:
        return self._history.step

    @property
    def starting_step(self) -> int:
        return 0

    @property
    def resumed(self) -> bool:
        return bool(getattr(self._inner, "incarnation", 0))

    @property
    def offline(self) -> bool:
        return self._mode == "offline"

    @property
    def disabled(self) -> bool:
        return self._inner is None

    @property
    def config_static(self) -> Config:
        return self.config

    @property
    def sweep_id(self) -> None:
        return None

    @property
    def rankwise_run(self) -> Any:
        """The rankwise ``Run`` underneath (None when disabled)."""
        self._ensure()
        return self._inner

    @property
    def _attach_id(self) -> str:
        return json.dumps(self._attach, sort_keys=True)

    def __repr__(self) -> str:
        return f"<Run {self.path} ({'disabled' if self.disabled else self._mode})>"

    # -- processes ---------------------------------------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        return {"_attach": self._attach, "_init_pid": self._pid, "_is_finished": self._finished}

    def __setstate__(self, state: dict[str, Any]) -> None:
        if state["_init_pid"] == os.getpid():
            raise RuntimeError("attaching to a run in the process that made it is not allowed")
        _state.attached(state["_attach"], into=self)
        _state.adopt(self)

    def _ensure(self) -> None:
        """In a process other than the one that made this run, attach to it first."""
        if self._pid != os.getpid() and self._inner is not None:
            _state.attached(self._attach, into=self)
            if _state.current is self:  # a forked child's wandb.run: its globals follow
                for hook in _state.on_current_attached:
                    hook(self)

    def _rebuild(self, inner: Any, spec: Mapping[str, Any], settings: Any) -> None:
        """Become this process's stream ``inner`` of the run ``spec`` describes, never
        primary (``_state.attached``: a run made in another process)."""
        Run.__init__(
            self, inner, project=spec["project"], run_id=spec["run_id"],
            entity=spec.get("entity"), name=None, group=None, job_type=None, tags=(),
            notes=None, mode=str(spec.get("mode") or "online"), settings=settings,
            attach={k: v for k, v in spec.items() if k != "child_label"},
            record_config=False, on_finish=_state.forget,
        )  # fmt: skip

    # -- logging ----------------------------------------------------------------------
    def log(
        self,
        data: dict[str, Any],
        step: int | None = None,
        commit: bool | None = None,
        sync: bool | None = None,
    ) -> None:
        """W&B's ``run.log`` (see ``rankwise.wandb._history`` for the row rules)."""
        if self._finished:
            raise UsageError(
                f"Run ({self._id}) is finished. The call to log will be ignored. Please "
                "make sure that you are using an active run."
            )
        self._ensure()
        self._history.log(data, step=step, commit=commit)

    def _emit(self, step: int, values: dict[str, Any]) -> None:
        if self._inner is not None:
            if None in values.values():
                values = {k: v for k, v in values.items() if v is not None}
            if values:
                self._inner.log(values, step=step)

    def define_metric(
        self,
        name: str,
        step_metric: str | Any = None,
        step_sync: bool | None = None,
        hidden: bool | None = None,
        summary: str | None = None,
        goal: str | None = None,
        overwrite: bool | None = None,
        reduce: str | None = None,
    ) -> Any:
        """W&B's ``define_metric``; ``reduce=`` (and the rest) also reach rankwise's own
        ``run.define_metric`` (the cross-rank line of the metric) where it exists."""
        if hasattr(step_metric, "name"):
            step_metric = step_metric.name
        definition = self._metrics.define(name, step_metric, step_sync, hidden, summary, goal)
        self._meta("m", self._metrics.as_config())
        native = getattr(self._inner, "define_metric", None)
        if native is not None:
            self._ensure()
            kwargs = {
                "reduce": reduce,
                "step_metric": step_metric,
                "summary": summary,
                "goal": goal,
                "hidden": hidden,
            }
            try:
                native(name, **{k: v for k, v in kwargs.items() if v is not None})
            except Exception as exc:
                if reduce is not None:
                    raise  # rankwise's own argument: a bad one is the caller's to fix
                warn_once(f"define-metric:{name}", f"rankwise define_metric({name!r}): {exc}")
        elif reduce is not None:
            warn_once("reduce", "define_metric(reduce=...) needs a newer rankwise: ignored")
        return definition

    def _config_changed(self, items: dict[str, Any]) -> None:
        if self._inner is not None and self._record_config:
            self._ensure()
            self._inner.config.update(items)

    def _summary_changed(self, items: dict[str, Any]) -> None:
        if self._inner is not None:
            self._ensure()
            self._inner.summary.update(items)

    def _live_edit(self, field: str, value: Any) -> None:
        """The rankwise run's own edit record (``rankwise.sdk.live_edits``), so the
        dashboard and ``Api`` show the new value; never raises."""
        if type(self._inner).__name__ == "Run" and hasattr(type(self._inner), field):
            try:
                setattr(self._inner, field, value)
            except Exception:  # tracking never stops training
                pass

    def _meta(self, key: str, value: Any) -> None:
        """W&B keeps run metadata in config ``_wandb``; so does this (hidden from keys)."""
        self._wandb_meta[key] = value
        self.config._items["_wandb"] = dict(self._wandb_meta)
        self._config_changed({"_wandb": dict(self._wandb_meta)})

    def _label(
        self,
        code: str | None = None,
        repo: str | None = None,
        code_version: str | None = None,
        **kw: Any,
    ) -> None:
        labels = {
            k: v
            for k, v in {"code": code, "repo": repo, "code_version": code_version, **kw}.items()
            if v
        }
        if labels:
            self._meta("label", labels)

    # -- ending ---------------------------------------------------------------------------
    def finish(self, exit_code: int | None = None, quiet: bool | None = None) -> None:
        """End the run: ``finished`` for 0 (or None), ``failed`` otherwise. Idempotent."""
        self._end(int(exit_code or 0), None)

    def _end(self, exit_code: int, error: BaseException | None) -> None:
        if self._finished:
            return
        if self._pid != os.getpid() and self._inner is None:
            self._finished = True
            return
        self._ensure()
        try:
            self._history.flush_pending()
            pending = self.summary.unpinned()
            if pending and self._inner is not None:
                self._inner.summary.update(pending)
            for source, dest in self._saved:
                if os.path.isfile(source):
                    shutil.copyfile(source, dest)
        finally:
            self._finished = True
            if self._inner is not None:
                if error is None:
                    self._inner.finish(exit_code)
                else:
                    self._inner.end("failed", exit_code=exit_code, error=error)
            if self._on_finish is not None:
                self._on_finish(self)

    def __enter__(self) -> Run:
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> Literal[False]:
        if exc is not None:
            traceback.print_exception(exc_type, exc, tb)
            self._end(1, exc)
        else:
            self._end(0, None)
        return False


class RunDisabled(Run):
    """The run of ``mode="disabled"``: every call works and records nothing."""
