"""Artifacts read from a server (``Api(server=).artifact()``/``artifacts()``, the run's
``logged_artifacts()``/``used_artifacts()``, and the bytes ``Artifact.download()`` writes).

The routes (docs/http-api.md): ``GET /api/v1/artifacts/{project}`` (names),
``/artifacts/{project}/{name}`` (versions, newest first), ``/artifacts/{project}/{name}/
{ref}`` (one version with its manifest and lineage), ``.../{ref}/files/{path}`` (a file,
streamed) and ``/runs/{project}/{run}/artifacts`` (what a run logged and used).
Imported lazily (httpx).
"""

from __future__ import annotations

from typing import IO, TYPE_CHECKING, Any
from urllib.parse import quote

import msgspec

from .. import _http
from ..artifacts.manifest import Entry
from ..errors import ArtifactNotFoundError, RunNotFoundError, ServerError
from ..wire.artifacts import ArtifactSummary, RunArtifacts, VersionInfo

if TYPE_CHECKING:
    import httpx

_STREAM_BYTES = 1024 * 1024


def _q(part: str) -> str:
    return quote(part, safe="")


def _path(path: str) -> str:
    return "/".join(_q(p) for p in path.split("/"))


class ArtifactReader:
    """The server's artifact routes, for one server (and token)."""

    def __init__(
        self, server: str, token: str | None = None, transport: httpx.BaseTransport | None = None
    ) -> None:
        self.server = _http.normalize_url(server)
        self._token = token
        self._transport = transport

    def __repr__(self) -> str:  # never the token
        return f"ArtifactReader({self.server!r})"

    def _get(self, path: str, params: Any = None, what: str = "") -> Any:
        with _http.make_client(self.server, transport=self._transport, token=self._token) as c:
            try:
                return _http.get_msgpack(c, path, params)
            except RunNotFoundError as exc:
                raise ArtifactNotFoundError(f"no {what} on {self.server}: {exc}") from None

    def names(self, project: str, type: str | None = None) -> list[ArtifactSummary]:
        params = {"type": type} if type else None
        try:
            got = self._get(f"/api/v1/artifacts/{_q(project)}", params, f"project {project!r}")
        except ArtifactNotFoundError:
            return []
        if isinstance(got, dict):
            got = got.get("artifacts", got.get("names", []))
        return msgspec.convert(got, list[ArtifactSummary])

    def versions(self, project: str, name: str) -> list[VersionInfo]:
        got = self._get(
            f"/api/v1/artifacts/{_q(project)}/{_q(name)}", None, f"artifact {project}/{name}"
        )
        if isinstance(got, dict):
            got = got.get("versions", [])
        return msgspec.convert(got, list[VersionInfo])

    def version(self, project: str, name: str, ref: str) -> VersionInfo:
        got = self._get(
            f"/api/v1/artifacts/{_q(project)}/{_q(name)}/{_q(ref)}",
            None,
            f"artifact {project}/{name}:{ref}",
        )
        return msgspec.convert(got, VersionInfo)

    def run_artifacts(self, project: str, run_id: str) -> RunArtifacts:
        got = self._get(
            f"/api/v1/runs/{_q(project)}/{_q(run_id)}/artifacts", None, f"run {project}/{run_id}"
        )
        return msgspec.convert(got, RunArtifacts)

    def read_into(self, info: VersionInfo, entry: Entry, out: IO[bytes]) -> None:
        """Stream file ``entry`` of ``info`` into ``out`` (the caller checks the digest)."""
        url = (
            f"/api/v1/artifacts/{_q(info.project)}/{_q(info.name)}/{_q(info.version)}"
            f"/files/{_path(entry.path)}"
        )
        with _http.make_client(self.server, transport=self._transport, token=self._token) as c:
            try:
                with c.stream("GET", url) as response:
                    if response.status_code != 200:
                        response.read()
                        _http.check_reply(response)
                    for chunk in response.iter_bytes(_STREAM_BYTES):
                        out.write(chunk)
            except ServerError:
                raise
            except RunNotFoundError:
                raise ArtifactNotFoundError(
                    f"file {entry.path!r} of {info.qualified_name} is not on {self.server}"
                ) from None
            except Exception as exc:
                if type(exc).__module__.startswith("httpx"):
                    raise ServerError(f"cannot download from {self.server}: {exc}") from exc
                raise
