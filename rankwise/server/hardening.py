"""The HTTP hardening every rankwise app gets: ``install_hardening(app, settings)``.

One pure-ASGI middleware, outermost but for Starlette's own error layer, so nothing the
routes or the static files do can skip it. Per request, in this order:

1. **Host allow-list** (DNS rebinding): a ``Host`` not in ``settings.allowed_hosts`` (or
   none at all) is answered 400 on every path, static files and ``/api`` alike. A page on
   ``rebind.attacker.test`` whose name now points at 127.0.0.1 still sends its own name.
2. **Names**: every segment of an ``/api`` path and the name-carrying query parameters
   (``project``, ``run``, ``label``, ``key``, ``name``) are checked by ``rankwise.names``,
   after percent-decoding; a bad one gets 400 before any route runs.
3. **Body caps**: ``Content-Length`` over the cap is refused (413) before a byte is read;
   a chunked body is counted as it streams and cut off at the cap (413). Ingest bodies
   have ``max_body_bytes``, a blob's PUT ``max_blob_bytes``; every other route
   ``max_json_bytes``. Which route gets which cap (and which CSP, below) is ONE table,
   ``rankwise.server.route_policy.ROUTES``, keyed by the routes' path templates and
   matched against the app's own routes; a test checks it against ``app.routes``.
4. **Errors**: an exception no route handled becomes a 500 whose body is fixed text and
   a request id; the traceback goes to the server's log under that id, never to the client.
5. **Headers** on every response: the dashboard's CSP (no inline script, no framing),
   ``nosniff``, ``Referrer-Policy: no-referrer``, ``Cross-Origin-Opener-Policy``, and
   ``X-Request-Id``. No CORS headers are ever sent: a foreign origin gets no access.
   On the blob routes (uploaded files) the CSP is ``BLOB_CSP`` instead (``sandbox;
   default-src 'none'``) and framing is allowed to the dashboard's own origin only.
   An artifact file (``/api/v1/artifacts/{project}/{name}/{ref}/files/{path}``) is served
   with ``ARTIFACT_CSP`` (``sandbox; default-src 'none'``) and no framing at all; its
   ``{path}`` is checked as a file name (``names.is_file_name``: no traversal, no
   double encoding) instead of as ids. An artifact commit's body (a manifest) has the
   ingest cap ``max_body_bytes``.

Every refusal has a fixed message: nothing from the request (headers, body, the bad
name) is echoed, so a response can never carry an attacker's markup back.
"""

from __future__ import annotations

import ipaddress
import logging
import secrets
import socket
from collections.abc import Iterable
from typing import Any
from urllib.parse import parse_qsl, unquote

from fastapi import FastAPI
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .. import names
from .config import LOOPBACK_HOSTS, ServerSettings
from .encoding import error_body
from .route_policy import Matched, RoutePolicies

log = logging.getLogger("rankwise.server")

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
    "media-src 'self' blob:; font-src 'self'; connect-src 'self'; object-src 'none'; "
    "base-uri 'none'; frame-ancestors 'none'; form-action 'self'"
)
# /api/docs is Swagger UI served from the package (static.mount_api_docs): its scripts
# and stylesheet are files of this origin, so the page needs nothing but 'self' (and
# data: images, which its stylesheet uses for icons). No CDN, no inline script.
DOCS_PATH = "/api/docs"
DOCS_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; frame-ancestors 'none'; form-action 'none'"
)
SECURITY_HEADERS: list[tuple[bytes, bytes]] = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"x-frame-options", b"DENY"),
]
# Uploaded files (route_policy csp "blob"): never active content in the dashboard's origin.
# ``sandbox`` gives a document no script, no forms, no same-origin access even when opened
# directly; ``frame-ancestors 'self'`` (with X-Frame-Options SAMEORIGIN) lets only the
# dashboard frame one (an HTML panel in a sandboxed iframe).
BLOB_CSP = "sandbox; default-src 'none'; frame-ancestors 'self'"
BLOB_TOO_LARGE = (
    "blob over this server's limit: log a smaller file, or start the server with a larger "
    "--max-blob-mb"
)
# Artifact files (route_policy csp "artifact"): sandboxed and never framed.
ARTIFACT_CSP = "sandbox; default-src 'none'"
BAD_FILE_PATH = "the artifact file path is not a valid file name: " + names.FILE_RULE
# Query parameters that carry names, and the rule each follows.
_ID_PARAMS = frozenset(("project", "run", "label", "group", "token_id", "dest"))
_KEY_PARAMS = frozenset(("key", "name"))

BAD_HOST = (
    "this server does not answer for the Host this request named: open it by an allowed "
    "name, or start it with --allowed-hosts listing that name"
)
BAD_PATH = "the path has a part that is not a valid name: " + names.ID_RULE
BAD_LENGTH = "the Content-Length header is not one whole number"
TOO_LARGE = "request body over this server's limit: send less, or raise --max-body-mb"
INTERNAL = "internal error: nothing was changed by this request; the server log has details"


