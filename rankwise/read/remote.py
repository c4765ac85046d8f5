"""``rankwise.Api(server=URL)``: the same runs and objects as ``Api(dir=...)``, over HTTP.

Replies are asked for as MessagePack so that NaN and ±Inf come back exact, as the local
reader returns them, and decoded as they are into the read model (``rankwise.wire``):
a run from a server is the same ``RunInfo`` as one from the files; its ``RemoteRun``
source asks the server for what its fields do not hold. Each request opens and closes its
own connection, so an ``Api`` holds no socket between calls and needs no closing.
Imported lazily (it imports httpx through ``rankwise._http``).
"""

from __future__ import annotations

import functools
import hashlib
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import msgspec

from .. import _http
from .._http import normalize_url
from ..errors import KeyNotLoggedError, RunNotFoundError, ServerError, UsageError
from ..wire.health import HealthReply, RankHealth
from ..wire.media import HistogramsReply, MediaKeysReply, MediaReply, TableReply
from ..wire.runs import CrossRankValue, ProjectsReply, RunInfo, RunsReply

if TYPE_CHECKING:
    import httpx

    from ..artifacts.artifact import Artifact
    from ..artifacts.remote import ServerSource
    from ..media.table import Table
    from ..stream.history import StreamColumns
    from ..wire.artifacts import VersionInfo
    from ..wire.media import MediaKey
    from .media import HistogramSeries, MediaFile

_PAGE = 500


@functools.cache
def _blob_cache() -> Path:
    return Path(tempfile.mkdtemp(prefix="rankwise-blobs-"))


def httpx_error() -> type[Exception]:
    import httpx

    return httpx.HTTPError


def _q(part: str) -> str:
    return quote(part, safe="")


