"""Blobs before records: the uploader's half of exactly-once for images, tables, audio ...

A rich record (``Media``, ``TableRec``) names blob files by sha256 (``blob_digests()``);
the files are in the run's folder (``rankwise.stream.blobs.blob_path``), written before
the record was. Before a batch of frames is posted, ``BlobSender.send_for(records)``:

1. collects the digests the batch's records name (each digest asked about once per
   uploader: one the server confirmed is not asked about again);
2. asks the server which it lacks (``POST /api/v1/blobs/{project}/missing``);
3. PUTs those, streamed from the file with its ``Content-Length`` (never read whole);
   the server verifies the digest and stores atomically, so a retry, a restart of either
   side or a second uploader of the same run (two ranks share the folder) stores each
   blob once and loses none;
4. declares lost (``POST .../lost``) those whose file is gone (the user deleted the run's
   ``blobs/`` folder), whose bytes no longer hash to their name (a damaged disk), or that
   are over the server's ``--max-blob-mb``: warned about once, and the records naming
   them are then uploaded without them (the dashboard shows the item as missing), so one
   missing file never wedges the rest of the stream.

The server checks again at ingest: a record whose blob it lacks is refused with 409
``missing_blobs`` (its blob store was replaced, say), and the uploader sends them and
resends (``send_missing``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import _log
from ..stream import records as R
from ..stream.blobs import blob_path
from .retry import GiveUp, Refused, refusal, transient, unreachable

if TYPE_CHECKING:
    import httpx

BLOBS = "/api/v1/blobs"
ASK_AT_ONCE = 1000  # digests per missing/lost request (the server takes up to 10,000)
CHUNK = 1024 * 1024


class BlobSender:
    """Uploads the blobs of one run's records to one server (see the module docstring)."""

    def __init__(self, client: httpx.Client, project: str, run_dir: Path) -> None:
        self.client = client
        self.project = project
        self.run_dir = run_dir
        self.sent_bytes = 0  # blob bytes PUT (a blob the server held already costs none)
        self.sent = 0  # blobs PUT
        self.lost: set[str] = set()
        self._known: set[str] = set()  # the server holds these (or they were declared lost)
        self._warned = False
        self.max_bytes: int | None = None  # the server's --max-blob-mb, from `missing`

    def send_for(self, records: Iterable[R.AnyRecord]) -> None:
        """Make sure the server holds every blob ``records`` name."""
        wanted = [d for d in digests_of(records) if d not in self._known]
        if not wanted:
            return
        missing: list[str] = []
        for part in _chunks(wanted, ASK_AT_ONCE):
            reply = self._call("POST", "missing", json={"digests": part})
            missing += [str(d) for d in reply["missing"]]
            self.max_bytes = int(reply.get("max_blob_bytes") or 0) or None
        self.send_missing(missing)
        self._known.update(wanted)

    def send_missing(self, digests: Iterable[str]) -> None:
        """PUT ``digests`` from the run's folder; declare lost those that cannot be sent."""
        lost: list[str] = []
        for digest in digests:
            if not self._put(digest):
                lost.append(digest)
        if lost:
            self._declare_lost(lost)

    def _put(self, digest: str) -> bool:
        path = blob_path(self.run_dir, digest)
        try:
            fileobj = open(path, "rb")  # noqa: SIM115 - closed by _stream
        except OSError:
            return False
        size = os.fstat(fileobj.fileno()).st_size
        if self.max_bytes is not None and size > self.max_bytes:
            fileobj.close()
            return False
        status = self._call(
            "PUT",
            digest,
            content=_stream(fileobj),
            headers={"Content-Type": "application/octet-stream", "Content-Length": str(size)},
            lost_on=(400, 413),
        )
        if status in (400, 413):
            return False
        self.sent += 1
        if status == 201:
            self.sent_bytes += size
        return True

    def _declare_lost(self, digests: list[str]) -> None:
        fresh = [d for d in digests if d not in self.lost]
        if fresh and not self._warned:
            self._warned = True
            _log.warn(
                f"{len(fresh)} blob file(s) named by the records of run {self.run_dir.name} "
                f"cannot be uploaded: missing from {self.run_dir / 'blobs'} (deleted?), "
                "damaged, or over the server's --max-blob-mb. The records are uploaded "
                "without them (the dashboard shows those items as missing); nothing else "
                "is affected"
            )
        for part in _chunks(digests, ASK_AT_ONCE):
            self._call("POST", "lost", json={"digests": part})
        self.lost.update(digests)
        self._known.update(digests)

    def _call(
        self,
        method: str,
        tail: str,
        *,
        json: Any = None,
        content: Any = None,
        headers: dict[str, str] | None = None,
        lost_on: tuple[int, ...] = (),
    ) -> Any:
        """One request; the JSON reply (an int status for PUT). Failures map to the
        ``rankwise.sdk.retry`` vocabulary (``Retry`` / ``Refused`` / ``GiveUp``) like an
        ingest request's."""
        import httpx

        from .. import _http

        url = f"{BLOBS}/{self.project}/{tail}"
        try:
            response = self.client.request(method, url, json=json, content=content, headers=headers)
        except httpx.TransportError as exc:
            raise unreachable(exc) from exc
        status = response.status_code
        if status in (200, 201):
            return status if method == "PUT" else _http.decode(response)
        message = _http.error_message(response)
        if status in lost_on:
            return status
        transient(response, message)
        if status in (401, 403):
            raise Refused(refusal(str(self.client.base_url), self.project, status, message))
        hint = " (a server older than this SDK keeps no blobs: upgrade it)" if status == 404 else ""
        raise GiveUp(
            f"server at {self.client.base_url} answered {status} to a blob{hint}: {message}"
        )


def digests_of(records: Iterable[R.AnyRecord]) -> list[str]:
    """The blobs ``records`` name, in order, without repeats."""
    out: dict[str, None] = {}
    for rec in records:
        out.update(dict.fromkeys(rec.blob_digests()))
    return list(out)


def _chunks(items: list[str], n: int) -> Iterator[list[str]]:
    for i in range(0, len(items), n):
        yield items[i : i + n]


def _stream(fileobj: Any) -> Iterator[bytes]:
    with fileobj:
        while chunk := fileobj.read(CHUNK):
            yield chunk
