"""Reports on the wire: a report as the API answers it, the list, the versions.

A report is a title and an ordered list of blocks (``rankwise.store.reports`` checks
them): Markdown text, or a panel that stays live (a chart of one or more runs, a media,
table or histogram panel, a run's health strip, a hang or failure summary, an artifact's
lineage). Blocks are kept as the dashboard sent them, checked but never rewritten, so the
dashboard can grow a panel setting without a schema change. Each save is a new version;
older versions stay readable.
"""

from __future__ import annotations

from typing import Any

import msgspec


class Report(msgspec.Struct, kw_only=True):
    """One version of a report (the latest unless asked for another)."""

    project: str
    name: str  # unique per project; the report's URL names it
    title: str
    version: int  # this version's number, from 1
    latest: int  # the newest version's number (``version`` == ``latest``: the current one)
    blocks: list[dict[str, Any]]  # text and panel blocks, in page order
    created: float  # when this version was saved (Unix seconds)
    author: str = ""  # who saved it: the token's name or id ('' for the local dashboard)


class ReportSummary(msgspec.Struct, kw_only=True):
    project: str
    name: str
    title: str
    version: int  # the latest version's number
    updated: float  # when it was saved
    blocks: int  # how many blocks it has


class ReportsReply(msgspec.Struct, kw_only=True):
    reports: list[ReportSummary]  # by name


class ReportVersion(msgspec.Struct, kw_only=True):
    version: int
    title: str
    created: float
    author: str = ""
    blocks: int = 0


class ReportVersionsReply(msgspec.Struct, kw_only=True):
    versions: list[ReportVersion]  # newest first


STRUCTS: tuple[type, ...] = (
    Report,
    ReportSummary,
    ReportsReply,
    ReportVersion,
    ReportVersionsReply,
)
