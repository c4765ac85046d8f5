"""Requests and replies of run management: edits, bulk tags and the runs search.

Replies are msgspec structs (documented through ``rankwise.server.openapi.STRUCTS``);
request bodies are pydantic models, which FastAPI validates and documents.
"""

from __future__ import annotations

from typing import Any

import msgspec
from pydantic import BaseModel, Field

from ..filters import MAX_IN
from .edits import Edit


class EditsReply(msgspec.Struct, kw_only=True):
    """``GET /projects/{project}/runs/{run}/edits``: the run's edits, oldest first."""

    edits: list[Edit]


class BulkTagsReply(msgspec.Struct, kw_only=True):
    """``POST /projects/{project}/runs/tags``: the runs whose tags changed."""

    edited: list[str]


class EditRequest(BaseModel):
    """``POST /projects/{project}/runs/{run}/edits``: the fields to change (at least one)."""

    name: str | None = Field(None, description="the run's display name")
    tags: list[str] | None = Field(None, description="the whole new tag list")
    add_tags: list[str] = Field(default_factory=list, description="tags to add")
    remove_tags: list[str] = Field(default_factory=list, description="tags to remove")
    notes: str | None = Field(None, description="Markdown notes")
    group: str | None = None
    job_type: str | None = None
    clear: list[str] = Field(
        default_factory=list, description="fields set to none: notes, group, job_type"
    )


class BulkTagsRequest(BaseModel):
    """``POST /projects/{project}/runs/tags``: add and remove tags on several runs."""

    runs: list[str] = Field(min_length=1, max_length=MAX_IN, description="run ids")
    add: list[str] = Field(default_factory=list)
    remove: list[str] = Field(default_factory=list)


class SearchRequest(BaseModel):
    """``POST /projects/{project}/runs/search``: W&B's MongoDB-style ``filters``."""

    filters: dict[str, Any] = Field(
        default_factory=dict, description='e.g. {"config.lr": {"$gt": 0.01}}'
    )
    order: str = Field("-created_at", max_length=400, description="e.g. +summary_metrics.loss")
    limit: int = Field(100, ge=1, le=1000)
    offset: int = Field(0, ge=0)
    with_streams: bool = False


STRUCTS: tuple[type, ...] = (EditsReply, BulkTagsReply, Edit)