class RemoteRun:
    """A run on a server: what its ``RunInfo`` asks for beyond its fields, asked each time."""

    def __init__(self, reader: RemoteReader) -> None:
        self._reader = reader

    @staticmethod
    def _path(run: RunInfo, tail: str = "") -> str:
        return f"/api/v1/projects/{_q(run.project)}/runs/{_q(run.id)}{tail}"

    def summaries(
        self, run: RunInfo
    ) -> tuple[dict[str, dict[str, Any]], dict[str, CrossRankValue]]:
        # A run from a list carries no per-rank summaries: ask for the run itself once.
        full = msgspec.convert(self._reader.get(self._path(run)), RunInfo)
        return full.rank_summaries or {}, full.cross_rank_summary or {}

    def metric_keys(self, run: RunInfo) -> list[str]:
        return list(self._reader.get(self._path(run, "/metrics"))["keys"])

    def history(
        self, run: RunInfo, keys: Sequence[str] | None, label: str | None
    ) -> list[dict[str, Any]]:
        """One row per ``log()`` call, as ``Api(dir=...)`` returns it."""
        params: dict[str, Any] = {}
        if keys is not None:
            if not keys:
                return []
            params["key"] = list(keys)
        if label is not None:
            params["label"] = label
        try:
            rows = self._reader.get(self._path(run, "/history"), params)["rows"]
        except RunNotFoundError:
            return []
        rows.sort(key=lambda r: (r["step"], r["time"]))
        return rows  # type: ignore[no-any-return]

    def scan(
        self,
        run: RunInfo,
        keys: Sequence[str] | None,
        label: str | None,
        step_range: tuple[int, int] | None,
    ) -> dict[str, StreamColumns]:
        """``scan()``'s arrays, built from the server's history rows."""
        from ..stream.history import columns_from_rows

        return columns_from_rows(self.history(run, keys, label), keys, step_range)

    # Rich data: the server's media, tables and histograms routes (``rankwise.wire.media``)
    # turned into the local reader's objects (rankwise.read.media); bytes from the blobs.
    def media_keys(self, run: RunInfo) -> list[MediaKey]:
        got = self._reader.get(self._path(run, "/media/keys"))
        return msgspec.convert(got, MediaKeysReply).keys

    def media(self, run: RunInfo, key: str, label: str | None) -> list[MediaFile]:
        from .media import MediaFile

        params = {"key": key} if label is None else {"key": key, "label": label}
        got = msgspec.convert(self._reader.get(self._path(run, "/media"), params), MediaReply)
        fetch = functools.partial(self._reader.blob, run.project)
        return [
            MediaFile(key=key, **msgspec.structs.asdict(row)).attach(fetch) for row in got.items
        ]

    def table(self, run: RunInfo, key: str, step: int | None, label: str | None) -> Table:
        """The table's Parquet blob, read as ``Api(dir=)`` reads it; image cells are
        ``Image``s of their blobs (fetched into a content-addressed temp folder)."""
        from ..media.image import Image
        from ..media.table import table_from_parquet

        params: dict[str, Any] = {"key": key, "limit": 1}
        if step is not None:
            params["step"] = step
        if label is not None:
            params["label"] = label
        try:
            got = msgspec.convert(self._reader.get(self._path(run, "/tables"), params), TableReply)
        except RunNotFoundError as exc:
            raise KeyNotLoggedError(str(exc)) from None

        def image(digest: str) -> Image:
            return Image(self._reader.blob_file(run.project, digest))

        data = self._reader.blob(run.project, got.digest)
        table = table_from_parquet(data, image, types=list(got.types))
        table.step, table.label = got.step, got.label
        return table

    def histograms(self, run: RunInfo, key: str) -> dict[str, HistogramSeries]:
        from ..stream import records as R
        from .media import histogram_series

        got = msgspec.convert(
            self._reader.get(self._path(run, "/histograms"), {"key": key}), HistogramsReply
        )
        out = {}
        for s in got.series:
            recs = [
                R.HistogramRec(i, float(i), step, key, counts, edges, nan, pos, neg)
                for i, (step, counts, edges, nan, pos, neg) in enumerate(
                    zip(s.steps, s.counts, s.edges, s.nan, s.posinf, s.neginf)
                )
            ]
            out[s.label] = histogram_series(key, s.label, recs)
        return out

    def health(
        self, run: RunInfo, window: float, factor: float, now: float | None
    ) -> list[RankHealth]:
        """Each rank's health, assessed by the server as ``RunInfo.health()`` does."""
        params: dict[str, Any] = {"window": window, "factor": factor, "stacks": "true"}
        if now is not None:
            params["now"] = now
        data = msgspec.convert(self._reader.get(self._path(run, "/health"), params), HealthReply)
        return data.ranks

    def blob(self, run: RunInfo, digest: str) -> bytes:
        return self._reader.blob(run.project, digest)

    def artifacts(self, run: RunInfo) -> tuple[list[Artifact], list[Artifact]]:
        """``GET /api/v1/runs/{project}/{run}/artifacts``; each version's manifest asked
        for on its own (the run's reply lists versions without them)."""
        from ..artifacts.artifact import Artifact

        source = self._reader.artifact_source()
        with source.client(run.project) as client:
            got = client.run_artifacts(run.id)

            def full(infos: list[VersionInfo]) -> list[Artifact]:
                out = []
                for i in infos:
                    if i.manifest is None:
                        with source.client(i.project) as other:
                            i = other.get(i.name, i.version)
                    out.append(Artifact.from_version(i, source))
                return out

            return full(got.logged), full(got.used)


