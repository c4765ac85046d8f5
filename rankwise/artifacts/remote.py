"""``RemoteArtifacts``: THE client of a rankwise server's artifact routes (publish and read).

Everything that talks to a server about artifacts goes through it: the run's artifact
worker and ``rankwise sync`` publish with it, ``run.use_artifact`` records lineage with
it, ``Api(server=).artifact()``/``artifacts()`` and a run's ``logged_artifacts()`` read
with it, and ``Artifact.download()`` streams files through it (``ServerSource``).

Publishing a version (``publish``) is resumable by construction: files are kept in the
blob store as *chunks* named by their sha256, so

1. the client asks which chunks the server lacks (``POST /blobs/{project}/missing``);
2. it PUTs only those, each read as a byte range of the staged whole file
   (``files_root/<sha[:2]>/<sha>``) in ``PIECE`` pieces, so memory stays bounded
   whatever the file size; a few chunks travel at once (``parallel``);
3. it commits the manifest (``POST /artifacts/{project}/{name}/versions``); a 409 that
   still lists missing chunks (the blob store lost some meanwhile) sends them and commits
   again.

A crash anywhere costs at most the chunks in flight: publishing again re-asks what is
missing. Failures are classified as the stream uploader's are (``rankwise.sdk.retry``):
connection errors, 408/425, 429 and 5xx are retried with capped exponential backoff and
jitter, and a server's ``Retry-After`` is the floor of the wait; a reply carrying the
pacing header (``X-Rankwise-Upload-Interval``, ``rankwise.server.pacing``) spaces the
client's next requests by that interval. The commit is idempotent on ``client_id``, so a
commit retried after a lost reply returns the version the first attempt made.

This module imports httpx (through ``rankwise._http``): import it lazily.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
import msgspec

from .._http import (
    MAX_ADVISED_INTERVAL,
    MSGPACK,
    UPLOAD_INTERVAL_HEADER,
    advised_interval,
    error_body,
    error_message,
    make_client,
    normalize_url,
)
from ..errors import ArtifactNotFoundError, ServerError, UsageError
from ..names import check_file_name, check_id
from ..sdk.retry import Retry, backoff_delay, transient, unreachable
from ..wire.artifacts import ArtifactSummary, CommitRequest, RunArtifacts, UseRequest, VersionInfo
from .fsutil import write_verified
from .manifest import Entry, check_name

API = "/api/v1"
PIECE = 1024 * 1024  # bytes read and sent at a time
ASK_AT_ONCE = 1000  # digests per missing request (the server takes up to 10,000)
RETRIES = 8
BACKOFF_CAP = 10.0  # seconds between two tries at most (unless the server advised more)
COMMIT_ROUNDS = 3  # a commit answered 409 missing: upload those and commit again

_json = msgspec.json.Encoder()
T = TypeVar("T")
# Replies that carry versions are asked for as MessagePack: metadata values such as NaN
# and ±Inf come back exact, as the local store returns them.
_READ = {"Accept": MSGPACK}


def _decoded(response: httpx.Response, type: type[T]) -> T:
    """The reply's body as ``type`` (MessagePack or JSON, as the server answered)."""
    if response.headers.get("content-type", "").startswith(MSGPACK):
        return msgspec.msgpack.decode(response.content, type=type)
    return msgspec.json.decode(response.content, type=type)


class _Versions(msgspec.Struct):
    versions: list[VersionInfo]


class _Names(msgspec.Struct):
    artifacts: list[ArtifactSummary]


class _Cut(Exception):
    """A download broke off mid-file (a transport error after the reply began)."""


