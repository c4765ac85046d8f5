"""Reports read back: from a data directory's index (what ``rankwise ui`` saved) or from a
server (``GET /api/v1/projects/{project}/reports...``), as the same structs
(``rankwise.wire.reports``).

``rankwise ui`` keeps a data directory's reports in its SQLite index,
``<dir>/.rankwise/index.db`` (the store's ``reports`` table); a directory no dashboard
has served has none.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

import msgspec

from ..errors import ReportNotFoundError, RunNotFoundError
from ..wire.reports import Report, ReportsReply, ReportSummary

if TYPE_CHECKING:
    from ..store.base import Store
    from .remote import RemoteReader

INDEX = Path(".rankwise") / "index.db"


def open_index(root: Path) -> Store | None:
    """The data directory's index store, migrated; None when it has none yet."""
    path = Path(root).absolute() / INDEX
    if not path.is_file():
        return None
    from ..store import open_store

    store = open_store(f"sqlite:///{path}")
    store.migrate()
    return store


def _missing(project: str, name: str, version: int | None) -> ReportNotFoundError:
    what = f"no report {name!r}" if version is None else f"no version {version} of report {name!r}"
    return ReportNotFoundError(
        f"{what} in project {project!r}: `rankwise report list --project {project}` lists them"
    )


def local_reports(root: Path, project: str) -> list[ReportSummary]:
    store = open_index(root)
    if store is None:
        return []
    try:
        return store.list_reports(project)
    finally:
        store.close()


def local_report(root: Path, project: str, name: str, version: int | None) -> Report:
    store = open_index(root)
    found = None
    if store is not None:
        try:
            found = store.get_report(project, name, version)
        finally:
            store.close()
    if found is None:
        raise _missing(project, name, version)
    return found


def _path(project: str, name: str = "") -> str:
    tail = f"/{quote(name, safe='')}" if name else ""
    return f"/api/v1/projects/{quote(project, safe='')}/reports{tail}"


def remote_reports(reader: RemoteReader, project: str) -> list[ReportSummary]:
    return msgspec.convert(reader.get(_path(project)), ReportsReply).reports


def remote_report(reader: RemoteReader, project: str, name: str, version: int | None) -> Report:
    try:
        data = reader.get(_path(project, name), {"version": version} if version else None)
    except RunNotFoundError:  # the reader's 404
        raise _missing(project, name, version) from None
    return msgspec.convert(data, Report)
