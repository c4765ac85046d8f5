"""``rankwise.Api(server=URL)``: the same runs and objects as ``Api(dir=...)``, over HTTP.

Replies are asked for as MessagePack so that NaN and ±Inf come back exact, as the local
reader returns them. ``RemoteRunInfo`` is a ``RunInfo``: code written against one reader
works with the other. Each request opens and closes its own connection, so an ``Api``
holds no socket between calls and needs no closing. Imported lazily (it imports httpx
through ``rankwise._http``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from . import _http
from ._http import normalize_url
from .api import RunInfo, StreamInfo
from .errors import RunNotFoundError, UsageError
from .failures import Failure
from .health import RankHealth

if TYPE_CHECKING:
    import httpx

_PAGE = 500


def _q(part: str) -> str:
    return quote(part, safe="")


class RemoteRunInfo(RunInfo):
    """A run read from a server; ``history()`` and ``metric_keys`` ask it on each call."""

    def __init__(self, reader: RemoteReader, data: dict[str, Any]) -> None:
        # RunInfo.__init__ folds local files; here the server has folded them already.
        self._reader = reader
        self.project = data["project"]
        self.id = data["id"]
        self.name = data.get("name") or self.id
        self.group = data.get("group")
        self.job_type = data.get("job_type")
        self.tags = list(data.get("tags") or [])
        self.notes = data.get("notes")
        self.run_mode = data.get("run_mode")
        self.base_id = data.get("base_id")
        self.world_size = int(data.get("world_size") or 0)
        self.num_nodes = int(data.get("num_nodes") or 1)
        self.environment: dict[str, Any] = dict(data.get("environment") or {})
        self.run_ranks = int(data.get("run_ranks") or 1)
        self.run_nodes = int(data.get("run_nodes") or 1)
        self.state = data["state"]
        self.crashed = list(data.get("crashed") or [])
        self.created = data.get("created")
        self.updated = data.get("updated")
        self.steps = int(data.get("steps") or 0)
        self.streams = [_stream(s, self._url()) for s in data.get("streams") or []]
        self._config: dict[str, Any] = dict(data.get("config") or {})
        self._summary: dict[str, Any] = dict(data.get("summary") or {})
        # Only a one-run reply carries these; a run from a list asks for itself once.
        self._summary_ranks: dict[str, dict[str, Any]] | None = data.get("summary_ranks")
        self._cross: dict[str, dict[str, Any]] | None = data.get("summary_cross_rank")
        self._folds = []
        failure = data.get("first_failure")
        self._first_failure = Failure.from_dict(failure) if failure else None
        unsynced = data.get("unsynced")
        # Crashed streams may hold records not yet uploaded: the rankwise sync hint.
        self.unsynced: str | None = unsynced["message"] if unsynced else None

    @property
    def first_failure(self) -> Failure | None:
        return self._first_failure

    def _url(self) -> str:
        return f"{self._reader.server}/api/v1/projects/{_q(self.project)}/runs/{_q(self.id)}"

    def _path(self, tail: str = "") -> str:
        return f"/api/v1/projects/{_q(self.project)}/runs/{_q(self.id)}{tail}"

    @property
    def config(self) -> dict[str, Any]:
        return dict(self._config)

    @property
    def summary(self) -> dict[str, Any]:
        return dict(self._summary)

    def _full(self) -> None:
        data = self._reader.get(self._path())
        self._summary_ranks = data.get("summary_ranks") or {}
        self._cross = data.get("summary_cross_rank") or {}

    @property
    def summary_ranks(self) -> dict[str, dict[str, Any]]:
        if self._summary_ranks is None:
            self._full()
        return {k: dict(v) for k, v in (self._summary_ranks or {}).items()}

    @property
    def summary_cross_rank(self) -> dict[str, dict[str, Any]]:
        if self._cross is None:
            self._full()
        return {k: dict(v) for k, v in (self._cross or {}).items()}

    @property
    def metric_keys(self) -> list[str]:
        return list(self._reader.get(self._path("/metrics"))["keys"])

    def history(
        self, keys: Sequence[str] | None = None, label: str | None = None
    ) -> list[dict[str, Any]]:
        """One row per ``log()`` call, as ``Api(dir=...)`` returns it."""
        if isinstance(keys, str):
            keys = [keys]
        params: dict[str, Any] = {}
        if keys is not None:
            if not keys:
                return []
            params["key"] = list(keys)
        if label is not None:
            params["label"] = label
        try:
            rows = self._reader.get(self._path("/history"), params)["rows"]
        except RunNotFoundError:
            return []
        rows.sort(key=lambda r: (r["step"], r["time"]))
        return rows  # type: ignore[no-any-return]

    def health(
        self, window: float = 60.0, factor: float = 1.25, now: float | None = None
    ) -> list[RankHealth]:
        """Each rank's health, assessed by the server as ``RunInfo.health()`` does."""
        params: dict[str, Any] = {"window": window, "factor": factor, "stacks": "true"}
        if now is not None:
            params["now"] = now
        data = self._reader.get(self._path("/health"), params)
        out = []
        for r in data["ranks"]:
            stall = r.get("stall") or {}
            out.append(
                RankHealth(
                    label=r["label"],
                    rank=r["rank"],
                    node=r["node"],
                    state=r["state"],
                    last_step=r["last_step"],
                    step_rate=r["step_rate"],
                    median_rate=data["median_rate"],
                    lag_steps=r["lag_steps"],
                    lag_seconds=r["lag_seconds"],
                    slow=r["slow"],
                    stalled=r["stalled"],
                    stall_where=stall.get("where", ""),
                    stall_since=stall.get("since"),
                    stall_seconds=stall.get("seconds"),
                    stacks=dict(stall.get("stacks") or {}),
                )
            )
        return out


def _stream(s: dict[str, Any], run_url: str) -> StreamInfo:
    return StreamInfo(
        label=s["label"],
        incarnation=s["incarnation"],
        rank=s["rank"],
        local_rank=s["local_rank"],
        node=s["node"],
        host=s["host"],
        pid=s["pid"],
        is_primary=s["is_primary"],
        state=s["state"],
        last_step=s["last_step"],
        points=s["points"],
        dropped=s["dropped"],
        started=s["started"],
        last_seen=s["last_seen"],
        exit_code=s["exit_code"],
        signal=s["signal"],
        error_type=s["error_type"],
        error_message=s["error_message"],
        traceback=s["traceback"],
        damage=None,
        path=run_url,
    )


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

    def projects(self) -> list[str]:
        data = self.get("/api/v1/projects")
        return sorted(p["name"] for p in data["projects"])

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
                out += [RemoteRunInfo(self, r) for r in page["runs"]]
                offset += len(page["runs"])
                if not page["runs"] or offset >= page["total"]:
                    break
        out.sort(key=lambda r: r.created or 0.0, reverse=True)
        return out

    def run(self, run_id: str, project: str | None) -> RunInfo:
        projects = [project] if project else self.projects()
        found = []
        for proj in projects:
            try:
                data = self.get(f"/api/v1/projects/{_q(proj)}/runs/{_q(run_id)}")
            except RunNotFoundError:
                continue
            found.append(RemoteRunInfo(self, data))
        if not found:
            where = f"project {project!r}" if project else "any project"
            raise RunNotFoundError(f"no run {run_id!r} in {where} on {self.server}")
        if len(found) > 1:
            names = ", ".join(f"{r.project}/{run_id}" for r in found)
            raise UsageError(
                f"run id {run_id!r} exists in several projects ({names}): pass project="
            )
        return found[0]
