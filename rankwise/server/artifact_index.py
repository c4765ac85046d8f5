"""``rankwise ui``: the artifacts of a data directory's local stores, in the UI's index.

Runs in local mode keep artifacts in ``<dir>/<project>/artifacts/`` (``rankwise.artifacts
.local``). Each pass of the directory tailer copies what is new there into the index the
routes read: each version with its number, type, metadata, run and aliases (the number is
kept: the index holds nothing else), alias moves (an alias logged onto the latest version
again), and lineage. Files are not copied: ``RunDirBlobStore`` serves them from the local
store's ``files/`` (whole files, by their digest; the download route streams a file
whole when its chunks are not held separately). Nothing in the data directory is written.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from ..artifacts.local import LocalArtifacts, projects_with_artifacts
from ..artifacts.sync import client_id_of, version_request

log = logging.getLogger("rankwise.ui")


class LocalArtifactIndex:
    """Copies the local artifact stores under ``root`` into ``store`` (one pass: ``poll``)."""

    def __init__(self, root: Path, store: Any) -> None:
        self.root = Path(root)
        self.store = store
        self._versions: set[tuple[str, str, int]] = set()
        self._aliases: dict[tuple[str, str], dict[str, str]] = {}
        self._tags: dict[tuple[str, str], list[str]] = {}  # the latest version's, indexed
        self._uses: set[tuple[str, str, str, str, str]] = set()
        self._warned: set[str] = set()

    def poll(self) -> int:
        """Index what is new; returns how many versions and uses were added."""
        added = 0
        for project in projects_with_artifacts(self.root):
            local = LocalArtifacts(self.root, project)
            for name in local.names():
                try:
                    added += self._name(local, project, name)
                except Exception as exc:  # one damaged name must not stop the others
                    self._warn(f"{project}/{name}", repr(exc))
        return added

    def _name(self, local: LocalArtifacts, project: str, name: str) -> int:
        added = 0
        for n in local.version_numbers(name):
            if (project, name, n) in self._versions:
                continue
            info = local.version(name, n)
            self.store.commit_artifact(project, name, version_request(local, name, info))
            self._versions.add((project, name, n))
            added += 1
        aliases = local.aliases(name)
        if aliases != self._aliases.get((project, name)):
            self._move_aliases(local, project, name, aliases)
            self._aliases[(project, name)] = aliases
        self._add_tags(local, project, name, aliases.get("latest"))
        for version, use in local.all_uses(name):
            key = (project, name, version, use.run_id, use.label or "")
            if key not in self._uses:
                self.store.use_artifact(project, name, version, use.run_id, use.label, use.time)
                self._uses.add(key)
                added += 1
        return added

    def _move_aliases(
        self, local: LocalArtifacts, project: str, name: str, aliases: dict[str, str]
    ) -> None:
        """An alias the local store moved onto its latest version (logging identical
        content with that alias): committing the latest again moves it here too."""
        latest = aliases.get("latest")
        moved = [
            a
            for a, v in aliases.items()
            if a != "latest" and v == latest and self._aliases.get((project, name), {}).get(a) != v
        ]
        if not moved or latest is None:
            return
        info = local.version(name, int(latest[1:]))
        request = version_request(local, name, info)
        request.client_id = client_id_of(project, name + "\nmoved\n" + ",".join(moved), info)
        request.aliases = moved
        request.version = None
        self.store.commit_artifact(project, name, request)

    def _add_tags(self, local: LocalArtifacts, project: str, name: str, latest: str | None) -> None:
        """Tags the local store added to its latest version (identical content logged
        again with new tags): committing the latest again adds them here too."""
        if latest is None:
            return
        info = local.version(name, int(latest[1:]))
        known = self._tags.setdefault((project, name), info.tags)  # first seen: committed
        if info.tags == known:
            return
        request = version_request(local, name, info)
        request.client_id = client_id_of(project, name + "\ntags\n" + ",".join(info.tags), info)
        request.aliases = []
        request.version = None
        self.store.commit_artifact(project, name, request)
        self._tags[(project, name)] = info.tags

    def _warn(self, what: str, why: str) -> None:
        if what not in self._warned:
            self._warned.add(what)
            log.warning("rankwise ui: cannot index the artifact %s: %s", what, why)
