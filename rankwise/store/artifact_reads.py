"""Store reads of artifacts: a project's names, a name's versions, one version with its
manifest and lineage, one manifest entry, a run's logged and used versions.

Mixed into ``SQLStore`` through ``ArtifactWrites`` (``rankwise.store.artifacts`` writes the
rows). Each read is one snapshot; an unknown name or version answers None.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ..artifacts.manifest import Chunk, Entry, Manifest, is_version
from ..wire.artifacts import ArtifactSummary, RunArtifacts, Use, VersionInfo
from .sqlbase import SQLBase
from .tx import Tx

LATEST = "latest"

_meta = msgspec.json.Decoder(dict[str, Any])
_chunks = msgspec.json.Decoder(list[Chunk])
_tags = msgspec.json.Decoder(list[str])

VERSION_COLUMNS = (
    "id, version, type, digest, size, file_count, description, metadata, created_at, run_id, "
    "label, tags"
)


def version_name(number: int) -> str:
    return f"v{number}"


def _label(value: str) -> str | None:
    return value or None


def aliases_of(tx: Tx, project: str, name: str) -> dict[int, list[str]]:
    """Version number -> its aliases (``latest`` first, then by name)."""
    out: dict[int, list[str]] = {}
    row = tx.one(
        "SELECT latest FROM artifact_names WHERE project = ? AND name = ?", (project, name)
    )
    if row is not None and row[0] >= 0:
        out[int(row[0])] = [LATEST]
    for alias, number in tx.all(
        "SELECT alias, version FROM artifact_aliases WHERE project = ? AND name = ? ORDER BY alias",
        (project, name),
    ):
        out.setdefault(int(number), []).append(alias)
    return out


def info_of(project: str, name: str, row: tuple[Any, ...], aliases: list[str]) -> VersionInfo:
    _, number, kind, digest, size, count, desc, meta, created, run_id, label, tags = row
    return VersionInfo(
        project=project,
        name=name,
        version=version_name(int(number)),
        type=kind,
        digest=digest,
        size=int(size),
        file_count=int(count),
        aliases=aliases,
        tags=_tags.decode(tags),
        description=desc,
        metadata=_meta.decode(meta),
        created_at=float(created),
        run_id=run_id,
        label=label,
    )


def resolve(tx: Tx, project: str, name: str, ref: str) -> int | None:
    """The version number ``ref`` (``latest``, ``v3`` or an alias) names, None if none."""
    if ref == LATEST:
        row = tx.one(
            "SELECT latest FROM artifact_names WHERE project = ? AND name = ?", (project, name)
        )
        return int(row[0]) if row is not None and row[0] >= 0 else None
    if is_version(ref):
        number = int(ref[1:])
        found = tx.one(
            "SELECT 1 FROM artifact_versions WHERE project = ? AND name = ? AND version = ?",
            (project, name, number),
        )
        return number if found else None
    row = tx.one(
        "SELECT version FROM artifact_aliases WHERE project = ? AND name = ? AND alias = ?",
        (project, name, ref),
    )
    return int(row[0]) if row is not None else None


def load(
    tx: Tx, project: str, name: str, number: int, manifest: bool = False
) -> VersionInfo | None:
    """One version (with its manifest and lineage when ``manifest``)."""
    row = tx.one(
        f"SELECT {VERSION_COLUMNS} FROM artifact_versions "
        "WHERE project = ? AND name = ? AND version = ?",
        (project, name, number),
    )
    if row is None:
        return None
    info = info_of(project, name, row, aliases_of(tx, project, name).get(number, []))
    if manifest:
        info.manifest = Manifest(entries=entries(tx, int(row[0])))
        info.used_by = [
            Use(run_id=r, label=_label(lb), time=float(t))
            for r, lb, t in tx.all(
                "SELECT run_id, label, time FROM artifact_uses "
                "WHERE project = ? AND name = ? AND version = ? ORDER BY time, run_id, label",
                (project, name, number),
            )
        ]
    return info


def entries(tx: Tx, version_id: int, path: str | None = None) -> list[Entry]:
    sql = "SELECT path, digest, size, chunks, ref FROM artifact_files WHERE version_id = ?"
    params: tuple[Any, ...] = (version_id,)
    if path is not None:
        sql += " AND path = ?"
        params = (version_id, path)
    out = []
    for p, digest, size, chunks, ref in tx.all(sql + " ORDER BY path", params):
        if ref is not None:
            out.append(Entry(path=p, ref=ref))
        else:
            out.append(Entry(path=p, digest=digest, size=int(size), chunks=_chunks.decode(chunks)))
    return out


class ArtifactReads(SQLBase):
    """The artifact reads of the store."""

    def artifact_names(self, project: str, type: str | None = None) -> list[ArtifactSummary]:
        """The artifact names of a project (of ``type``), by name."""

        def read(tx: Tx) -> list[ArtifactSummary]:
            sql = (
                "SELECT n.name, n.type, n.latest, n.updated_at, "
                "(SELECT COUNT(*) FROM artifact_versions v "
                " WHERE v.project = n.project AND v.name = n.name), "
                "(SELECT v.size FROM artifact_versions v WHERE v.project = n.project "
                " AND v.name = n.name AND v.version = n.latest) "
                "FROM artifact_names n WHERE n.project = ? AND n.latest >= 0"
            )
            params: tuple[Any, ...] = (project,)
            if type is not None:
                sql += " AND n.type = ?"
                params = (project, type)
            return [
                ArtifactSummary(
                    name=n,
                    type=t,
                    versions=int(count),
                    latest=version_name(int(latest)),
                    size=int(size or 0),
                    updated_at=float(updated),
                )
                for n, t, latest, updated, count, size in tx.all(sql + " ORDER BY n.name", params)
            ]

        result: list[ArtifactSummary] = self._read(read)
        return result

    def artifact_versions(self, project: str, name: str) -> list[VersionInfo] | None:
        """Every version of ``name`` (no manifests), newest first; None for no such name."""

        def read(tx: Tx) -> list[VersionInfo] | None:
            rows = tx.all(
                f"SELECT {VERSION_COLUMNS} FROM artifact_versions "
                "WHERE project = ? AND name = ? ORDER BY version DESC",
                (project, name),
            )
            if not rows:
                return None
            aliases = aliases_of(tx, project, name)
            return [info_of(project, name, r, aliases.get(int(r[1]), [])) for r in rows]

        result: list[VersionInfo] | None = self._read(read)
        return result

    def artifact_version(self, project: str, name: str, ref: str) -> VersionInfo | None:
        """The version ``ref`` names, with its manifest and ``used_by``; None if none."""

        def read(tx: Tx) -> VersionInfo | None:
            number = resolve(tx, project, name, ref)
            return None if number is None else load(tx, project, name, number, manifest=True)

        result: VersionInfo | None = self._read(read)
        return result

    def artifact_entry(self, project: str, name: str, ref: str, path: str) -> Entry | None:
        """The manifest entry at ``path`` of the version ``ref`` names; None if none."""

        def read(tx: Tx) -> Entry | None:
            number = resolve(tx, project, name, ref)
            if number is None:
                return None
            row = tx.one(
                "SELECT id FROM artifact_versions WHERE project = ? AND name = ? AND version = ?",
                (project, name, number),
            )
            if row is None:
                return None
            found = entries(tx, int(row[0]), path)
            return found[0] if found else None

        result: Entry | None = self._read(read)
        return result

    def run_artifacts(self, project: str, run_id: str) -> RunArtifacts:
        """The versions a run logged (oldest first) and used (in order of first use)."""

        def read(tx: Tx) -> RunArtifacts:
            logged = []
            alias_cache: dict[str, dict[int, list[str]]] = {}

            def aliases(name: str, number: int) -> list[str]:
                if name not in alias_cache:
                    alias_cache[name] = aliases_of(tx, project, name)
                return alias_cache[name].get(number, [])

            for row in tx.all(
                f"SELECT name, {VERSION_COLUMNS} FROM artifact_versions "
                "WHERE project = ? AND run_id = ? ORDER BY created_at, id",
                (project, run_id),
            ):
                logged.append(info_of(project, row[0], row[1:], aliases(row[0], int(row[2]))))
            used = []
            seen: set[tuple[str, int]] = set()
            for name, number in tx.all(
                "SELECT name, version FROM artifact_uses WHERE project = ? AND run_id = ? "
                "ORDER BY time, name, version",
                (project, run_id),
            ):
                if (name, number) in seen:
                    continue  # used by several labels (ranks) of the run: listed once
                seen.add((name, number))
                info = load(tx, project, name, int(number))
                if info is not None:
                    used.append(info)
            return RunArtifacts(logged=logged, used=used)

        result: RunArtifacts = self._read(read)
        return result
