"""Per-route HTTP policy: which body cap and which CSP each API route gets (``ROUTES``).

The hardening middleware (``rankwise.server.hardening``) runs before routing, so it finds
a request's route itself: ``RoutePolicies`` compiles every template of ``ROUTES`` as
Starlette compiles a route's path, and a request gets the entry of the most specific
template its path matches (the most literal segments: ``.../{name}/versions`` before
``.../{name}/{ref}``, as the router, which lists the specific routes first). Nothing is
derived from string prefixes or path positions, and ``tests/server/test_hardening.py`` checks
``ROUTES`` against ``app.routes``: every API route has an entry, no entry names a route
that no longer exists, and a method given a cap is one its route answers. A new route
therefore needs one line here, saying what it may receive and how its replies are framed.

A request that matches no template (the dashboard's files) gets ``DEFAULT``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from re import Pattern

from starlette.routing import compile_path

API = "/api/v1"


@dataclass(frozen=True)
class Policy:
    """What one route (a path template, all its methods) gets.

    ``caps``: the body cap of a method, by name: ``"upload"`` (``--max-body-mb``: stream
      uploads and artifact manifests), ``"blob"`` (``--max-blob-mb``: a blob's bytes);
      any other method, ``"json"`` (``max_json_bytes``).
    ``csp``: the reply's Content-Security-Policy: ``"app"`` (the dashboard's), ``"blob"``
      (an uploaded file: sandboxed, framed by the dashboard only), ``"artifact"`` (an
      artifact's file: sandboxed, never framed) or ``"docs"`` (Swagger UI).
    ``file_param``: a path parameter checked as a file name (``names.is_file_name``)
      instead of as an id: the rest of the path from its segment on.
    """

    caps: dict[str, str] = field(default_factory=dict)
    csp: str = "app"
    file_param: str | None = None


DEFAULT = Policy()
_READ = DEFAULT  # a read or a small JSON write: the JSON cap, the dashboard's CSP
_BLOB = Policy(csp="blob")
_RUN = f"{API}/projects/{{project}}/runs/{{run}}"
_ART = f"{API}/artifacts/{{project}}/{{artifact}}"

# Every API route by its path template (``route.path``), grouped by the module that
# declares it.
ROUTES: dict[str, Policy] = {
    "/api/docs": Policy(csp="docs"),
    "/api/openapi.json": _READ,
    "/api/{rest:path}": _READ,  # any other /api path: a 404 in the API's error shape
    # login, sessions and tokens (rankwise.server.routes.login)
    f"{API}/session": _READ,
    f"{API}/tokens": _READ,
    f"{API}/tokens/{{token_id}}": _READ,
    # upload (rankwise.server.routes.ingest)
    f"{API}/ingest": Policy(caps={"POST": "upload"}),
    f"{API}/ingest/batch": Policy(caps={"POST": "upload"}),
    f"{API}/ack": _READ,
    # blobs (rankwise.server.routes.blobs)
    f"{API}/blobs/{{project}}/missing": _BLOB,
    f"{API}/blobs/{{project}}/lost": _BLOB,
    f"{API}/blobs/{{project}}/{{digest}}": Policy(caps={"PUT": "blob"}, csp="blob"),
    # runs (rankwise.server.routes.runs, saved_views)
    f"{API}/projects": _READ,
    f"{API}/projects/{{project}}/runs": _READ,
    _RUN: _READ,
    f"{_RUN}/metrics": _READ,
    f"{_RUN}/series": _READ,
    f"{_RUN}/heatmap": _READ,
    f"{_RUN}/history": _READ,
    f"{API}/compare": _READ,
    f"{API}/projects/{{project}}/views": _READ,
    # run edits and search (rankwise.server.routes.manage)
    f"{_RUN}/edits": _READ,
    f"{API}/projects/{{project}}/runs/tags": _READ,
    f"{API}/projects/{{project}}/runs/search": _READ,
    # deleting runs (rankwise.server.routes.trash)
    f"{API}/projects/{{project}}/runs/delete": _READ,
    f"{API}/projects/{{project}}/runs/restore": _READ,
    f"{API}/projects/{{project}}/trash": _READ,
    f"{API}/audit": _READ,
    # reports (rankwise.server.routes.reports)
    f"{API}/projects/{{project}}/reports": _READ,
    f"{API}/projects/{{project}}/reports/{{report}}": _READ,
    f"{API}/projects/{{project}}/reports/{{report}}/versions": _READ,
    # health (rankwise.server.routes.health)
    f"{_RUN}/health": _READ,
    f"{_RUN}/hang": _READ,
    f"{_RUN}/stalls": _READ,
    f"{_RUN}/console": _READ,
    f"{_RUN}/system": _READ,
    f"{_RUN}/system/series": _READ,
    # media (rankwise.server.routes.media)
    f"{_RUN}/media/keys": _READ,
    f"{_RUN}/media": _READ,
    f"{_RUN}/histograms": _READ,
    f"{_RUN}/tables": _READ,
    # alerts (rankwise.server.routes.alerts)
    f"{API}/alerts/destinations": _READ,
    f"{API}/alerts/destinations/{{dest}}": _READ,
    f"{API}/alerts/destinations/{{dest}}/test": _READ,
    f"{_RUN}/alerts": _READ,
    # artifacts (rankwise.server.routes.artifacts)
    f"{API}/artifacts/{{project}}": _READ,
    _ART: _READ,
    f"{_ART}/versions": Policy(caps={"POST": "upload"}),  # a manifest: the upload cap
    f"{_ART}/use": _READ,
    f"{_ART}/{{ref}}": _READ,
    f"{_ART}/{{ref}}/files/{{path:path}}": Policy(csp="artifact", file_param="path"),
    f"{API}/runs/{{project}}/{{run}}/artifacts": _READ,
}


@dataclass(frozen=True)
class Matched:
    """The policy of one request, and where its file-name parameter starts (a segment
    index of the path split on ``/``), if its route has one."""

    policy: Policy
    file_from: int | None = None

    def cap(self, method: str) -> str:
        return self.policy.caps.get(method, "json")


_UNMATCHED = Matched(DEFAULT)


class RoutePolicies:
    """The policy of a request path: its most specific matching template's (above)."""

    def __init__(self, table: Mapping[str, Policy] = ROUTES) -> None:
        compiled = []
        for template, policy in table.items():
            regex = compile_path(template)[0]
            segments = template.split("/")
            literal = sum(1 for s in segments if s and not s.startswith("{"))
            file_from = None
            if policy.file_param is not None:
                file_from = next(
                    i for i, s in enumerate(segments) if s.startswith(f"{{{policy.file_param}")
                )
            compiled.append((literal, regex, Matched(policy, file_from)))
        # Most literal segments first (a stable sort keeps the table's order in a tie).
        compiled.sort(key=lambda c: -c[0])
        self._table: list[tuple[Pattern[str], Matched]] = [(r, m) for _, r, m in compiled]

    def match(self, path: str) -> Matched:
        if not path.startswith("/api/"):
            return _UNMATCHED
        for regex, matched in self._table:
            if regex.match(path):
                return matched
        return _UNMATCHED
