"""Artifacts in the store: versions, their files, aliases, lineage (migration 8 holds them).

A commit is one write transaction (``commit``):

1. the name's ``artifact_names`` row is created if missing, then locked
   (``SELECT ... FOR UPDATE`` on PostgreSQL; SQLite has one writer anyway), so commits
   of one name from any number of ranks, processes and server hosts run one after the
   other and each sees the versions the previous ones made;
2. a ``client_id`` already committed answers the version that commit made or matched
   (a retried request creates nothing);
3. content equal to the latest version's (same manifest digest) creates no version: the
   aliases given move onto the latest;
4. otherwise the version is ``latest + 1`` (or the number a ``rankwise sync`` of a
   local-mode version asks for, when free), inserted with its files; the version row's
   ``UNIQUE (project, name, version)`` is a second guard;
5. aliases move (upsert on ``(project, name, alias)``), the name's ``latest`` and
   ``updated_at`` follow, and the ``client_id`` is recorded, all in the same transaction.

``latest`` is never an alias row: it is ``artifact_names.latest``, always the highest
version. Reads (``ArtifactReads``) run in one snapshot each.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import msgspec

from ..artifacts.manifest import (
    Chunk,
    Entry,
    Manifest,
    check_alias,
    check_name,
    is_version,
    manifest_digest,
    validate_manifest,
)
from ..artifacts.model import ArtifactSummary, CommitRequest, RunArtifacts, Use, VersionInfo
from ..errors import UsageError
from ..names import check_id
from .tx import Tx

LATEST = "latest"
MAX_ALIASES = 64
MAX_FILES = 100_000

_json = msgspec.json.Encoder()
_meta = msgspec.json.Decoder(dict[str, Any])
_chunks = msgspec.json.Decoder(list[Chunk])

_VERSION_COLUMNS = (
    "id, version, type, digest, size, file_count, description, metadata, created_at, run_id, label"
)


class ArtifactConflict(ValueError):
    """A commit the store refuses given what it holds (another type for the name, a
    ``client_id`` used for another name)."""


def check_commit(name: str, req: CommitRequest) -> str:
    """Refuse a commit before anything is stored (``UsageError`` naming the bad field or
    file); returns the manifest digest."""
    check_name(name, "artifact name")
    check_name(req.type, "artifact type")
    if not req.client_id or len(req.client_id) > 64 or not req.client_id.isalnum():
        raise UsageError("client_id must be 1-64 letters or digits (a uuid4 hex)")
    if len(req.aliases) > MAX_ALIASES:
        raise UsageError(f"at most {MAX_ALIASES} aliases per version")
    for alias in req.aliases:
        if alias != LATEST:
            check_alias(alias)
    if req.run_id is not None:
        check_id(req.run_id, "run id")
    if req.label is not None:
        check_id(req.label, "stream label")
    if req.version is not None and not is_version(req.version):
        raise UsageError(f"version {req.version!r} is not of the form v<N>")
    if len(req.manifest.entries) > MAX_FILES:
        raise UsageError(f"an artifact version holds at most {MAX_FILES} files")
    validate_manifest(req.manifest)
    return manifest_digest(req.manifest)


def version_name(number: int) -> str:
    return f"v{number}"


def _label(value: str) -> str | None:
    return value or None


def _aliases(tx: Tx, project: str, name: str) -> dict[int, list[str]]:
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


def _info(project: str, name: str, row: tuple[Any, ...], aliases: list[str]) -> VersionInfo:
    _, number, kind, digest, size, count, desc, meta, created, run_id, label = row
    return VersionInfo(
        project=project,
        name=name,
        version=version_name(int(number)),
        type=kind,
        digest=digest,
        size=int(size),
        file_count=int(count),
        aliases=aliases,
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
        f"SELECT {_VERSION_COLUMNS} FROM artifact_versions "
        "WHERE project = ? AND name = ? AND version = ?",
        (project, name, number),
    )
    if row is None:
        return None
    info = _info(project, name, row, _aliases(tx, project, name).get(number, []))
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


def commit(
    tx: Tx, project: str, name: str, req: CommitRequest, digest: str, now: float
) -> tuple[VersionInfo, bool]:
    """Store ``req`` as a version of ``name`` (see the module docstring); returns the
    version and whether it was created."""
    tx.run(
        "INSERT INTO artifact_names (project, name, type, latest, updated_at) "
        "VALUES (?, ?, ?, -1, ?) ON CONFLICT DO NOTHING",
        (project, name, req.type, now),
    )
    row = tx.one(
        "SELECT type, latest FROM artifact_names WHERE project = ? AND name = ?" + tx.for_update,
        (project, name),
    )
    assert row is not None
    kind, latest = str(row[0]), int(row[1])
    done = tx.one(
        "SELECT name, version FROM artifact_commits WHERE project = ? AND client_id = ?",
        (project, req.client_id),
    )
    if done is not None:
        if done[0] != name:
            raise ArtifactConflict(
                f"client_id {req.client_id!r} already committed artifact {done[0]!r}: "
                "choose a new client_id for each logged artifact"
            )
        found = load(tx, project, name, int(done[1]), manifest=True)
        assert found is not None
        return found, False
    if kind != req.type:
        raise ArtifactConflict(
            f"artifact {name!r} is of type {kind!r}, not {req.type!r}: log it with type "
            f"{kind!r} or choose another name"
        )
    number = -1
    if latest >= 0:
        cur = tx.one(
            "SELECT digest FROM artifact_versions WHERE project = ? AND name = ? AND version = ?",
            (project, name, latest),
        )
        if cur is not None and cur[0] == digest:
            number = latest  # same content as the latest: no new version
    created = number < 0
    if created:
        number = latest + 1
        if req.version is not None:
            wanted = int(req.version[1:])
            if resolve(tx, project, name, req.version) is None:
                number = wanted
        _insert(tx, project, name, number, req, digest, now)
        tx.run(
            "UPDATE artifact_names SET latest = ?, updated_at = ? WHERE project = ? AND name = ?",
            (max(latest, number), now, project, name),
        )
    else:
        tx.run(
            "UPDATE artifact_names SET updated_at = ? WHERE project = ? AND name = ?",
            (now, project, name),
        )
    for alias in dict.fromkeys(req.aliases):
        if alias == LATEST:
            continue  # always on the newest version, never stored
        tx.run(
            "INSERT INTO artifact_aliases (project, name, alias, version) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (project, name, alias) DO UPDATE SET version = excluded.version",
            (project, name, alias, number),
        )
    tx.run(
        "INSERT INTO artifact_commits (project, client_id, name, version) VALUES (?, ?, ?, ?)",
        (project, req.client_id, name, number),
    )
    found = load(tx, project, name, number, manifest=True)
    assert found is not None
    return found, created


def _insert(
    tx: Tx, project: str, name: str, number: int, req: CommitRequest, digest: str, now: float
) -> None:
    m = req.manifest
    row = tx.one(
        "INSERT INTO artifact_versions (project, name, version, type, digest, size, "
        "file_count, description, metadata, created_at, run_id, label, client_id) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
        (
            project,
            name,
            number,
            req.type,
            digest,
            m.size,
            len(m.entries),
            req.description,
            _json.encode(req.metadata).decode(),
            req.created_at if req.created_at is not None else now,
            req.run_id,
            req.label,
            req.client_id,
        ),
    )
    assert row is not None
    vid = int(row[0])
    tx.many(
        "INSERT INTO artifact_files (version_id, path, digest, size, chunks, ref) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        [
            (
                vid,
                e.path,
                e.digest,
                e.size,
                None if e.ref is not None else _json.encode(e.chunks).decode(),
                e.ref,
            )
            for e in sorted(m.entries, key=lambda e: e.path)
        ],
    )


class ArtifactStore:
    """Store methods for artifacts (mixed into ``SQLStore``)."""

    _read: Callable[..., Any]
    _write: Callable[..., Any]

    def commit_artifact(
        self, project: str, name: str, req: CommitRequest, now: float | None = None
    ) -> tuple[VersionInfo, bool]:
        """Store a version (see the module docstring): the version and whether it is new.
        Raises ``UsageError`` for a bad request, ``ArtifactConflict`` for a clash."""
        check_id(project, "project")
        digest = check_commit(name, req)
        at = time.time() if now is None else now
        result: tuple[VersionInfo, bool] = self._write(
            lambda tx: commit(tx, project, name, req, digest, at)
        )
        return result

    def use_artifact(
        self,
        project: str,
        name: str,
        ref: str,
        run_id: str,
        label: str | None = None,
        now: float | None = None,
    ) -> VersionInfo | None:
        """Record that ``run_id`` used the version ``ref`` names; the version with its
        manifest, None when there is none."""
        at = time.time() if now is None else now

        def use(tx: Tx) -> VersionInfo | None:
            number = resolve(tx, project, name, ref)
            if number is None:
                return None
            tx.run(
                "INSERT INTO artifact_uses (project, name, version, run_id, label, time) "
                "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (project, name, number, run_id, label or "", at),
            )
            return load(tx, project, name, number, manifest=True)

        result: VersionInfo | None = self._write(use)
        return result

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
                f"SELECT {_VERSION_COLUMNS} FROM artifact_versions "
                "WHERE project = ? AND name = ? ORDER BY version DESC",
                (project, name),
            )
            if not rows:
                return None
            aliases = _aliases(tx, project, name)
            return [_info(project, name, r, aliases.get(int(r[1]), [])) for r in rows]

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
                    alias_cache[name] = _aliases(tx, project, name)
                return alias_cache[name].get(number, [])

            for row in tx.all(
                f"SELECT name, {_VERSION_COLUMNS} FROM artifact_versions "
                "WHERE project = ? AND run_id = ? ORDER BY created_at, id",
                (project, run_id),
            ):
                logged.append(_info(project, row[0], row[1:], aliases(row[0], int(row[2]))))
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
