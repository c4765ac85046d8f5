"""Who is asking, and may they: tokens, dashboard sessions, and the per-route policies.

Deny by default. Every route carries exactly one policy dependency, and a test walks
``app.routes`` to keep it so:

* ``public``: the dashboard shell and static assets, the OpenAPI document, login/logout.
* ``ingest``: upload streams (``/ingest``, ``/ack``) and blobs (``/blobs/{project}/...``
  but GET) into the token's projects. No reads:
  a token leaked from a cluster node exposes nothing.
* ``read``: the read API of the token's projects (saved views included: they are
  per-project dashboard state, so a reader may save them from the dashboard). A write
  token passes it too: a writer reads everything a reader does.
* ``write``: editing runs (name, tags, notes, group, job type): a write token of the
  project, an ingest token of it (what writes its runs; kept as before) or an admin.
  Reports are saved and deleted under ``read`` plus ``reports.check_writer`` (write or
  admin), since their GETs share the router.
* ``read_or_ingest``: an artifact file's bytes (``/artifacts/.../files/...``): a read
  or write token, or an ingest token of that project, since a training job that uses a model must
  fetch it with the token it logs with (see docs/security.md, "Artifact downloads").
* ``delete``: deleting, restoring and purging runs: a write token of the project or an
  admin (not an ingest token).
* ``admin``: token management and the audit log; an admin token also passes every other policy.
* ``authenticated``: any principal (who-am-I, and the JSON 404 of unknown ``/api`` paths,
  so an unauthenticated caller learns nothing of the API's shape).

Credentials travel as ``Authorization: Bearer rk_…`` or as the dashboard's session cookie.
A token in the query string is refused, never read: URLs end up in access logs, browser
history and ``Referer``. A wrong id, a wrong secret, a revoked token and a malformed header
all get the same 401 with ``WWW-Authenticate: Bearer``; a token outside its role or
projects gets 403 before the route runs, so nothing is written.

Cookie-authenticated mutations are checked for CSRF (``csrf``): Fetch Metadata
(``Sec-Fetch-Site`` same-origin or none; without it, ``Origin`` must match ``Host``) and a
custom ``X-Rankwise-CSRF`` header equal to the non-HttpOnly ``rk_csrf`` cookie. GET never
mutates. Bearer requests need no CSRF check: a browser never attaches them by itself.

``Verifier`` caches token rows for ``token_cache_ttl`` seconds (0 in tests), so ingest from
many ranks does not read the database per request, and batches ``last_used`` into one
write per ``token_touch_interval``. A revocation is therefore seen by every server
process within the TTL.
"""

from __future__ import annotations

import hmac
import logging
import re
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Annotated, Any
from urllib.parse import urlsplit

from fastapi import Depends, Request, Security
from fastapi.security import APIKeyCookie, HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool

from .. import tokens as T
from ..store.base import Store
from .encoding import ApiError

SESSION_COOKIE = "rk_session"
CSRF_COOKIE = "rk_csrf"
CSRF_HEADER = "x-rankwise-csrf"
SECURE_PREFIX = "__Host-"  # under TLS: Secure, Path=/, no Domain, set by this origin only
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
QUERY_TOKEN_NAMES = ("token", "write_token", "access_token", "api_key", "apikey")
_CACHE_MAX = 10_000

bearer_scheme = HTTPBearer(
    auto_error=False,
    scheme_name="token",
    description="an API token: rankwise token create --db URL --role ingest|read|write|admin",
)
session_scheme = APIKeyCookie(
    name=SESSION_COOKIE,
    auto_error=False,
    scheme_name="session",
    description="the dashboard's session cookie, set by POST /api/v1/session",
)


class AuthError(ApiError):
    """401 with ``WWW-Authenticate: Bearer``; one body for every way of being wrong."""

    def __init__(self) -> None:
        super().__init__(
            401,
            "authentication required: send a valid token as 'Authorization: Bearer <token>' "
            "(create one with: rankwise token create --db URL --role read), or log in",
        )
        self.headers = {"WWW-Authenticate": 'Bearer realm="rankwise"'}