class RemoteArtifacts:
    """The artifacts of ``project`` on the server at ``server`` (see the module docstring).

    ``token`` (else ``RANKWISE_TOKEN``): an ingest token publishes, uses and downloads; a
    read token lists, gets and downloads. ``parallel``: chunks uploaded at once.
    ``sent_bytes``/``sent_chunks`` count what this client PUT.
    """

    def __init__(
        self,
        server: str,
        project: str,
        token: str | None = None,
        timeout: float = 30.0,
        *,
        parallel: int = 8,
        retries: int = RETRIES,
        backoff: float = 0.5,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.project = check_id(project, "project")
        self.server = normalize_url(server)
        self.client = make_client(server, token=token, timeout=timeout, transport=transport)
        self.parallel = max(1, parallel)
        self.retries = max(1, retries)
        self.backoff = backoff
        self.sent_bytes = 0
        self.sent_chunks = 0
        self.max_blob_bytes: int | None = None
        self._lock = threading.Lock()
        self._paced_until = 0.0  # monotonic: no request before (the server's pacing)

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> RemoteArtifacts:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"RemoteArtifacts({str(self.client.base_url)!r}, {self.project!r})"

    # -- HTTP with retries ------------------------------------------------------------

    def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """One request, retried while the failure is transient (``rankwise.sdk.retry``);
        ``kwargs`` may hold ``body``: a callable making a fresh request body per try."""
        make_body: Callable[[], Any] | None = kwargs.pop("body", None)

        def attempt() -> httpx.Response:
            if make_body is not None:
                kwargs["content"] = make_body()
            try:
                response = self.client.request(method, API + path, **kwargs)
            except httpx.TransportError as exc:
                raise unreachable(exc) from exc
            self._heed(response)
            transient(response, error_message(response))
            return response

        return self._retrying(attempt, f"{method} {path}")

    def _retrying(self, attempt: Callable[[], T], what: str) -> T:
        """``attempt()`` until it does not raise ``Retry``, at most ``retries`` times,
        waiting ``backoff_delay`` (the server's ``Retry-After`` its floor) in between."""
        last: Retry | None = None
        for failures in range(self.retries):
            if last is not None:
                cap = BACKOFF_CAP if last.after is None else MAX_ADVISED_INTERVAL
                time.sleep(backoff_delay(failures, cap, base=self.backoff, advised=last.after))
            self._pace()
            try:
                return attempt()
            except Retry as exc:
                last = exc
        raise ServerError(
            f"the rankwise server at {self.server} did not take {what} "
            f"after {self.retries} attempts: {last}"
        )

    def _heed(self, response: httpx.Response) -> None:
        """Keep the pacing a reply asked for: no request before its interval has passed."""
        interval = advised_interval(response.headers.get(UPLOAD_INTERVAL_HEADER))
        if interval > 0:
            with self._lock:
                self._paced_until = max(self._paced_until, time.monotonic() + interval)

    def _pace(self) -> None:
        wait = self._paced_until - time.monotonic()
        if wait > 0:
            time.sleep(wait)

    def _check(self, response: httpx.Response, what: str) -> httpx.Response:
        status = response.status_code
        if status < 400:
            return response
        message = error_message(response)
        if status in (401, 403):
            raise ServerError(
                f"the rankwise server refused {what} ({status}: {message}): pass a token "
                "(an ingest token to publish, a read token to list) or set RANKWISE_TOKEN"
            )
        if status == 404:
            raise ArtifactNotFoundError(message)
        if status in (400, 422):
            raise UsageError(message)
        raise ServerError(f"the rankwise server answered {status} to {what}: {message}")

    def _path(self, name: str, *rest: str) -> str:
        check_name(name, "artifact name")
        return "/".join([f"/artifacts/{self.project}/{name}", *rest])

    # -- publishing -----------------------------------------------------------------------

    def missing(self, digests: list[str]) -> list[str]:
        """Those of ``digests`` the server's blob store lacks."""
        out: list[str] = []
        for i in range(0, len(digests), ASK_AT_ONCE):
            part = digests[i : i + ASK_AT_ONCE]
            r = self._send("POST", f"/blobs/{self.project}/missing", json={"digests": part})
            body = self._check(r, "a missing-chunks request").json()
            out += [str(d) for d in body["missing"]]
            self.max_blob_bytes = int(body.get("max_blob_bytes") or 0) or None
        return out

    def publish(
        self,
        name: str,
        request: CommitRequest,
        files_root: Path,
        progress: Callable[[int], None] | None = None,
    ) -> VersionInfo:
        """Upload the chunks the server lacks from ``files_root`` (the staged whole files,
        ``<sha[:2]>/<sha>``), then commit: the version made, or the existing one the
        content or ``client_id`` matched. ``progress(n)`` is called with bytes sent."""
        path = self._path(name, "versions")
        where = _chunk_sources(request.manifest.entries, Path(files_root))
        self._upload(self.missing(list(where)), where, progress)
        body = _json.encode(request)
        for _ in range(COMMIT_ROUNDS):
            r = self._send(
                "POST", path, content=body, headers={"Content-Type": "application/json", **_READ}
            )
            if r.status_code == 409:
                lacking = error_body(r).get("missing")
                if isinstance(lacking, list) and lacking:
                    self._upload([str(d) for d in lacking], where, progress)
                    continue
            self._check(r, f"the commit of artifact {name!r}")
            return _decoded(r, VersionInfo)
        raise ServerError(
            f"the server kept losing chunks of artifact {name!r} while it was committed: "
            "check its blob store, then publish again"
        )

    def _upload(
        self,
        digests: list[str],
        where: dict[str, tuple[Path, int, int]],
        progress: Callable[[int], None] | None,
    ) -> None:
        unknown = [d for d in digests if d not in where]
        if unknown:
            raise ServerError(f"the server asked for chunks this artifact lacks: {unknown[:3]}")
        limit = self.max_blob_bytes
        big = [d for d in digests if limit is not None and where[d][2] > limit]
        if big:
            raise UsageError(
                f"a chunk of {where[big[0]][2]} bytes is over this server's --max-blob-mb "
                f"({limit} bytes): start the server with --max-blob-mb 32 or more"
            )
        for d in digests:
            if not where[d][0].is_file():
                raise UsageError(
                    f"the staged file {where[d][0]} is missing: log the artifact again"
                )
        if len(digests) <= 1 or self.parallel == 1:
            for d in digests:
                self._put(d, *where[d], progress)
            return
        with ThreadPoolExecutor(self.parallel, thread_name_prefix="rankwise-artifact-put") as pool:
            for done in [pool.submit(self._put, d, *where[d], progress) for d in digests]:
                done.result()

    def _put(
        self,
        digest: str,
        path: Path,
        offset: int,
        size: int,
        progress: Callable[[int], None] | None,
    ) -> None:
        r = self._send(
            "PUT",
            f"/blobs/{self.project}/{digest}",
            body=lambda: _read_range(path, offset, size),
            headers={"Content-Type": "application/octet-stream", "Content-Length": str(size)},
        )
        if r.status_code == 400:  # the staged bytes changed under us: never commit them
            raise UsageError(
                f"the staged file {path} no longer holds the bytes it was hashed from: "
                "log the artifact again"
            )
        self._check(r, "a chunk upload")
        with self._lock:
            self.sent_bytes += size
            self.sent_chunks += 1
        if progress is not None:
            progress(size)

    # -- lineage and reads ----------------------------------------------------------------

    def use(
        self, name: str, ref: str = "latest", run_id: str = "", label: str | None = None
    ) -> VersionInfo:
        """Record that ``run_id`` uses ``name:ref``; the version with its manifest."""
        body = _json.encode(UseRequest(run_id=run_id, ref=ref, label=label))
        r = self._send(
            "POST",
            self._path(name, "use"),
            content=body,
            headers={"Content-Type": "application/json", **_READ},
        )
        return _decoded(self._check(r, f"the use of {name}:{ref}"), VersionInfo)

    def get(self, name: str, ref: str = "latest") -> VersionInfo:
        """One version (``latest``, ``v3``, an alias) with its manifest and lineage."""
        check_name(ref, "artifact version or alias")
        r = self._send("GET", self._path(name, ref), headers=_READ)
        return _decoded(self._check(r, f"reading {name}:{ref}"), VersionInfo)

    def versions(self, name: str) -> list[VersionInfo]:
        """Every version of ``name``, newest first (no manifests)."""
        r = self._send("GET", self._path(name), headers=_READ)
        return _decoded(self._check(r, f"the versions of {name!r}"), _Versions).versions

    def list(self, type: str | None = None) -> list[ArtifactSummary]:
        """The project's artifact names (of ``type``); none for a project the server
        does not know."""
        params = {"type": check_name(type, "artifact type")} if type is not None else None
        r = self._send("GET", f"/artifacts/{self.project}", params=params, headers=_READ)
        if r.status_code == 404:
            return []
        return _decoded(self._check(r, "the artifact list"), _Names).artifacts

    def run_artifacts(self, run_id: str) -> RunArtifacts:
        """What run ``run_id`` logged and used."""
        path = f"/runs/{self.project}/{check_id(run_id, 'run id')}/artifacts"
        r = self._send("GET", path, headers=_READ)
        return _decoded(self._check(r, f"the artifacts of run {run_id!r}"), RunArtifacts)

    # -- file bytes -------------------------------------------------------------------------

    def read_chunks(self, info: VersionInfo, entry: Entry) -> Iterator[bytes]:
        """The bytes of file ``entry`` of ``info`` as the server streams them (``Source``
        for ``Artifact.download``, which checks them against the entry's digest)."""
        url = _file_url(info.project, info.name, info.version, entry.path)
        try:
            yield from self._file_chunks(url, f"file {entry.path!r} of {info.qualified_name}")
        except _Cut as exc:
            raise ServerError(f"cannot download from {self.server}: {exc}") from None

    def download_file(
        self,
        name: str,
        version: str,
        path: str,
        dest: str | os.PathLike[str],
        digest: str | None = None,
    ) -> Path:
        """Stream file ``path`` of ``name:version`` to ``dest``: written to a temporary
        file beside it, checked against the manifest's sha256 (``digest``, else read from
        the server), then renamed into place (``fsutil.write_verified``). A mismatch
        leaves ``dest`` untouched; a download cut off midway starts again."""
        check_file_name(path, "artifact file name")
        check_name(version, "artifact version or alias")
        if digest is None:
            info = self.get(name, version)
            entry = _entry(info, path)
            if entry.ref is not None:
                raise UsageError(f"{path!r} is a reference ({entry.ref}): nothing to download")
            digest = entry.digest
        target = Path(dest)
        if target.is_symlink():
            raise UsageError(f"{target} is a symlink: download elsewhere")
        check_name(name, "artifact name")
        url = _file_url(self.project, name, version, path)
        what = f"file {path!r} of {name}:{version}"

        def arrived(got: str, _size: int) -> Exception:
            return ServerError(
                f"{what} arrived with sha256 {got}, not {digest}: nothing was written to {target}"
            )

        def attempt() -> Path:
            try:
                write_verified(target, self._file_chunks(url, what), str(digest), mismatch=arrived)
            except _Cut as exc:
                raise Retry(str(exc)) from None
            return target

        return self._retrying(attempt, f"the download of {what}")

    def _file_chunks(self, url: str, what: str) -> Iterator[bytes]:
        response = self._open_file(url, what)
        try:
            yield from response.iter_bytes(PIECE)
        except httpx.TransportError as exc:
            raise _Cut(f"{type(exc).__name__}: {exc}") from None
        finally:
            response.close()

    def _open_file(self, url: str, what: str) -> httpx.Response:
        """The open (streamed) 200 reply of a file GET, its status line retried like any
        request's; an error reply is read, closed and raised."""

        def attempt() -> httpx.Response:
            try:
                response = self.client.send(
                    self.client.build_request("GET", API + url), stream=True
                )
            except httpx.TransportError as exc:
                raise unreachable(exc) from exc
            if response.status_code == 200:
                return response
            try:
                response.read()
            finally:
                response.close()
            self._heed(response)
            message = error_message(response)
            transient(response, message)
            if response.status_code == 404:
                raise ArtifactNotFoundError(f"{what} is not on {self.server}: {message}")
            self._check(response, f"the download of {what}")
            raise ServerError(f"the rankwise server answered {response.status_code} to {what}")

        return self._retrying(attempt, f"the download of {what}")


class ServerSource:
    """The bytes of versions on a server (``Source`` for ``Artifact.download``): each
    read opens a ``RemoteArtifacts`` of the version's project and closes it after, so an
    ``Artifact`` read from a server holds no connection."""

    def __init__(
        self, server: str, token: str | None, transport: httpx.BaseTransport | None = None
    ) -> None:
        self.server = normalize_url(server)
        self._token = token
        self._transport = transport

    def __repr__(self) -> str:  # never the token
        return f"ServerSource({self.server!r})"

    def client(self, project: str) -> RemoteArtifacts:
        return RemoteArtifacts(self.server, project, self._token, transport=self._transport)

    def read_chunks(self, info: VersionInfo, entry: Entry) -> Iterator[bytes]:
        with self.client(info.project) as c:
            yield from c.read_chunks(info, entry)


def _file_url(project: str, name: str, version: str, path: str) -> str:
    q = quote
    return (
        f"/artifacts/{q(project, safe='')}/{q(name, safe='')}/{q(version, safe='')}"
        f"/files/{q(path, safe='/')}"
    )


def _entry(info: VersionInfo, path: str) -> Entry:
    for e in info.manifest.entries if info.manifest is not None else []:
        if e.path == path:
            return e
    raise ArtifactNotFoundError(f"no file {path!r} in {info.qualified_name}")


def _chunk_sources(entries: list[Entry], root: Path) -> dict[str, tuple[Path, int, int]]:
    """Chunk digest -> (staged file, offset, size) for every file entry."""
    out: dict[str, tuple[Path, int, int]] = {}
    for e in entries:
        if e.ref is not None:
            continue
        path = root / e.digest[:2] / e.digest
        offset = 0
        for c in e.chunks:
            out.setdefault(c.digest, (path, offset, c.size))
            offset += c.size
    return out


def _read_range(path: Path, offset: int, size: int) -> Iterator[bytes]:
    """The bytes ``offset .. offset + size`` of ``path``, ``PIECE`` at a time."""
    with open(path, "rb") as f:
        f.seek(offset)
        left = size
        while left > 0:
            data = f.read(min(PIECE, left))
            if not data:
                raise UsageError(f"the staged file {path} is shorter than its manifest says")
            left -= len(data)
            yield data
