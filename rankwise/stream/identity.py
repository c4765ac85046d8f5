"""Which stream: ``StreamId``, the one name of a stream everywhere.

A stream is one process's incarnation of one label of one run; its file is
``<dir>/<project>/<run id>/streams/<label>.<incarnation>.rwlog``
(``rankwise.stream.files``). The uploader names the stream it posts with one, the
server's ingest keys its batches and the store its high-water marks by one, and a
stream file found on disk carries one beside its path (``StreamFile``).

A ``NamedTuple``: hashable, ordered (project, run, label, incarnation) and cheap to
build per batch.
"""

from __future__ import annotations

from typing import NamedTuple


class StreamId(NamedTuple):
    """One process's incarnation of one label of one run."""

    project: str
    run_id: str
    label: str
    incarnation: int

    def params(self) -> dict[str, str]:
        """The stream as the ingest and ack endpoints take it, in the query string."""
        return {
            "project": self.project,
            "run": self.run_id,
            "label": self.label,
            "incarnation": str(self.incarnation),
        }

    def __str__(self) -> str:
        return (
            f"stream {self.label!r} (incarnation {self.incarnation}) of run "
            f"{self.project}/{self.run_id}"
        )