def bad_param(param: str) -> str:
    rule = names.ID_RULE if param in _ID_PARAMS else names.KEY_RULE
    return f"query parameter {param!r} is not a valid name: {rule}"


def install_hardening(app: FastAPI, settings: ServerSettings) -> None:
    """Wrap ``app`` in the hardening middleware (once, from ``create_app``)."""
    app.add_middleware(
        HardeningMiddleware,
        allowed_hosts=settings.allowed_hosts,
        max_body_bytes=settings.max_body_bytes,
        max_json_bytes=settings.max_json_bytes,
        max_blob_bytes=settings.max_blob_bytes,
    )
    _document_refusals(app)


# What the middleware may answer on any operation, added to each in the OpenAPI document.
_REFUSALS = {
    "400": "foreign Host header, or a name in the path or query that breaks its rule",
    "413": "request body over the server's limit",
    "500": "internal error (generic message and a request id)",
}

# What a route behind a token or session may answer besides (rankwise.server.auth).
_AUTH_REFUSALS = {
    "401": "no valid token or session",
    "403": "the token's role or projects do not allow this",
}


def _document_refusals(app: FastAPI) -> None:
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        spec = build()
        error = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorReply"}}}
        for methods in spec.get("paths", {}).values():
            for op in methods.values():
                for param in op.get("parameters", []):
                    _document_name_rule(param)
                responses = op.setdefault("responses", {})
                refusals = {**_REFUSALS, **(_AUTH_REFUSALS if op.get("security") else {})}
                for status, description in refusals.items():
                    responses.setdefault(status, {"description": description, "content": error})
        return spec

    app.openapi = openapi  # type: ignore[method-assign]


def _document_name_rule(param: dict[str, Any]) -> None:
    """Write the middleware's name rule into a path or query parameter's schema."""
    name = param.get("name")
    if param.get("in") not in ("path", "query") or name not in _ID_PARAMS | _KEY_PARAMS:
        return
    _apply_name_rule(param.setdefault("schema", {}), name in _ID_PARAMS)


def _apply_name_rule(schema: dict[str, Any], is_id: bool) -> None:
    for option in schema.get("anyOf", [schema]):
        if option.get("type") == "array":
            _apply_name_rule(option.setdefault("items", {}), is_id)
        elif option.get("type", "string") == "string":
            if is_id:
                option.update(pattern=names.ID_PATTERN, maxLength=names.ID_MAX)
            else:
                option.update(pattern=names.KEY_PATTERN, minLength=1, maxLength=names.KEY_MAX)


def allowed_hosts_for(bind: str, extra: Iterable[str] = ()) -> tuple[str, ...]:
    """The Host names a server bound to ``bind`` answers: loopback, ``bind``, ``extra``.

    Bound to every interface (``0.0.0.0``/``::``), it also answers this machine's own
    names (``hostname``, its FQDN): the names other nodes of a cluster use to reach it.
    A DNS-rebinding page cannot send those, only its own attacker-chosen name.
    """
    out = list(LOOPBACK_HOSTS)
    if bind in ("0.0.0.0", "::", ""):
        out += [socket.gethostname(), socket.getfqdn()]
    else:
        out.append(bind)
    out += list(extra)
    return tuple(dict.fromkeys(h.lower().strip("[]") for h in out if h))


class HostAllowList:
    """``Host`` header matching: exact names, ``*.example.com`` suffixes, or ``*``.

    The port is ignored (a server is the same on any port it listens on); IPv6 literals
    are written bare (``::1``) and matched in either form.
    """

    def __init__(self, patterns: Iterable[str]) -> None:
        self.any = False
        self.exact: set[str] = set()
        self.suffixes: list[str] = []
        for raw in patterns:
            p = raw.strip().lower().strip("[]")
            if p == "*":
                self.any = True
            elif p.startswith("*."):
                self.suffixes.append(p[1:])
            elif p:
                self.exact.add(p)

    def allows(self, header: str | None) -> bool:
        if not header:
            return False
        host = _host_name(header)
        if host is None:
            return False
        if self.any or host in self.exact:
            return True
        return any(host.endswith(s) and len(host) > len(s) for s in self.suffixes)


def _host_name(header: str) -> str | None:
    """The name of ``Host: name[:port]`` lower-cased, or None when it is malformed."""
    header = header.strip().lower()
    if header.startswith("["):
        end = header.find("]")
        if end < 0 or (header[end + 1 :] not in ("",) and not header[end + 1 :].startswith(":")):
            return None
        name = header[1:end]
        try:
            ipaddress.IPv6Address(name)
        except ValueError:
            return None
        return name
    name, _, port = header.partition(":")
    if port and not port.isdigit():
        return None
    if not name or not all(c.isalnum() or c in ".-_" for c in name) or not name.isascii():
        return None
    return name


