"""The one network seam of the client side: an httpx client for a rankwise server.

The uploader (``rankwise.sdk.uploader``), ``rankwise sync`` and ``Api(server=...)`` all
talk to the server through ``make_client``; tests swap the wire by passing an httpx
transport (``httpx.MockTransport``), while the integration tests run a real uvicorn.

The wire's names (content type, headers) live in ``rankwise.stream.wire``, which the
server imports too. This module imports httpx, so it is itself imported lazily:
``import rankwise`` must not pull in any network library.
"""

from __future__ import annotations

import gzip
import os
from typing import Any

import httpx
import msgspec

from ._version import __version__
from .errors import RunNotFoundError, ServerError, UsageError
from .stream.wire import MSGPACK as MSGPACK
from .stream.wire import STREAM_CONTENT_TYPE as STREAM_CONTENT_TYPE
from .stream.wire import UPLOAD_INTERVAL_HEADER as UPLOAD_INTERVAL_HEADER

KEEPALIVE_EXPIRY = 60.0  # seconds an idle connection to the server is kept
MAX_ADVISED_INTERVAL = 60.0  # an uploader never waits longer than this on the advice


def advised_interval(value: str | None) -> float:
    """The seconds an ``UPLOAD_INTERVAL_HEADER`` value asks for (0: none or unreadable)."""
    if not value:
        return 0.0
    try:
        seconds = float(value)
    except ValueError:
        return 0.0
    if seconds != seconds or seconds <= 0:  # NaN, zero, negative
        return 0.0
    return min(seconds, MAX_ADVISED_INTERVAL)


def normalize_url(url: str) -> str:
    """``host:port`` or a full URL, without a trailing slash; ``http://`` when no scheme."""
    url = url.strip()
    if not url:
        raise UsageError("the server URL is empty: pass e.g. server='http://127.0.0.1:8585'")
    if "://" not in url:
        url = "http://" + url
    if not url.startswith(("http://", "https://")):
        raise UsageError(f"server URL {url!r} must start with http:// or https://")
    return url.rstrip("/")


def make_client(
    url: str,
    *,
    transport: httpx.BaseTransport | None = None,
    timeout: float = 30.0,
    connect_timeout: float = 5.0,
    token: str | None = None,
) -> httpx.Client:
    """A client for the server at ``url``; ``transport`` replaces the network in tests.

    ``token`` (else ``RANKWISE_TOKEN``) goes in the ``Authorization`` header of every
    request: never in a URL, and httpx keeps it out of its logs and reprs.
    """
    headers = {"User-Agent": f"rankwise/{__version__}"}
    token = token or os.environ.get("RANKWISE_TOKEN") or None
    if token:
        headers["Authorization"] = f"Bearer {token.strip()}"
    return httpx.Client(
        base_url=normalize_url(url),
        transport=transport,
        timeout=httpx.Timeout(timeout, connect=min(connect_timeout, timeout)),
        headers=headers,
        # Uploads come every 1-10 s (rankwise.server.pacing): keep the connection between
        # them, under the server's own keep-alive (rankwise.server.serve.KEEP_ALIVE).
        limits=httpx.Limits(keepalive_expiry=KEEPALIVE_EXPIRY),
        # Environment proxies would route loopback and cluster-internal servers through
        # a corporate proxy; a tracking server is reached directly.
        trust_env=False,
    )


def error_message(response: httpx.Response) -> str:
    """The ``{"error": {"message": ...}}`` of a rankwise error reply, or the raw text."""
    body = error_body(response)
    message = body.get("message")
    if isinstance(message, str):
        return message
    text = response.text.strip()
    return text[:300] if text else response.reason_phrase


def error_body(response: httpx.Response) -> dict[str, Any]:
    try:
        data = decode(response)
    except Exception:
        return {}
    if isinstance(data, dict) and isinstance(data.get("error"), dict):
        return data["error"]  # type: ignore[no-any-return]
    return {}


def decode(response: httpx.Response) -> Any:
    """The body as Python objects, MessagePack (NaN and Inf exact) or JSON."""
    ctype = response.headers.get("content-type", "")
    if ctype.startswith(MSGPACK):
        return msgspec.msgpack.decode(response.content)
    return msgspec.json.decode(response.content)


def get_msgpack(client: httpx.Client, path: str, params: Any = None) -> Any:
    """GET a read endpoint as MessagePack; raises ``RunNotFoundError`` on 404."""
    try:
        response = client.get(path, params=params, headers={"Accept": MSGPACK})
    except httpx.HTTPError as exc:
        raise ServerError(f"cannot reach the rankwise server at {client.base_url}: {exc}") from exc
    return _checked(response)


def post_msgpack(client: httpx.Client, path: str, body: Any) -> Any:
    try:
        response = client.post(path, json=body, headers={"Accept": MSGPACK})
    except httpx.HTTPError as exc:
        raise ServerError(f"cannot reach the rankwise server at {client.base_url}: {exc}") from exc
    return _checked(response)


def check_reply(response: httpx.Response) -> Any:
    """The decoded body of a read reply; raises the error a status means."""
    return _checked(response)


def _checked(response: httpx.Response) -> Any:
    if response.status_code in (401, 403):
        raise ServerError(
            f"the rankwise server refused this request ({response.status_code}: "
            f"{error_message(response)}): pass a read token as Api(server=..., token=...) "
            "or set RANKWISE_TOKEN"
        )
    if response.status_code == 404:
        raise RunNotFoundError(error_message(response))
    if response.status_code == 422:
        raise UsageError(error_message(response))
    if response.status_code >= 400:
        raise ServerError(
            f"the rankwise server answered {response.status_code}: {error_message(response)}"
        )
    return decode(response)


def default_encoding() -> str:
    """How an upload body is compressed: zstd when zstandard is installed, else gzip."""
    try:
        import zstandard  # noqa: F401
    except ImportError:
        return "gzip"
    return "zstd"


def compress(data: bytes, encoding: str) -> bytes:
    """An upload body in ``encoding`` (zstd, gzip or identity: sent as it is)."""
    if encoding == "zstd":
        import zstandard

        return zstandard.ZstdCompressor(level=3).compress(data)
    if encoding == "gzip":
        return gzip.compress(data, compresslevel=5, mtime=0)
    return data
