"""Request bodies: whose they are (``sender``: the ingest route's receiving slots, per
sender), reading one under a size cap and a deadline, and undoing its Content-Encoding
(``decode_body``, a refusal being ``upload.UploadRefused``), never holding more than the
cap."""

from __future__ import annotations

import asyncio
import zlib

from starlette.requests import Request

from .encoding import ApiError
from .upload import UploadRefused, too_large


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


def decode_body(raw: bytes, encoding: str, limit: int) -> bytes:
    """Undo ``Content-Encoding`` without ever holding more than ``limit`` bytes."""
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        return raw
    try:
        if encoding in ("gzip", "x-gzip", "deflate"):
            wbits = zlib.MAX_WBITS | (16 if "gzip" in encoding else 0)
            inflater = zlib.decompressobj(wbits)
            out = inflater.decompress(raw, limit + 1)
            if len(out) > limit or inflater.unconsumed_tail:
                raise too_large(len(out), limit)
            if inflater.unused_data or not inflater.eof:
                # A second member or a truncated one: never apply part of a body.
                raise UploadRefused(422, "body is not valid data for its Content-Encoding")
            return out
        if encoding == "zstd":
            try:
                import zstandard
            except ImportError:
                raise UploadRefused(
                    415, "this server cannot read zstd (pip install zstandard); send gzip"
                ) from None
            reader = zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)
            out = reader.read(limit + 1)
            while len(out) <= limit:
                more = reader.read(limit + 1 - len(out))
                if not more:
                    break
                out += more
            if len(out) > limit:
                raise too_large(len(out), limit)
            return out
    except (zlib.error, ValueError):
        raise UploadRefused(422, "body is not valid data for its Content-Encoding") from None
    except Exception as exc:
        if type(exc).__name__ == "ZstdError":
            raise UploadRefused(422, "body is not valid data for its Content-Encoding") from None
        raise
    raise UploadRefused(415, "unknown Content-Encoding: send gzip, deflate, zstd or identity")
