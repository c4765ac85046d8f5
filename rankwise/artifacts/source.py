"""Where a version's bytes are read back from: the local artifact store
(``rankwise.artifacts.local``) or a server (``rankwise.artifacts.remote.ServerSource``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from ..wire.artifacts import VersionInfo
from .manifest import Entry


class Source(Protocol):
    """Where the bytes of a version read back come from (the local store, a server)."""

    def read_chunks(self, info: VersionInfo, entry: Entry) -> Iterator[bytes]:
        """The bytes of ``entry`` (a stored file of ``info``), a piece at a time; the
        caller checks them against the entry's digest (``fsutil.write_verified``)."""
        ...
