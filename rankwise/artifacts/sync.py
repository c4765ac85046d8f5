"""``rankwise sync`` for artifacts: what the server does not hold yet goes there.

For one project of a data directory, in this order:

1. the outbox: commits a run could not finish (remote mode: the server was unreachable;
   either mode: the run ended before its files were hashed). A file not hashed yet is
   staged first (hashed, copied into ``files/``). A local-mode entry becomes a version of
   the local store, synced in step 2; a remote-mode one is published.
2. local-mode versions not marked synced: published with ``version="v<N>"`` (the server
   keeps that number when it is free), their aliases, run and label, in version order so
   ``latest`` ends where it is locally. Their ``client_id`` is derived from the version,
   so a sync cut short and run again commits nothing twice.
3. lineage: each recorded use not marked synced.

The publisher uploads only the chunks the server lacks (``POST /blobs/.../missing``), so a
repeated or resumed sync sends each byte at most once more.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from ..wire.artifacts import CommitRequest, VersionInfo
from .local import LocalArtifacts, OutboxEntry, projects_with_artifacts
from .worker import commit_local, stage


class SyncPublisher(Protocol):
    """``RemoteArtifacts`` as sync uses it."""

    def publish(self, name: str, request: CommitRequest, files_root: Path) -> VersionInfo: ...

    def use(self, name: str, ref: str, run_id: str, label: str | None) -> VersionInfo: ...


@dataclass
class ArtifactSyncReport:
    published: list[str] = field(default_factory=list)  # "name:vN" as the server numbered
    uses: int = 0
    failed: dict[str, str] = field(default_factory=dict)  # what -> why


def client_id_of(project: str, name: str, info: VersionInfo) -> str:
    """The commit id of a local version: the same on every sync of it."""
    text = f"rankwise-local-version\n{project}\n{name}\n{info.version}\n{info.digest}"
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def version_request(store: LocalArtifacts, name: str, info: VersionInfo) -> CommitRequest:
    """The commit that copies local version ``info`` elsewhere with its number, aliases,
    run and label (``client_id_of``: the same request on every copy)."""
    return CommitRequest(
        type=info.type,
        manifest=store.manifest(info.digest),
        client_id=client_id_of(store.project, name, info),
        description=info.description,
        metadata=info.metadata,
        aliases=[a for a in info.aliases if a != "latest"],
        tags=info.tags,
        run_id=info.run_id,
        label=info.label,
        version=info.version,
        created_at=info.created_at,
    )


def _outbox(store: LocalArtifacts, pub: SyncPublisher, report: ArtifactSyncReport) -> None:
    for entry in store.outbox():
        what = f"{store.project}/{entry.name} (outbox {entry.request.client_id})"
        try:
            request = entry.request
            if not entry.staged:
                request.manifest, _ = stage(entry.files, store)
                if not entry.local:  # keep the staged form: a later sync needs no sources
                    store.outbox_put(OutboxEntry(name=entry.name, request=request))
            if entry.local:
                commit_local(store, entry.name, request, entry.files)
            else:
                info = pub.publish(entry.name, request, store.files_root)
                report.published.append(f"{entry.name}:{info.version}")
            store.outbox_done(request.client_id)
        except Exception as exc:
            report.failed[what] = str(exc)


def _versions(store: LocalArtifacts, pub: SyncPublisher, report: ArtifactSyncReport) -> None:
    for name in store.names():
        for n in store.version_numbers(name):
            try:
                info = store.version(name, n)
                if store.is_synced(name, info.version):
                    continue
                got = pub.publish(name, version_request(store, name, info), store.files_root)
                store.mark_synced(name, info.version)
                report.published.append(f"{name}:{got.version}")
            except Exception as exc:
                report.failed[f"{store.project}/{name}:v{n}"] = str(exc)
                break  # later versions wait, so the numbers stay in order


def _uses(store: LocalArtifacts, pub: SyncPublisher, report: ArtifactSyncReport) -> None:
    for name in store.names():
        for version, use in store.all_uses(name):
            key = f"used.{use.run_id}.{use.label or '_'}.{version}"
            if store.is_synced(name, key):
                continue
            try:
                pub.use(name, version, use.run_id, use.label)
                store.mark_synced(name, key)
                report.uses += 1
            except Exception as exc:
                report.failed[f"{store.project}/{name}:{version} used by {use.run_id}"] = str(exc)


def sync_artifacts(root: str | Path, project: str, publisher: SyncPublisher) -> ArtifactSyncReport:
    """Sync one project's artifacts under data directory ``root`` (module docstring)."""
    store = LocalArtifacts(root, project)
    report = ArtifactSyncReport()
    _outbox(store, publisher, report)
    _versions(store, publisher, report)
    _uses(store, publisher, report)
    return report


def artifact_projects(path: Path) -> tuple[Path, list[str]]:
    """(data directory, projects with artifacts) for ``rankwise sync PATH``: a data
    directory (all its projects) or a project directory."""
    path = Path(path)
    if (path / "artifacts" / "names").is_dir() or (path / "artifacts" / "outbox").is_dir():
        return path.parent, [path.name]
    projects = set(projects_with_artifacts(path))
    for p in path.iterdir() if path.is_dir() else []:
        if (p / "artifacts" / "outbox").is_dir():
            projects.add(p.name)
    return path, sorted(projects)