@dataclass(frozen=True)
class Principal:
    """Who a request acts as. ``token`` None: the unauthenticated local ``rankwise ui``."""

    token: T.TokenInfo | None
    via: str  # "bearer", "session" or "local"

    @property
    def role(self) -> str:
        return self.token.role if self.token is not None else "admin"

    def allows(self, project: str) -> bool:
        return self.token is None or self.token.allows(project)


LOCAL = Principal(None, "local")


class _Miss:
    """``Verifier.verify_cached``'s answer when the store must be asked."""


MISS = _Miss()


class Verifier:
    """Token checks with a short-lived cache of token rows and batched ``last_used``."""

    def __init__(self, store: Store, ttl: float, touch_every: float) -> None:
        self.store = store
        self.ttl = ttl
        self.touch_every = touch_every
        self._cache: dict[str, tuple[T.TokenInfo | None, float]] = {}
        self._used: dict[str, float] = {}
        self._flushed = float("-inf")  # the first use is written at once, later ones batched
        self._lock = threading.Lock()

    def verify_cached(self, token: str) -> T.TokenInfo | _Miss | None:
        """``verify`` from memory alone, or ``MISS`` when that needs the store (the row is
        not cached, or ``last_used`` is due to be written): what the event loop may call
        without blocking on the database."""
        parsed = T.parse(token)
        if parsed is None:
            return None
        role, token_id, secret = parsed
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(token_id) if self.ttl > 0 else None
            if hit is None or hit[1] <= now or now - self._flushed >= self.touch_every:
                return MISS
            if not T.matches(hit[0], role, secret):
                return None
            self._used[token_id] = time.time()
            return hit[0]

    def verify(self, token: str) -> T.TokenInfo | None:
        """The token's row when ``token`` is live and whole, else None."""
        parsed = T.parse(token)
        if parsed is None:
            return None
        role, token_id, secret = parsed
        info = self._lookup(token_id)
        if not T.matches(info, role, secret):
            return None
        self._touch(token_id)
        return info

    def forget(self, token_id: str) -> None:
        with self._lock:
            self._cache.pop(token_id, None)

    def _lookup(self, token_id: str) -> T.TokenInfo | None:
        now = time.monotonic()
        if self.ttl > 0:
            with self._lock:
                hit = self._cache.get(token_id)
            if hit is not None and hit[1] > now:
                return hit[0]
        info = self.store.get_token(token_id)
        if self.ttl > 0:
            with self._lock:
                if len(self._cache) >= _CACHE_MAX:
                    self._cache.clear()  # unknown ids cannot grow memory without bound
                self._cache[token_id] = (info, now + self.ttl)
        return info

    def _touch(self, token_id: str) -> None:
        now = time.monotonic()
        with self._lock:
            self._used[token_id] = time.time()
            if now - self._flushed < self.touch_every:
                return
            used, self._used, self._flushed = self._used, {}, now
        try:
            self.store.touch_tokens(used)
        except Exception:  # bookkeeping: never fail a request because of it
            pass


class _RedactQueryTokens(logging.Filter):
    """Masks ``?token=...`` in uvicorn's access log: refused, yet a client sent it."""

    _PATTERN = re.compile(r"(\b(?:" + "|".join(QUERY_TOKEN_NAMES) + r")=)[^&\s\"]*", re.I)

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(
                self._PATTERN.sub(r"\1<redacted>", a) if isinstance(a, str) else a
                for a in record.args
            )
        return True


def redact_access_log() -> None:
    log = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, _RedactQueryTokens) for f in log.filters):
        log.addFilter(_RedactQueryTokens())


# -- resolving the principal ------------------------------------------------------------


def _refuse_query_tokens(request: Request) -> None:
    if any(name in request.query_params for name in QUERY_TOKEN_NAMES):
        raise ApiError(
            400,
            "tokens are never accepted in a URL (they leak through logs and history): "
            "send 'Authorization: Bearer <token>' instead",
        )


def _cookie(request: Request, name: str) -> str | None:
    """The cookie ``name`` as this origin set it: under TLS only the ``__Host-`` one.

    A ``__Host-`` cookie can only come from this origin over HTTPS; the plain name can be
    planted by a sibling subdomain or a plain-HTTP page of the same host (cookie
    tossing), so accepting it under TLS would give the prefix up.
    """
    if request.url.scheme == "https":
        return request.cookies.get(SECURE_PREFIX + name)
    return request.cookies.get(name)


