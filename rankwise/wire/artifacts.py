"""The artifact structs shared by the SDK, the local store, the server and the readers:
what a version is, the commit and use request bodies, and the listing replies."""

from __future__ import annotations

from typing import Any

import msgspec

from ..artifacts.manifest import Manifest


class Use(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Lineage: a run (stream ``label``) used an artifact version at ``time``."""

    run_id: str
    label: str | None = None
    time: float = 0.0


class VersionInfo(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One version of an artifact: ``v0``, ``v1``, ... per (project, name)."""

    project: str
    name: str
    version: str
    type: str
    digest: str
    size: int = 0
    file_count: int = 0
    aliases: list[str] = msgspec.field(default_factory=list)
    # Labels given with ``log_artifact(tags=)``; a version logged again with the same
    # content gains the new ones (unlike aliases, a tag may be on many versions).
    tags: list[str] = msgspec.field(default_factory=list)
    description: str | None = None
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)
    created_at: float = 0.0
    run_id: str | None = None
    label: str | None = None
    manifest: Manifest | None = None
    used_by: list[Use] = msgspec.field(default_factory=list)

    @property
    def qualified_name(self) -> str:
        return f"{self.project}/{self.name}:{self.version}"


class CommitRequest(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Body of ``POST /artifacts/{project}/{name}/versions``, and an outbox entry.

    ``client_id`` (uuid4 hex, chosen once per logged artifact) makes a retried commit
    return the version the first one made. ``version`` comes only from ``rankwise sync``
    of a version numbered in local mode: kept when that number is free on the server.
    """

    type: str
    manifest: Manifest
    client_id: str
    description: str | None = None
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)
    aliases: list[str] = msgspec.field(default_factory=list)
    tags: list[str] = msgspec.field(default_factory=list)
    run_id: str | None = None
    label: str | None = None
    version: str | None = None
    created_at: float | None = None


class ArtifactSummary(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One artifact name of a project, as the project listing shows it."""

    name: str
    type: str
    versions: int
    latest: str
    size: int = 0
    updated_at: float = 0.0


class RunArtifacts(msgspec.Struct, kw_only=True):
    """What a run logged and used."""

    logged: list[VersionInfo] = msgspec.field(default_factory=list)
    used: list[VersionInfo] = msgspec.field(default_factory=list)


class UseRequest(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Body of ``POST /artifacts/{project}/{name}/use``: lineage of one run's use."""

    run_id: str
    ref: str = "latest"
    label: str | None = None


class ArtifactsReply(msgspec.Struct, kw_only=True):
    """``GET /artifacts/{project}``: the project's artifact names."""

    artifacts: list[ArtifactSummary]


class VersionsReply(msgspec.Struct, kw_only=True):
    """``GET /artifacts/{project}/{name}``: its versions, newest first (no manifests)."""

    versions: list[VersionInfo]
