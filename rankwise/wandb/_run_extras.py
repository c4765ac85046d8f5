"""The parts of ``wandb.Run`` that hand work to rankwise as they are: ``watch``,
``save``, ``alert`` and the artifact calls (``rankwise.artifacts``)."""

from __future__ import annotations

import glob as globlib
import os
import shutil
import time
from collections.abc import Sequence
from typing import Any

from ._term import termlog, termwarn, warn_once

LEVELS = ("INFO", "WARN", "ERROR")
__all__ = ["AlertLevel", "RunExtras"]


class AlertLevel:
    INFO = "INFO"
    WARN = "WARN"
    ERROR = "ERROR"


class RunExtras:
    """Mixed into ``Run``, which provides what is declared here."""

    _inner: Any
    _alerts: dict[str, float]
    _saved: list[tuple[str, str]]  # (source, destination) copied again at finish

    def _ensure(self) -> None:
        raise NotImplementedError

    @property
    def dir(self) -> str:
        raise NotImplementedError

    # -- models ---------------------------------------------------------------------------
    def watch(
        self,
        models: Any,
        criterion: Any = None,
        log: str | None = "gradients",
        log_freq: int = 1000,
        idx: int | None = None,
        log_graph: bool = False,
    ) -> list[Any]:
        """rankwise's ``run.watch`` under W&B's key names (``gradients/<name>``, 64 bins,
        every ``log_freq``-th backward). A second call on the same model updates it
        rather than adding a second set of hooks (a deliberate difference)."""
        if log not in ("gradients", "parameters", "all", None):
            raise ValueError('log must be one of "gradients", "parameters", "all", or None')
        if log_graph:
            warn_once("log-graph", "watch(log_graph=True): the graph is not recorded by rankwise")
        if self._inner is None:
            return []
        self._ensure()
        self._inner.watch(models, log=log, log_freq=log_freq, ranks="all")
        return []

    def unwatch(self, models: Any = None) -> None:
        if self._inner is not None:
            self._ensure()
            self._inner.unwatch(models)

    # -- files and alerts -------------------------------------------------------------
    def save(
        self,
        glob_str: str | os.PathLike[str] | None = None,
        base_path: str | os.PathLike[str] | None = None,
        policy: str = "live",
    ) -> list[str]:
        """Copy the files matching ``glob_str`` into ``run.dir`` (relative to
        ``base_path``, default the pattern's folder); ``live``/``end`` files are copied
        again at ``finish()``. Returns the copies' paths."""
        if policy not in ("live", "now", "end"):
            raise ValueError('policy must be "live", "now", or "end"')
        if glob_str is None:
            return []
        pattern = os.fspath(glob_str)
        if pattern.startswith(("s3://", "gs://", "az://")):
            termlog(f"{pattern} is a cloud storage url, can't save file to W&B.")
            return []
        if self._inner is None:
            return []
        base = os.fspath(base_path) if base_path is not None else os.path.dirname(pattern)
        out = []
        for source in sorted(globlib.glob(pattern)):
            if not os.path.isfile(source):
                continue
            rel = os.path.relpath(source, base or ".")
            if rel.startswith(".."):
                rel = os.path.basename(source)
            dest = os.path.join(self.dir, rel)
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            shutil.copyfile(source, dest)
            out.append(dest)
            if policy != "now":
                self._saved.append((source, dest))
        return out

    def log_code(
        self,
        root: str | None = ".",
        name: str | None = None,
        include_fn: Any = None,
        exclude_fn: Any = None,
    ) -> Any:
        """Save the source files under ``root`` (``*.py``) as an artifact of type
        ``code`` (``rankwise.sdk.code``); returns it, or None when nothing matched."""
        method = self._native("log_code")
        return method and method(root, name=name, include_fn=include_fn, exclude_fn=exclude_fn)

    def restore(
        self,
        name: str,
        run_path: str | None = None,
        replace: bool = False,
        root: str | None = None,
    ) -> Any:
        """``wandb.restore`` for this run (or ``run_path``'s)."""
        return restore_file(self, name, run_path, replace, root)

    def alert(
        self, title: str, text: str, level: str | Any = None, wait_duration: Any = None
    ) -> None:
        """An alert event the rankwise server delivers (webhook, Slack, e-mail) and a
        console line of this process (``wandb: ALERT [LEVEL] title: text``), at most
        once per ``wait_duration`` (default 60 s) per title. W&B's level check is kept:
        a level other than INFO, WARN or ERROR raises ``ValueError``."""
        level = getattr(level, "value", level) or "INFO"
        if level not in LEVELS:
            raise ValueError("level must be one of 'INFO', 'WARN', or 'ERROR'")
        wait = 60.0 if wait_duration is None else wait_duration
        wait = wait.total_seconds() if hasattr(wait, "total_seconds") else float(wait)
        now = time.monotonic()
        last = self._alerts.get(title)
        if last is not None and now - last < wait:
            return
        self._alerts[title] = now
        if self._inner is not None:
            self._ensure()
            self._inner.alert(title, text, level, wait)
            termwarn(f"ALERT [{level}] {title}: {text}", prefix=False)

    def mark_preempting(self) -> None:
        warn_once("preempting", "mark_preempting() is not recorded by rankwise")

    def status(self) -> dict[str, Any]:
        return {"state": getattr(self._inner, "state", "disabled")}

    # -- artifacts (rankwise's artifact API) --------------------------------------------
    def _native(self, name: str) -> Any:
        self._ensure()
        method = getattr(self._inner, name, None)
        if method is None:
            if self._inner is None:
                return None
            from .errors import UnsupportedError

            raise UnsupportedError(f"run.{name}() needs rankwise's artifacts (not in this version)")
        return method

    def log_artifact(
        self,
        artifact_or_path: Any,
        name: str | None = None,
        type: str | None = None,
        aliases: Sequence[str] | None = None,
        tags: Sequence[str] | None = None,
    ) -> Any:
        method = self._native("log_artifact")
        return method and method(artifact_or_path, name=name, type=type, aliases=aliases, tags=tags)

    def use_artifact(
        self,
        artifact_or_name: Any,
        type: str | None = None,
        aliases: Sequence[str] | None = None,
        use_as: str | None = None,
    ) -> Any:
        method = self._native("use_artifact")
        return method and method(artifact_or_name, type=type, aliases=aliases, use_as=use_as)

    def log_model(
        self, path: Any, name: str | None = None, aliases: Sequence[str] | None = None
    ) -> Any:
        method = self._native("log_model")
        return method and method(path, name=name, aliases=aliases)

    def use_model(self, name: str) -> Any:
        method = self._native("use_model")
        return method and method(name)

    def link_model(
        self,
        path: Any,
        registered_model_name: str,
        name: str | None = None,
        aliases: Sequence[str] | None = None,
    ) -> Any:
        warn_once("link-model", "link_model(): rankwise has no model registry; logged as a model")
        return self.log_model(path, name=name or registered_model_name, aliases=aliases)

    def link_artifact(
        self, artifact: Any, target_path: str, aliases: Sequence[str] | None = None
    ) -> None:
        warn_once("link-artifact", "link_artifact(): rankwise has no registry: ignored")


def restore_file(current: Any, name: str, run_path: str | None, replace: bool, root: Any) -> Any:
    """``wandb.restore``: see ``rankwise.wandb.restore``."""
    from .. import Api
    from ..sdk import code
    from .errors import Error

    inner = getattr(current, "_inner", None)
    if run_path is None:
        if inner is None:
            raise Error("You must call wandb.init() before wandb.restore(), or give run_path")
        project, run_id = inner.project, inner.id
    else:
        parts = [p for p in str(run_path).split("/") if p and p != "runs"]
        if len(parts) < 2:
            raise ValueError(f"run_path {run_path!r}: give 'entity/project/run_id'")
        project, run_id = parts[-2], parts[-1]
    if inner is not None and getattr(inner, "server", None):
        api = Api(server=inner.server)
    elif inner is not None:
        api = Api(dir=inner.dir.parent.parent)
    else:
        server = os.environ.get("RANKWISE_SERVER")
        api = Api(server=server) if server else Api()
    if root is None:
        root = current.dir if current is not None and inner is not None else "."
    found = api.run(run_id, project=project)
    return code.restore(found, name, root, replace=replace)