class _TooLarge(Exception):
    pass


class HardeningMiddleware:
    def __init__(
        self,
        app: ASGIApp,
        allowed_hosts: Iterable[str] = LOOPBACK_HOSTS,
        max_body_bytes: int = 96 * 1024 * 1024,
        max_json_bytes: int = 1024 * 1024,
        max_blob_bytes: int = 512 * 1024 * 1024,
    ) -> None:
        self.app = app
        self.hosts = HostAllowList(allowed_hosts)
        self.caps = {"upload": max_body_bytes, "json": max_json_bytes, "blob": max_blob_bytes}
        self.policies = RoutePolicies()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = secrets.token_hex(8)
        scope.setdefault("state", {})["request_id"] = request_id
        extra = [*SECURITY_HEADERS, (b"x-request-id", request_id.encode())]
        path = scope.get("path", "")
        route = self.policies.match(path)
        csp = route.policy.csp
        if csp != "app":
            extra[0] = (b"content-security-policy", _CSPS[csp])
        if csp == "blob":
            extra[4] = (b"x-frame-options", b"SAMEORIGIN")
        started = False

        async def send_hardened(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                headers = [
                    (k, v)
                    for k, v in message.get("headers", [])
                    if k.lower() not in _OURS and not k.lower().startswith(b"access-control-")
                ]
                message = {**message, "headers": headers + extra}
            await send(message)

        async def refuse(status: int, message: str) -> None:
            await _send_error(send_hardened, status, message, request_id)

        headers = _headers(scope)
        if not self.hosts.allows(headers.get("host")):
            await refuse(400, BAD_HOST)
            return
        problem = _bad_name(scope, route)
        if problem is not None:
            await refuse(400, problem)
            return
        cap = route.cap(str(scope.get("method", "")))
        limit = self.caps[cap]
        too_large = BLOB_TOO_LARGE if cap == "blob" else TOO_LARGE
        declared = headers.get("content-length")
        if declared is not None and not declared.isdigit():
            await refuse(400, BAD_LENGTH)
            return
        if declared is not None and int(declared) > limit:
            await refuse(413, too_large)
            return
        seen = 0

        async def receive_capped() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise _TooLarge
            return message

        try:
            await self.app(scope, receive_capped, send_hardened)
        except _TooLarge:
            if not started:
                await refuse(413, too_large)
        except Exception:
            log.exception("rankwise server: request %s failed", request_id)
            if not started:
                await refuse(500, INTERNAL)


_OURS = frozenset(k for k, _ in SECURITY_HEADERS) | {b"x-request-id"}
_CSPS = {
    "app": CSP.encode(),
    "blob": BLOB_CSP.encode(),
    "artifact": ARTIFACT_CSP.encode(),
    "docs": DOCS_CSP.encode(),
}


def _headers(scope: Scope) -> dict[str, str]:
    out: dict[str, str] = {}
    for k, v in scope.get("headers", []):
        name = k.decode("latin-1").lower()
        if name in ("host", "content-length") and name in out:
            out[name] = ""  # two Host or Content-Length headers: ambiguous, refused
            continue
        out[name] = v.decode("latin-1")
    return out


def _bad_name(scope: Scope, route: Matched) -> str | None:
    """The refusal for a bad name in an ``/api`` path or query, else None. The segments
    from a route's file parameter on (``route.file_from``) are one file name."""
    path: str = scope.get("path", "")
    if not path.startswith("/api/"):
        return None
    raw = scope.get("raw_path") or path.encode()
    segments = raw.decode("latin-1").split("/")
    if route.file_from is not None:  # e.g. v1/artifacts/p/n/ref/files/<file path>
        if len(segments) <= route.file_from:
            return BAD_PATH
        rest = "/".join(segments[route.file_from :])
        try:
            decoded = unquote(rest, errors="strict")
        except UnicodeDecodeError:
            return BAD_FILE_PATH
        if not names.is_file_name(decoded):
            return BAD_FILE_PATH
        segments = segments[: route.file_from]
    for part in segments[2:]:
        try:
            decoded = names.decode_stable(part)
        except (ValueError, UnicodeDecodeError):
            return BAD_PATH
        if decoded != unquote(part) or not names.is_id(decoded):
            return BAD_PATH
    query = scope.get("query_string", b"").decode("latin-1")
    if not query:
        return None
    try:
        pairs = parse_qsl(query, keep_blank_values=True, errors="strict", encoding="utf-8")
    except (ValueError, UnicodeDecodeError):
        return "the query string is not valid UTF-8 percent-encoding"
    for param, value in pairs:
        if param in _ID_PARAMS and not names.is_id(value):
            return bad_param(param)
        if param in _KEY_PARAMS and not names.is_key(value):
            return bad_param(param)
    return None


async def _send_error(send: Send, status: int, message: str, request_id: str) -> None:
    body = error_body(status, message, request_id=request_id)
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
