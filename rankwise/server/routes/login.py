"""Dashboard sessions (``/session``) and token management (``/tokens``, admin only).

``POST /session`` takes a read, write or admin token in the JSON body (never the URL), checks it
like a Bearer token, and sets two cookies: the session (a random 256-bit id, stored
hashed, ``HttpOnly; SameSite=Strict; Path=/``, ``Secure`` with the ``__Host-`` prefix
under TLS) and ``rk_csrf`` (readable by the page, echoed in ``X-Rankwise-CSRF`` on every
mutation). Sessions end after ``session_idle`` seconds unused or ``session_max`` seconds
in all, on logout, or when their token is revoked. Login itself is checked for
cross-site requests and needs the custom header, so a foreign page cannot log a browser
in with its own token.
"""

from __future__ import annotations

import secrets
from typing import Annotated, Any, Literal

import msgspec
from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, ConfigDict, Field, StringConstraints
from starlette.responses import Response

from ... import names
from ... import tokens as T
from ...errors import UsageError
from ...store.tokens import check_new_token
from ...wire.auth import NewTokenReply, TokenRow, TokensReply, WhoAmI
from .. import auth
from ..encoding import ApiError, reply
from .deps import answers, refusal

router = APIRouter(tags=["auth"])


class Login(BaseModel):
    token: str = Field(
        max_length=200, description="a read, write or admin token (rk_r_…, rk_w_… or rk_a_…)"
    )


ProjectName = Annotated[str, StringConstraints(pattern=names.ID_CHARS_PATTERN)]


class NewScopedToken(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: Literal["ingest", "read", "write"]
    projects: list[ProjectName] | None = Field(
        None, min_length=1, description="null or absent: every project"
    )
    name: str = Field("", max_length=200)


class NewAdminToken(BaseModel):
    """An admin token always covers every project, so it names none (the schema says so,
    rather than a 422 after the fact)."""

    model_config = ConfigDict(extra="forbid")

    role: Literal["admin"]
    projects: None = Field(None, description="an admin token covers every project")
    name: str = Field("", max_length=200)


NewTokenRequest = Annotated[NewScopedToken | NewAdminToken, Field(discriminator="role")]


def _who(request: Request, p: auth.Principal) -> WhoAmI:
    info = p.token
    settings = request.app.state.settings
    return WhoAmI(
        auth=settings.auth,
        local=settings.tails_dir is not None,
        role=p.role,
        projects=None if info is None or info.projects is None else list(info.projects),
        name=info.name if info is not None else "",
        via=p.via,
    )


def _row(info: T.TokenInfo) -> TokenRow:
    return TokenRow(
        id=info.id,
        role=info.role,
        name=info.name,
        projects=None if info.projects is None else list(info.projects),
        created=info.created,
        last_used=info.last_used,
        revoked=info.revoked,
    )


_401: dict[int | str, dict[str, Any]] = {401: refusal("no valid credentials")}
_403: dict[int | str, dict[str, Any]] = {403: refusal("role or project not allowed")}


@router.get("/session", response_model=None, responses={**answers(WhoAmI), **_401})
def whoami(
    request: Request, who: Annotated[auth.Principal, Depends(auth.authenticated)]
) -> Response:
    """Who this request acts as (the dashboard asks on load; 401 sends it to login)."""
    return reply(request, _who(request, who))


@router.post(
    "/session",
    response_model=None,
    responses={**answers(WhoAmI), **_401, **_403},
    dependencies=[Depends(auth.public)],
)
def login(request: Request, body: Login) -> Response:
    """Log the dashboard in with a read, write or admin token: sets the session cookies."""
    auth.check_same_origin(request)
    if not request.headers.get(auth.CSRF_HEADER):
        raise ApiError(403, f"login needs the {auth.CSRF_HEADER} header (use the dashboard)")
    settings = request.app.state.settings
    if not settings.auth:
        return reply(request, _who(request, auth.LOCAL))
    info = request.app.state.verifier.verify(body.token)
    if info is None:
        raise auth.AuthError()
    if info.role == "ingest":
        raise ApiError(403, "an ingest token cannot log in: use a read, write or admin token")
    sid = secrets.token_urlsafe(32)
    request.app.state.store.create_session(sid, info.id)
    response = reply(request, _who(request, auth.Principal(info, "session")))
    secure = request.url.scheme == "https"
    prefix = auth.SECURE_PREFIX if secure else ""
    common: dict[str, Any] = {"path": "/", "secure": secure, "samesite": "strict"}
    response.set_cookie(
        prefix + auth.SESSION_COOKIE,
        sid,
        max_age=int(settings.session_max),
        httponly=True,
        **common,
    )
    response.set_cookie(
        prefix + auth.CSRF_COOKIE,
        secrets.token_urlsafe(32),
        max_age=int(settings.session_max),
        **common,
    )
    return response


@router.delete("/session", status_code=204, dependencies=[Depends(auth.public)])
def logout(request: Request) -> Response:
    """End this browser's session (and forget its cookies)."""
    auth.check_same_origin(request)
    sid = auth.session_id(request)
    if sid:
        request.app.state.store.revoke_session(sid)
    response = Response(status_code=204)
    for name in (auth.SESSION_COOKIE, auth.CSRF_COOKIE):
        for prefix in ("", auth.SECURE_PREFIX):
            response.delete_cookie(prefix + name, path="/", secure=bool(prefix), samesite="strict")
    return response


@router.get(
    "/tokens",
    response_model=None,
    responses={**answers(TokensReply), **_401, **_403},
    dependencies=[Depends(auth.admin)],
)
def list_tokens(request: Request) -> Response:
    """Every token (live and revoked), without secrets."""
    rows = [_row(t) for t in request.app.state.store.list_tokens()]
    return reply(request, TokensReply(tokens=rows))


@router.post(
    "/tokens",
    response_model=None,
    responses={**answers(NewTokenReply), **_401, **_403},
    dependencies=[Depends(auth.admin)],
)
def create_token(request: Request, body: NewTokenRequest) -> Response:
    """Create a token; the reply holds it, once."""
    try:
        check_new_token(body.role, body.projects)
    except UsageError as exc:  # the store's argument errors: the fix is the caller's
        raise ApiError(422, str(exc)) from None
    new = request.app.state.store.create_token(body.role, body.projects, body.name)
    row = msgspec.structs.asdict(_row(new.info))
    return reply(request, NewTokenReply(**row, token=new.value))


@router.delete(
    "/tokens/{token_id}",
    status_code=204,
    responses={**_401, **_403, 404: refusal("no live token")},
    dependencies=[Depends(auth.admin)],
)
def revoke_token(request: Request, token_id: str) -> Response:
    """Revoke a token and end its dashboard sessions."""
    if not request.app.state.store.revoke_token(token_id):
        raise ApiError(404, "no live token with that id")
    request.app.state.verifier.forget(token_id)
    return Response(status_code=204)
