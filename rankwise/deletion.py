"""Deleting runs from ``Api`` and ``rankwise rm``: on a server (its delete routes) or in a
data directory (the run folders, ``rankwise.local_trash``).

On a server a deleted run goes to the server's trash, restorable until its retention
(``rankwise server --trash-days``) ends, and a purge removes its rows and collects its
blobs (``rankwise.store.trash``). In a data directory a deleted run's folder moves to
``<dir>/.trash/<project>/<run>``, a restore moves it back, and a purge removes the folder;
nothing purges a data directory's trash by itself (``rankwise rm --purge`` does).
"""

from __future__ import annotations

import getpass
import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

import msgspec

from . import local_trash
from .errors import RunNotFoundError, ServerError
from .wire.trash import AuditEntry, DeleteReply, TrashedRun

_DAY = 86400.0


def _q(part: str) -> str:
    return quote(part, safe="")


def _post(server: str, token: str | None, path: str, body: dict[str, Any]) -> Any:
    from . import _http

    with _http.make_client(server, token=token) as client:
        try:
            response = client.post(path, json=body, headers={"Accept": _http.MSGPACK})
        except Exception as exc:
            raise ServerError(f"cannot reach the rankwise server at {server}: {exc}") from exc
        if response.status_code in (401, 403):
            raise ServerError(
                f"the rankwise server refused this ({response.status_code}: "
                f"{_http.error_message(response)}): deleting runs needs a write token of the "
                "project (rankwise token create --role write --project P) or an admin token"
            )
        return _http.check_reply(response)


def delete_remote(
    server: str,
    token: str | None,
    project: str,
    runs: list[str],
    filters: dict[str, Any] | None,
    purge: bool,
    dry_run: bool,
) -> DeleteReply:
    body: dict[str, Any] = {"purge": purge, "dry_run": dry_run}
    if filters is not None:
        body["filters"] = filters
    else:
        body["runs"] = runs
    got = _post(server, token, f"/api/v1/projects/{_q(project)}/runs/delete", body)
    return msgspec.convert(got, DeleteReply)


def restore_remote(server: str, token: str | None, project: str, runs: list[str]) -> list[str]:
    got = _post(server, token, f"/api/v1/projects/{_q(project)}/runs/restore", {"runs": runs})
    return [str(r) for r in got["restored"]]


def trash_remote(server: str, token: str | None, project: str) -> list[TrashedRun]:
    from . import _http

    with _http.make_client(server, token=token) as client:
        got = _http.get_msgpack(client, f"/api/v1/projects/{_q(project)}/trash")
    return [msgspec.convert(t, TrashedRun) for t in got["runs"]]


def audit_remote(
    server: str, token: str | None, project: str | None, limit: int
) -> list[AuditEntry]:
    from . import _http

    params: dict[str, Any] = {"limit": limit}
    if project is not None:
        params["project"] = project
    with _http.make_client(server, token=token) as client:
        got = _http.get_msgpack(client, "/api/v1/audit", params)
    return [msgspec.convert(e, AuditEntry) for e in got["entries"]]


# -- a data directory --------------------------------------------------------------------


def who_here() -> str:
    try:
        return getpass.getuser()
    except Exception:
        return "local"


def delete_local(
    root: Path, project: str, runs: list[str], purge: bool, target: str | None = None
) -> list[str]:
    """Move these runs' folders to the trash (``purge``: remove them, from the trash
    too); returns the runs done. An unknown run raises ``RunNotFoundError`` before any
    is touched."""
    for run in runs:
        live = (root / project / run / "streams").is_dir()
        if not live and not (purge and local_trash.trash_dir(root, project, run).is_dir()):
            raise RunNotFoundError(f"no run {run!r} in project {project!r} under {root}")
    who = who_here()
    if purge:
        local_trash.remove(root, project, runs)
    else:
        local_trash.to_trash(root, project, runs)
        for run in runs:
            local_trash.mark(root, project, run, who)
    action = "purge" if purge else "delete"
    local_trash.audit(root, who, action, project, target or " ".join(runs), len(runs))
    return list(runs)


def restore_local(root: Path, project: str, runs: list[str]) -> list[str]:
    done = [r for r in runs if local_trash.trash_dir(root, project, r).is_dir()]
    local_trash.from_trash(root, project, done)
    for run in done:
        (root / project / run / local_trash.MARK).unlink(missing_ok=True)
    local_trash.audit(root, who_here(), "restore", project, " ".join(done), len(done))
    return done


def trash_local(root: Path, project: str) -> list[TrashedRun]:
    """The data directory's trashed runs of ``project`` (no retention: ``purge_after``
    is infinite, nothing purges them by itself)."""
    return [
        TrashedRun(
            project=project,
            id=run,
            name=run,
            deleted_at=at,
            deleted_by=by,
            purge_after=float("inf"),
        )
        for run, at, by in local_trash.trashed(root, project)
    ]


def audit_local(root: Path, project: str | None, limit: int) -> list[AuditEntry]:
    out = []
    for e in local_trash.audit_entries(root):
        if project is not None and e.get("project") != project:
            continue
        out.append(msgspec.convert(e, AuditEntry))
    return out[:limit]


def filter_text(filters: dict[str, Any]) -> str:
    return f"filter {json.dumps(filters, sort_keys=True)}"
