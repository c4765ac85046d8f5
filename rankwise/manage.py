"""Editing runs from Python and the CLI: ``Api.edit_run``, ``RunInfo.update()``,
``rankwise edit``.

Against a data directory an edit is appended to ``edits.jsonl`` beside the run's
streams (``rankwise.edits``; never into the streams); against a server it is
``POST /api/v1/projects/{project}/runs/{run}/edits`` (a writer token: a write token of
the project, its ingest token or an admin token).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

import msgspec

from . import edits as E
from .errors import RunNotFoundError, ServerError, UsageError
from .wire.runs import RunInfo


def _q(part: str) -> str:
    return quote(part, safe="")


def edit_local(
    root: Path, run: RunInfo, fields: dict[str, Any], source: str = "api"
) -> list[E.Edit]:
    """Keep ``fields`` (checked: ``edits.changes``) as edits of a run in ``root``."""
    run_dir = Path(root) / run.project / run.id
    if not (run_dir / "streams").is_dir():
        raise RunNotFoundError(f"no run {run.id!r} in project {run.project!r} under {root}")
    made = E.make(fields, source)
    E.append_file(run_dir, made)
    return made


def edit_remote(
    server: str, token: str | None, project: str, run_id: str, body: dict[str, Any], source: str
) -> RunInfo:
    """Send one edit request; the run as edited."""
    from . import _http

    path = f"/api/v1/projects/{_q(project)}/runs/{_q(run_id)}/edits"
    with _http.make_client(server, token=token) as client:
        try:
            response = client.post(
                path,
                json=body,
                headers={"Accept": _http.MSGPACK, "X-Rankwise-Source": source},
            )
        except Exception as exc:
            raise ServerError(f"cannot reach the rankwise server at {server}: {exc}") from exc
        if response.status_code in (401, 403):
            raise ServerError(
                f"the rankwise server refused this edit ({response.status_code}: "
                f"{_http.error_message(response)}): editing needs a writer token of the "
                "project: a write token (rankwise token create --role write --project P), its "
                "ingest token or an admin token"
            )
        return msgspec.convert(_http.check_reply(response), RunInfo)


def history_remote(server: str, token: str | None, project: str, run_id: str) -> list[E.Edit]:
    from . import _http

    path = f"/api/v1/projects/{_q(project)}/runs/{_q(run_id)}/edits"
    with _http.make_client(server, token=token) as client:
        got = _http.get_msgpack(client, path)
    return [msgspec.convert(e, E.Edit) for e in got["edits"]]


def body_of(
    *,
    name: str | None = None,
    tags: Sequence[str] | None = None,
    add_tags: Sequence[str] = (),
    remove_tags: Sequence[str] = (),
    notes: str | None = None,
    group: str | None = None,
    job_type: str | None = None,
    clear: Sequence[str] = (),
) -> dict[str, Any]:
    """An edit request's body (``wire.manage.EditRequest``), only what is set."""
    body: dict[str, Any] = {}
    for key, value in (
        ("name", name),
        ("notes", notes),
        ("group", group),
        ("job_type", job_type),
    ):
        if value is not None:
            body[key] = value
    if tags is not None:
        if isinstance(tags, str):
            raise UsageError("tags are a list of strings, e.g. ['baseline']")
        body["tags"] = list(tags)
    if add_tags:
        body["add_tags"] = list(add_tags)
    if remove_tags:
        body["remove_tags"] = list(remove_tags)
    if clear:
        body["clear"] = list(clear)
    return body


def snapshot(run: RunInfo) -> dict[str, Any]:
    """The editable fields of ``run`` as read (what ``update`` compares to)."""
    return {f: list(getattr(run, f)) if f == "tags" else getattr(run, f) for f in E.FIELDS}


def update(run: RunInfo) -> RunInfo:
    """``RunInfo.update()``: keep what was changed on ``run`` (name, tags, notes,
    group, job_type) since it was read; the run as kept."""
    api = getattr(run, "_api", None)
    kept = getattr(run, "_kept", None)
    if api is None or kept is None:
        raise UsageError("this run was not read through rankwise.Api: nothing to update")
    fields = changed(snapshot(run), kept)
    if not fields:
        return run
    return api.edit_run(run.id, project=run.project, **fields)  # type: ignore[no-any-return]


def changed(edited: dict[str, Any], kept: dict[str, Any]) -> dict[str, Any]:
    out = {f: edited[f] for f in E.FIELDS if edited[f] != kept[f]}
    clear = [f for f in ("notes", "group", "job_type") if f in out and out[f] is None]
    for f in clear:
        del out[f]
    if clear:
        out["clear"] = clear
    return out
