"""Request bodies: whose they are (``sender``: the ingest route's receiving slots, per
sender) and reading one under a size cap and a deadline, never holding more than the cap."""

from __future__ import annotations

import asyncio

from starlette.requests import Request

from .encoding import ApiError
from .upload import too_large


async def read_body(request: Request, limit: int, deadline: float) -> bytes:
    """The raw body within ``deadline`` seconds (408), refusing (413) as soon as it is
    known to be over ``limit``."""
    try:
        return await asyncio.wait_for(_read(request, limit), deadline)
    except TimeoutError:
        raise ApiError(
            408, f"the upload body did not arrive within {deadline:g} s: send it at once"
        ) from None


async def _read(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _too_large(int(declared), limit)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _too_large(size, limit)
        chunks.append(chunk)
    return b"".join(chunks)


def _too_large(size: int, limit: int) -> ApiError:
    refused = too_large(size, limit)
    return ApiError(refused.status, refused.message)


def sender(request: Request) -> str:
    """Whose receiving slots a request counts against: its token, else its address."""
    token = getattr(getattr(request.state, "principal", None), "token", None)
    if token is not None:
        return "t:" + str(token.id)
    return "a:" + (request.client.host if request.client is not None else "")