class RemoteReader:
    """What ``Api`` delegates to when given ``server=``."""

    def __init__(
        self,
        server: str,
        transport: httpx.BaseTransport | None = None,
        token: str | None = None,
    ) -> None:
        self.server = normalize_url(server)
        self._transport = transport
        self._token = token

    def __repr__(self) -> str:  # never the token
        return f"RemoteReader({self.server!r})"

    def get(self, path: str, params: Any = None) -> Any:
        with _http.make_client(self.server, transport=self._transport, token=self._token) as client:
            return _http.get_msgpack(client, path, params)

    def artifact_source(self) -> ServerSource:
        """This server's artifacts: ``.client(project)`` reads them (``RemoteArtifacts``,
        the one artifact client), and it is the ``Source`` their downloads stream from."""
        from ..artifacts.remote import ServerSource

        return ServerSource(self.server, self._token, self._transport)

    def blob(self, project: str, digest: str) -> bytes:
        """A blob's bytes (``GET /api/v1/blobs/{project}/{digest}``), checked against
        its digest."""
        path = f"/api/v1/blobs/{_q(project)}/{_q(digest)}"
        with _http.make_client(self.server, transport=self._transport, token=self._token) as client:
            try:
                response = client.get(path)
            except httpx_error() as exc:
                raise ServerError(
                    f"cannot reach the rankwise server at {self.server}: {exc}"
                ) from exc
            if response.status_code != 200:
                _http.check_reply(response)
            data = response.content
        if hashlib.sha256(data).hexdigest() != digest:
            raise ServerError(f"blob {digest} came back from {self.server} with other content")
        return data

    def blob_file(self, project: str, digest: str) -> Path:
        """The blob in a local content-addressed folder (fetched once per process)."""
        path = _blob_cache() / digest[:2] / digest
        if not path.is_file():
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{digest}.{os.getpid()}.part")
            tmp.write_bytes(self.blob(project, digest))
            os.replace(tmp, path)
        return path

    def projects(self) -> list[str]:
        data = msgspec.convert(self.get("/api/v1/projects"), ProjectsReply)
        return sorted(p.name for p in data.projects)

    def _attach(self, run: RunInfo) -> RunInfo:
        url = f"{self.server}/api/v1/projects/{_q(run.project)}/runs/{_q(run.id)}"
        for s in run.streams:
            s.path = url  # where it was read from; a server's reply never says
        return run.attach(RemoteRun(self))

    def runs(
        self,
        project: str | None,
        group: str | None,
        job_type: str | None,
        states: set[str],
        tags: set[str],
    ) -> list[RunInfo]:
        out: list[RunInfo] = []
        for proj in [project] if project else self.projects():
            params: dict[str, Any] = {"sort": "-created", "limit": _PAGE, "with_streams": "true"}
            if group is not None:
                params["group"] = group
            if job_type is not None:
                params["job_type"] = job_type
            if states:
                params["state"] = sorted(states)
            if tags:
                params["tag"] = sorted(tags)
            offset = 0
            while True:
                params["offset"] = offset
                try:
                    page = self.get(f"/api/v1/projects/{_q(proj)}/runs", params)
                except RunNotFoundError:
                    break  # a project with no runs yet
                got = msgspec.convert(page, RunsReply)
                out += [self._attach(r) for r in got.runs]
                offset += len(got.runs)
                if not got.runs or offset >= got.total:
                    break
        out.sort(key=lambda r: r.created or 0.0, reverse=True)
        return out

    def find(
        self, project: str, filters: dict[str, Any] | None, order: str | None
    ) -> list[RunInfo]:
        """The project's runs ``filters`` picks, in ``order``: the server's runs search
        (``POST /api/v1/projects/{project}/runs/search``), every page."""
        body: dict[str, Any] = {"filters": filters or {}, "limit": _PAGE, "with_streams": True}
        if order:
            body["order"] = order
        out: list[RunInfo] = []
        with _http.make_client(self.server, transport=self._transport, token=self._token) as client:
            while True:
                body["offset"] = len(out)
                try:
                    page = _http.post_msgpack(
                        client, f"/api/v1/projects/{_q(project)}/runs/search", body
                    )
                except RunNotFoundError:
                    return []  # a project with no runs yet
                got = msgspec.convert(page, RunsReply)
                out += [self._attach(r) for r in got.runs]
                if not got.runs or len(out) >= got.total:
                    return out

    def run(self, run_id: str, project: str | None) -> RunInfo:
        projects = [project] if project else self.projects()
        found = []
        for proj in projects:
            try:
                data = self.get(f"/api/v1/projects/{_q(proj)}/runs/{_q(run_id)}")
            except RunNotFoundError:
                continue
            found.append(self._attach(msgspec.convert(data, RunInfo)))
        if not found:
            where = f"project {project!r}" if project else "any project"
            raise RunNotFoundError(f"no run {run_id!r} in {where} on {self.server}")
        if len(found) > 1:
            names = ", ".join(f"{r.project}/{run_id}" for r in found)
            raise UsageError(
                f"run id {run_id!r} exists in several projects ({names}): pass project="
            )
        return found[0]