def session_id(request: Request) -> str | None:
    return _cookie(request, SESSION_COOKIE)


def _session_principal(request: Request, sid: str) -> Principal | None:
    settings = request.app.state.settings
    store: Store = request.app.state.store
    found = store.get_session(sid)
    if found is None:
        return None
    now = time.time()
    if now - found.last_seen > settings.session_idle or now - found.created > settings.session_max:
        return None
    if now - found.last_seen > min(60.0, settings.session_idle / 4):
        store.touch_session(sid, 0.0)
    return Principal(found.token, "session")


async def authenticate(
    request: Request,
    creds: Annotated[HTTPAuthorizationCredentials | None, Security(bearer_scheme)],
    cookie: Annotated[str | None, Security(session_scheme)],
) -> Principal:
    """The request's principal; 401 when it has none. On the event loop: a token whose
    row is cached is checked in memory (``Verifier.verify_cached``, every upload of a
    busy server), anything that reads the store (a token not cached, a session) in a
    worker thread."""
    _refuse_query_tokens(request)
    if not request.app.state.settings.auth:
        if request.method not in SAFE_METHODS:
            check_local_write(request)
        who = LOCAL
    elif "authorization" in request.headers:
        info: T.TokenInfo | None = None
        if creds is not None:
            verifier: Verifier = request.app.state.verifier
            cached = verifier.verify_cached(creds.credentials)
            if isinstance(cached, _Miss):
                info = await run_in_threadpool(verifier.verify, creds.credentials)
            else:
                info = cached
        if info is None:
            raise AuthError()
        who = Principal(info, "bearer")
    else:
        sid = session_id(request)  # ``cookie`` only documents it in the OpenAPI schema
        found = await run_in_threadpool(_session_principal, request, sid) if sid else None
        if found is None:
            raise AuthError()
        if request.method not in SAFE_METHODS:
            check_csrf(request)
        who = found
    request.state.principal = who
    return who


Who = Annotated[Principal, Depends(authenticate)]


async def cached_bearer(request: Request) -> Principal | None:
    """The request's principal when a bearer token whose row is cached settles it on
    the loop, with nothing else to check or read (``authenticate``'s busiest case); None
    when ``authenticate`` must decide (no token, a token in the URL, a miss, a session,
    auth off), so every other case keeps its one answer."""
    if not request.app.state.settings.auth:
        return None
    creds = await bearer_scheme(request)
    if creds is None or any(name in request.query_params for name in QUERY_TOKEN_NAMES):
        return None
    info = request.app.state.verifier.verify_cached(creds.credentials)
    if info is None or isinstance(info, _Miss):
        return None
    who = Principal(info, "bearer")
    request.state.principal = who
    return who


def check_same_origin(request: Request) -> None:
    """Fetch Metadata, else ``Origin``/``Referer`` against ``Host``: 403 when cross-site."""
    site = request.headers.get("sec-fetch-site")
    if site is not None:
        if site not in ("same-origin", "none"):
            raise _forbidden("cross-site request refused")
        return
    origin = request.headers.get("origin") or request.headers.get("referer")
    if origin is None:
        return
    if urlsplit(origin).netloc.lower() != request.headers.get("host", "").lower():
        raise _forbidden("cross-origin request refused")


# Content types a cross-site page may POST without a CORS preflight ("simple" requests).
SIMPLE_TYPES = frozenset(
    ("", "text/plain", "application/x-www-form-urlencoded", "multipart/form-data")
)


def check_local_write(request: Request) -> None:
    """No authentication (``rankwise ui``, ``--insecure-no-auth``): a state-changing
    request must not come from another site. Fetch Metadata or ``Origin`` says where a
    browser request comes from; and a POST must be one no page can send cross-site
    without a preflight (which the server never grants): a non-simple ``Content-Type``
    (JSON, the stream format) or the dashboard's ``X-Rankwise-CSRF`` header. SDK clients
    send neither Fetch Metadata nor ``Origin``, and always a real content type."""
    check_same_origin(request)
    if request.method == "POST" and CSRF_HEADER not in request.headers:
        kind = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if kind in SIMPLE_TYPES:
            raise _forbidden(
                "a POST without a JSON or stream Content-Type is refused on a server without "
                "authentication (a web page could send it): send Content-Type: application/json"
            )


