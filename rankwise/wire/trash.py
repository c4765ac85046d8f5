"""Requests and replies of deleting runs: the trash, purges, restores and the audit log.

Replies are msgspec structs (documented through ``rankwise.server.openapi.STRUCTS``);
request bodies are pydantic models, which FastAPI validates and documents.
"""

from __future__ import annotations

from typing import Any

import msgspec
from pydantic import BaseModel, Field

from ..filters import MAX_IN


class DeleteReply(msgspec.Struct, kw_only=True):
    """``POST /projects/{project}/runs/delete``: the runs deleted (or, on a dry run, the
    runs that would be), how many, and whether they were purged for good."""

    runs: list[str]
    count: int
    purged: bool
    dry_run: bool


class RestoreReply(msgspec.Struct, kw_only=True):
    """``POST /projects/{project}/runs/restore``: the runs taken out of the trash."""

    restored: list[str]


class TrashedRun(msgspec.Struct, kw_only=True):
    """One run in the trash: deleted when and by whom, purged for good after
    ``purge_after`` (a time) by the server's sweep unless restored before."""

    project: str
    id: str
    name: str
    deleted_at: float
    deleted_by: str | None
    purge_after: float


class TrashReply(msgspec.Struct, kw_only=True):
    """``GET /projects/{project}/trash``: the project's deleted runs, newest first."""

    runs: list[TrashedRun]
    retention_days: float


class AuditEntry(msgspec.Struct, kw_only=True):
    """Who did what to which runs, when: ``action`` is ``delete``, ``restore`` or
    ``purge``; ``target`` the run ids (or the filter, as JSON) it named."""

    at: float
    who: str
    action: str
    project: str
    target: str
    count: int


class AuditReply(msgspec.Struct, kw_only=True):
    """``GET /audit``: the audit log, newest first (admins only)."""

    entries: list[AuditEntry]


class DeleteRequest(BaseModel):
    """``POST /projects/{project}/runs/delete``: the runs by id, or by a filter (W&B's
    MongoDB-style, as ``runs/search`` takes it); one of the two."""

    runs: list[str] = Field(default_factory=list, max_length=MAX_IN, description="run ids")
    filters: dict[str, Any] | None = Field(
        None, description='pick the runs by a filter, e.g. {"tags": "smoke"}'
    )
    purge: bool = Field(False, description="remove for good (no trash, not restorable)")
    dry_run: bool = Field(False, description="only answer which runs it would delete")


class RestoreRequest(BaseModel):
    """``POST /projects/{project}/runs/restore``: runs to take out of the trash."""

    runs: list[str] = Field(min_length=1, max_length=MAX_IN, description="run ids")


STRUCTS: tuple[type, ...] = (DeleteReply, RestoreReply, TrashReply, TrashedRun, AuditReply)
