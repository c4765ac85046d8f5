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
version. Reads (``rankwise.store.artifact_reads``) run in one snapshot each.
"""

from __future__ import annotations

import time

import msgspec

from ..artifacts.manifest import (
    check_alias,
    check_name,
    check_tags,
    is_version,
    manifest_digest,
    merge_tags,
    validate_manifest,
)
from ..budget import check_json_value
from ..errors import UsageError
from ..names import check_id
from ..wire.artifacts import CommitRequest, VersionInfo
from .artifact_reads import LATEST, ArtifactReads, load, resolve
from .tx import Tx

MAX_ALIASES = 64
MAX_FILES = 100_000

_json = msgspec.json.Encoder()
_tag_list = msgspec.json.Decoder(list[str])


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
    req.tags = check_tags(req.tags)
    if req.run_id is not None:
        check_id(req.run_id, "run id")
    if req.label is not None:
        check_id(req.label, "stream label")
    if req.version is not None and not is_version(req.version):
        raise UsageError(f"version {req.version!r} is not of the form v<N>")
    if len(req.manifest.entries) > MAX_FILES:
        raise UsageError(f"an artifact version holds at most {MAX_FILES} files")
    # Stored and served with every listing of the version: the same element budget as
    # a run's config (a ``BudgetError``, 413 at the HTTP layer).
    check_json_value(req.metadata, "the artifact's metadata")
    validate_manifest(req.manifest)
    return manifest_digest(req.manifest)


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
            _add_tags(tx, project, name, number, req.tags)
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


def _add_tags(tx: Tx, project: str, name: str, number: int, tags: list[str]) -> None:
    """A version logged again with the same content gains the tags it lacks."""
    if not tags:
        return
    row = tx.one(
        "SELECT tags FROM artifact_versions WHERE project = ? AND name = ? AND version = ?",
        (project, name, number),
    )
    old = _tag_list.decode(row[0]) if row is not None else []
    merged = merge_tags(old, tags)
    if merged != old:
        tx.run(
            "UPDATE artifact_versions SET tags = ? WHERE project = ? AND name = ? AND version = ?",
            (_json.encode(merged).decode(), project, name, number),
        )


def _insert(
    tx: Tx, project: str, name: str, number: int, req: CommitRequest, digest: str, now: float
) -> None:
    m = req.manifest
    row = tx.one(
        "INSERT INTO artifact_versions (project, name, version, type, digest, size, "
        "file_count, description, metadata, created_at, run_id, label, client_id, tags) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
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
            _json.encode(req.tags).decode(),
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


class ArtifactWrites(ArtifactReads):
    """Store methods for artifacts (mixed into ``SQLStore``): commit and use here, the
    reads in ``ArtifactReads``."""

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
