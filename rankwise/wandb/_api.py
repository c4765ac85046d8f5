"""``wandb.Api()``: reading runs back, over ``rankwise.Api``.

``Api().run("entity/project/id")`` (or ``"project/id"``) gives a run with W&B's
``id``, ``name``, ``state``, ``config``, ``summary``, ``history()`` (rows with ``_step``
and ``_timestamp``; a pandas DataFrame when pandas is installed and ``pandas=True``;
one stream: the primary's unless ``stream=`` names another) and ``files()``.
``artifact(name)`` is rankwise's ``Api.artifact`` (when this rankwise has artifacts).
Runs are read from the same data directory ``init`` writes to, or from
``RANKWISE_SERVER``.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from ..settings import default_server
from ._init import data_dir
from .errors import CommError


class Api:
    def __init__(
        self,
        overrides: dict[str, Any] | None = None,
        timeout: int | None = None,
        api_key: str | None = None,
    ) -> None:
        from ..api import Api as RankwiseApi

        overrides = overrides or {}
        self._dir = data_dir(overrides.get("root_dir") or os.environ.get("WANDB_DIR"), read=True)
        self._api = RankwiseApi(dir=self._dir, server=default_server())

    def run(self, path: str) -> ApiRun:
        parts = [p for p in path.split("/") if p]
        if len(parts) >= 3 and parts[-2] == "runs":
            parts = [*parts[:-2], parts[-1]]
        if len(parts) < 2:
            raise ValueError(f"run path {path!r}: give 'project/id' or 'entity/project/id'")
        project, run_id = parts[-2], parts[-1]
        try:
            info = self._api.run(run_id, project)
        except KeyError as exc:
            raise CommError(f"Could not find run {path}") from exc
        return ApiRun(info, self._dir)

    def runs(
        self,
        path: str | None = None,
        filters: dict[str, Any] | None = None,
        order: str = "-created_at",
        per_page: int = 50,
    ) -> list[ApiRun]:
        """The project's runs W&B's MongoDB-style ``filters`` pick, in ``order``
        (``rankwise.filters``: ``{"config.lr": {"$gt": 0.01}}``, ``"+summary_metrics.loss"``)."""
        project = path.split("/")[-1] if path else None
        found = self._api.runs(project, filters=filters or {}, order=order)
        return [ApiRun(info, self._dir) for info in found]

    def artifact(self, name: str, type: str | None = None) -> Any:
        method = getattr(self._api, "artifact", None)
        if method is None:
            raise CommError("artifacts need a rankwise with artifacts")
        parts = name.split("/")
        return method("/".join(parts[-2:]) if len(parts) > 2 else name)


class ApiRun:
    def __init__(self, info: Any, root: Path) -> None:
        self._info = info
        self._root = root
        self.id = info.id
        self.name = info.name
        self.project = info.project
        self.state = info.state
        self.group = info.group
        self.job_type = info.job_type
        self.tags = list(info.tags)
        self.notes = info.notes
        self.config = {k: v for k, v in info.config.items() if not k.startswith("_")}
        self.summary = dict(info.summary)
        self.path = [info.project, info.id]

    def update(self) -> None:
        """Keep changes to ``name``, ``tags``, ``notes``, ``group`` and ``job_type``
        (W&B's ``Run.update()``; ``rankwise.manage``)."""
        import msgspec

        edited = msgspec.structs.replace(
            self._info,
            name=self.name,
            tags=list(self.tags),
            notes=self.notes,
            group=self.group,
            job_type=self.job_type,
        )
        edited._api = getattr(self._info, "_api", None)
        edited._kept = getattr(self._info, "_kept", None)
        self._info = edited.update()

    def delete(self, delete_artifacts: bool = False) -> None:
        """Delete the run (W&B's ``Run.delete()``): to the trash, restorable until the
        server's retention ends (``rankwise restore``); see ``rankwise.deletion``."""
        self._info.delete(delete_artifacts)

    @property
    def display_name(self) -> str:
        return str(self.name)

    @property
    def rankwise_run(self) -> Any:
        """The ``rankwise.RunInfo`` (streams, health, every rank's history)."""
        return self._info

    def history(
        self,
        samples: int = 500,
        keys: list[str] | None = None,
        x_axis: str = "_step",
        pandas: bool = True,
        stream: str | None = None,
    ) -> Any:
        label = stream
        if label is None:
            label = next((s.label for s in self._info.streams if s.is_primary), None)
        rows = []
        for row in self._info.history(keys=keys, label=label):
            out = {k: v for k, v in row.items() if k not in ("step", "time", "label")}
            out["_step"] = row["step"]
            out["_timestamp"] = row["time"]
            rows.append(out)
        if pandas:
            try:
                import pandas as pd
            except ImportError:
                return rows
            return pd.DataFrame(rows)
        return rows

    def scan_history(
        self, keys: list[str] | None = None, page_size: int = 1000
    ) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = self.history(keys=keys, pandas=False)
        return rows

    def files(self) -> list[ApiFile]:
        folder = self._root / self.project / self.id / "files"
        if not folder.is_dir():
            return []
        return [ApiFile(p, folder) for p in sorted(folder.rglob("*")) if p.is_file()]


class ApiFile:
    def __init__(self, path: Path, folder: Path) -> None:
        self._path = path
        self.name = path.relative_to(folder).as_posix()
        self.size = path.stat().st_size

    def download(self, root: str = ".", replace: bool = False, exist_ok: bool = False) -> Any:
        dest = Path(root) / self.name
        if dest.exists() and not (replace or exist_ok):
            raise ValueError(f"{dest} already exists: pass replace=True")
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self._path, dest)
        return open(dest, "rb")
