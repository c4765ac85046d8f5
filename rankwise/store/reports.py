"""Reports: saved pages of Markdown text and live panels, per project, versioned.

Every save adds a version (``reports`` table, migration 12: one row per (project, name,
version), the blocks as JSON); the newest is the report, older ones stay readable. A
save may name the version it was edited from (``base``): when another save came first
it is refused (``ReportConflictError``, HTTP 409) rather than silently undone. Two saves
racing for the same number leave one row (``ON CONFLICT DO NOTHING``); the loser retries
on the next number, or is refused when it named a base.

Blocks are checked here (``check_report``: their kinds, the fields each kind needs, and
sizes) and kept as sent: the store never interprets a panel's settings. Text is kept as
written; it is Markdown, rendered and sanitized by the dashboard (never raw HTML).
"""

from __future__ import annotations

import json
import math
import time
from typing import Any, Protocol

from ..errors import RankwiseError, UsageError
from ..wire.reports import Report, ReportSummary, ReportVersion
from .sqlbase import SQLBase

MAX_NAME = 100
MAX_TITLE = 300
MAX_BLOCKS = 200
MAX_TEXT = 100_000  # characters of one text block
MAX_CAPTION = 1_000
MAX_JSON = 1024 * 1024  # bytes of one version's blocks as JSON
MAX_RUNS = 20  # runs of one chart
MAX_METRICS = 20  # metrics of one chart

TEXT = "text"
PANELS = ("chart", "media", "table", "histogram", "health", "failure", "lineage")
KINDS = (TEXT, *PANELS)
# The panels of one run (a chart names several); lineage names an artifact instead.
RUN_PANELS = ("media", "table", "histogram", "health", "failure")


class ReportConflictError(RankwiseError):
    """The report changed since the version a save was edited from (HTTP 409)."""

    def __init__(self, latest: int) -> None:
        now = f" (now version {latest})" if latest > 0 else ""
        super().__init__(
            f"the report was saved by someone else since{now}: reload it, "
            "then apply your edits again"
        )
        self.latest = latest


def _str(block: dict[str, Any], field: str, where: str, limit: int, required: bool) -> None:
    value = block.get(field)
    if value is None and not required:
        return
    if not isinstance(value, str) or (required and not value):
        raise UsageError(f"{where}: {field!r} must be a non-empty string")
    if len(value) > limit:
        raise UsageError(f"{where}: {field!r} has at most {limit} characters, not {len(value)}")


def _run_ref(value: Any, where: str) -> None:
    if (
        not isinstance(value, dict)
        or not isinstance(value.get("project"), str)
        or not isinstance(value.get("run"), str)
        or not value["project"]
        or not value["run"]
    ):
        raise UsageError(f'{where}: a run is {{"project": "...", "run": "..."}}')


def check_block(block: Any, i: int) -> None:
    """Raise ``UsageError`` naming the fix when block ``i`` is not a valid block."""
    where = f"block {i}"
    if not isinstance(block, dict):
        raise UsageError(f"{where}: a block is a JSON object with a 'type'")
    kind = block.get("type")
    if kind not in KINDS:
        raise UsageError(f"{where}: 'type' must be one of {', '.join(KINDS)}, not {kind!r}")
    _str(block, "id", where, 64, required=False)
    _str(block, "caption", where, MAX_CAPTION, required=False)
    if kind == TEXT:
        text = block.get("text", "")
        if not isinstance(text, str):
            raise UsageError(f"{where}: a text block's 'text' is a Markdown string")
        if len(text) > MAX_TEXT:
            raise UsageError(f"{where}: a text block has at most {MAX_TEXT} characters")
    elif kind == "chart":
        runs = block.get("runs")
        if not isinstance(runs, list) or not 1 <= len(runs) <= MAX_RUNS:
            raise UsageError(f"{where}: a chart names 1 to {MAX_RUNS} runs in 'runs'")
        for run in runs:
            _run_ref(run, where)
        metrics = block.get("metrics")
        if (
            not isinstance(metrics, list)
            or not 1 <= len(metrics) <= MAX_METRICS
            or not all(isinstance(m, str) and m for m in metrics)
        ):
            raise UsageError(f"{where}: a chart names 1 to {MAX_METRICS} metric keys in 'metrics'")
        if block.get("mode", "band") not in ("band", "ranks"):
            raise UsageError(f"{where}: a chart's 'mode' is 'band' (cross-rank) or 'ranks'")
        if block.get("x", "step") not in ("step", "time"):
            raise UsageError(f"{where}: a chart's 'x' is 'step' or 'time'")
        if not isinstance(block.get("log", False), bool):
            raise UsageError(f"{where}: a chart's 'log' is true or false")
        smooth = block.get("smoothing", 0)
        if (
            isinstance(smooth, bool)
            or not isinstance(smooth, (int, float))
            or not (math.isfinite(smooth) and 0 <= smooth < 1)
        ):
            raise UsageError(f"{where}: a chart's 'smoothing' is a number in [0, 1)")
    elif kind in RUN_PANELS:
        _run_ref(block.get("run"), where)
        if kind in ("media", "table", "histogram"):
            _str(block, "key", where, 1000, required=True)
            step = block.get("step")
            if step is not None and (isinstance(step, bool) or not isinstance(step, int)):
                raise UsageError(f"{where}: 'step' is an integer, or null for the latest")
            _str(block, "label", where, 200, required=False)
    else:  # lineage
        _str(block, "artifact", where, 300, required=True)
        _str(block, "version", where, 100, required=False)