def check_csrf(request: Request) -> None:
    check_same_origin(request)
    sent = request.headers.get(CSRF_HEADER, "")
    kept = _cookie(request, CSRF_COOKIE)
    if not sent or not kept or not hmac.compare_digest(sent.encode(), kept.encode()):
        raise _forbidden(f"missing or wrong {CSRF_HEADER} header (reload the dashboard)")


def _forbidden(why: str) -> ApiError:
    return ApiError(403, why)


# -- policies: one per route ------------------------------------------------------------


def _policy(kind: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def mark(fn: Callable[..., Any]) -> Callable[..., Any]:
        fn.rankwise_policy = kind  # type: ignore[attr-defined]
        return fn

    return mark


@_policy("public")
async def public() -> None:
    """No credentials needed (the dashboard shell, static assets, login)."""


@_policy("authenticated")
async def authenticated(who: Who) -> Principal:
    return who


def _check_project(who: Principal, project: str | None) -> None:
    if project is not None and not who.allows(project):
        raise _forbidden(f"this token may not access project {project!r}")


UPLOAD_ROLES = ("ingest", "admin")


@_policy("ingest")
async def ingest(request: Request, who: Who) -> Principal:
    if who.role not in UPLOAD_ROLES:
        raise _forbidden(f"this {who.role} token cannot upload: use an ingest token")
    # /ingest names the project in its query, the blob routes in their path.
    _check_project(who, request.query_params.get("project"))
    _check_project(who, request.path_params.get("project"))
    return who


@_policy("read")
async def read(request: Request, who: Who) -> Principal:
    if who.role not in ("read", "write", "admin"):
        raise _forbidden(f"this {who.role} token cannot read: use a read token")
    _check_project(who, request.path_params.get("project"))
    return who


@_policy("write")
async def write(request: Request, who: Who) -> Principal:
    """Editing runs (name, tags, notes, group, job type): a write token of the project,
    an ingest token of it (what writes its runs) or an admin token."""
    if who.role not in ("write", "ingest", "admin"):
        raise _forbidden(
            f"this {who.role} token cannot edit runs: only a writer of the project may, a "
            "write token of it (rankwise token create --role write --project P), its ingest "
            "token or an admin token"
        )
    _check_project(who, request.path_params.get("project"))
    return who


@_policy("delete")
async def delete(request: Request, who: Who) -> Principal:
    """Deleting, restoring and purging runs: a write token of the project or an admin
    token (never an ingest token: a leaked training token must not erase runs)."""
    if who.role not in ("write", "admin"):
        raise _forbidden(
            f"this {who.role} token cannot delete runs: only a writer of the project may, a "
            "write token of it (rankwise token create --role write --project P), or an admin"
        )
    _check_project(who, request.path_params.get("project"))
    return who


@_policy("read_or_ingest")
async def read_or_ingest(request: Request, who: Who) -> Principal:
    """Artifact file downloads: any token of the project, read, write or ingest (a
    training job fetches the model it uses with its ingest token). Nothing is written."""
    if who.role not in ("read", "write", "ingest", "admin"):
        raise _forbidden(f"this {who.role} token cannot fetch files: use a read token")
    _check_project(who, request.path_params.get("project"))
    return who


@_policy("admin")
async def admin(who: Who) -> Principal:
    if who.role != "admin":
        raise _forbidden("only an admin token may do this")
    return who


def may_write(who: Principal, project: str) -> bool:
    """Whether ``who`` may edit what people make in ``project`` (reports): a write token
    of the project, or an admin (the local ``rankwise ui`` acts as admin)."""
    return who.role in ("write", "admin") and who.allows(project)


def check_projects(request: Request, projects: Iterable[str]) -> None:
    """403 unless the request's principal may read every one of ``projects``."""
    who: Principal = request.state.principal
    for project in projects:
        _check_project(who, project)


def visible(request: Request, projects: Iterable[str]) -> list[str]:
    """The ``projects`` the request's principal may see."""
    who: Principal = request.state.principal
    return [p for p in projects if who.allows(p)]


def policy_of(dependencies: Iterable[Any]) -> list[str]:
    """The policies among a route's dependency callables (for the route-walk test)."""
    return [c.rankwise_policy for c in dependencies if hasattr(c, "rankwise_policy")]