def check_report(name: str, title: str, blocks: Any) -> tuple[str, str]:
    """The report's name and title, stripped, and its blocks checked; raises
    ``UsageError`` naming the fix when anything is unfit."""
    clean = name.strip() if isinstance(name, str) else ""
    if not clean:
        raise UsageError("a report needs a name: pass a non-empty name")
    if len(clean) > MAX_NAME:
        raise UsageError(f"a report name has at most {MAX_NAME} characters, not {len(clean)}")
    if not isinstance(title, str):
        raise UsageError("a report's title is a string")
    title = title.strip()
    if len(title) > MAX_TITLE:
        raise UsageError(f"a report's title has at most {MAX_TITLE} characters")
    if not isinstance(blocks, list):
        raise UsageError("a report's blocks are a JSON list of blocks")
    if len(blocks) > MAX_BLOCKS:
        raise UsageError(f"a report has at most {MAX_BLOCKS} blocks, not {len(blocks)}")
    for i, block in enumerate(blocks):
        check_block(block, i)
    if len(_encode(blocks)) > MAX_JSON:
        raise UsageError(f"a report's blocks take at most {MAX_JSON} bytes as JSON")
    return clean, title


def _encode(blocks: list[dict[str, Any]]) -> str:
    return json.dumps(blocks, sort_keys=True, allow_nan=False)


class ReportStore(Protocol):
    """What a store keeps of reports (composed into ``rankwise.store.base.Store``)."""

    def list_reports(self, project: str) -> list[ReportSummary]:
        """The project's reports (their latest versions), by name."""

    def get_report(self, project: str, name: str, version: int | None = None) -> Report | None:
        """One version of a report (None: the latest); None when there is no such one."""

    def report_versions(self, project: str, name: str) -> list[ReportVersion] | None:
        """The report's versions, newest first (None: no such report)."""

    def save_report(
        self,
        project: str,
        name: str,
        title: str,
        blocks: list[dict[str, Any]],
        base: int | None = None,
        author: str = "",
    ) -> Report:
        """Save a new version (the first one creates the report); ``base``: the version
        it was edited from, refused with ``ReportConflictError`` if it is not the latest."""

    def delete_report(self, project: str, name: str) -> bool:
        """Delete the report and all its versions; False when there was none."""


_LATEST = (
    "SELECT name, title, version, created, data FROM reports r WHERE project = ? AND "
    "version = (SELECT MAX(version) FROM reports WHERE project = r.project AND name = r.name)"
)


class Reports(SQLBase):
    """Store methods for reports; mixed into ``SQLStore`` (uses its transactions)."""

    def list_reports(self, project: str) -> list[ReportSummary]:
        rows = self._read(lambda tx: tx.all(_LATEST + " ORDER BY name", (project,)))
        return [
            ReportSummary(
                project=project,
                name=name,
                title=title,
                version=int(version),
                updated=float(created),
                blocks=len(json.loads(data)),
            )
            for name, title, version, created, data in rows
        ]

    def get_report(self, project: str, name: str, version: int | None = None) -> Report | None:
        def get(tx: Any) -> tuple[Any, ...] | None:
            top = tx.one(
                "SELECT MAX(version) FROM reports WHERE project = ? AND name = ?", (project, name)
            )
            if top is None or top[0] is None:
                return None
            want = int(top[0]) if version is None else version
            row = tx.one(
                "SELECT title, version, created, author, data FROM reports "
                "WHERE project = ? AND name = ? AND version = ?",
                (project, name, want),
            )
            return None if row is None else (int(top[0]), *row)

        found = self._read(get)
        if found is None:
            return None
        latest, title, ver, created, author, data = found
        return Report(
            project=project,
            name=name,
            title=title,
            version=int(ver),
            latest=latest,
            blocks=json.loads(data),
            created=float(created),
            author=author,
        )

    def report_versions(self, project: str, name: str) -> list[ReportVersion] | None:
        rows = self._read(
            lambda tx: tx.all(
                "SELECT version, title, created, author, data FROM reports "
                "WHERE project = ? AND name = ? ORDER BY version DESC",
                (project, name),
            )
        )
        if not rows:
            return None
        return [
            ReportVersion(
                version=int(v),
                title=title,
                created=float(created),
                author=author,
                blocks=len(json.loads(data)),
            )
            for v, title, created, author, data in rows
        ]

    def save_report(
        self,
        project: str,
        name: str,
        title: str,
        blocks: list[dict[str, Any]],
        base: int | None = None,
        author: str = "",
    ) -> Report:
        name, title = check_report(name, title, blocks)
        if base is not None and (isinstance(base, bool) or not isinstance(base, int)):
            raise UsageError("base is the version number the edit started from")
        data = _encode(blocks)

        def put(tx: Any) -> tuple[int, float] | None:
            top = tx.one(
                "SELECT MAX(version) FROM reports WHERE project = ? AND name = ?", (project, name)
            )
            latest = int(top[0]) if top is not None and top[0] is not None else 0
            if base is not None and base != latest:
                raise ReportConflictError(latest)
            now = time.time()
            n = tx.run(
                "INSERT INTO reports (project, name, version, title, data, created, author) "
                "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (project, name, version) DO NOTHING",
                (project, name, latest + 1, title, data, now, author),
            )
            return (latest + 1, now) if n else None

        for attempt in range(20):
            if attempt:
                time.sleep(0.005 * attempt)  # others are saving this report right now
            done = self._write(put)
            if done is not None:
                version, created = done
                return Report(
                    project=project,
                    name=name,
                    title=title,
                    version=version,
                    latest=version,
                    blocks=blocks,
                    created=created,
                    author=author,
                )
            if base is not None:  # another save took the number first
                raise ReportConflictError(base + 1)
        raise ReportConflictError(-1)  # twenty lost races in a row: the caller retries

    def delete_report(self, project: str, name: str) -> bool:
        n = self._write(
            lambda tx: tx.run("DELETE FROM reports WHERE project = ? AND name = ?", (project, name))
        )
        return bool(n)
