"""A minimal HTTP/1.1 keep-alive client on asyncio streams, for the load harness.

A thousand simulated ranks in a few client processes must cost the machine less than the
server they load: httpx's async client spends more CPU per request than the server's
ingest of it (its connection pool and per-request machinery). This sends the same bytes
an SDK uploader sends (method, path and query, headers, body) over one persistent
connection per server and reads ``Content-Length`` replies, which is all the ingest
route answers with. Any transport problem closes the connection; the next request opens
a new one.
"""

from __future__ import annotations

import asyncio
from urllib.parse import urlencode, urlsplit


class HttpError(Exception):
    """A transport failure (refused, reset, timed out, a torn reply)."""


class Reply:
    __slots__ = ("body", "headers", "status")

    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status, self.headers, self.body = status, headers, body


class Connection:
    """One keep-alive connection to ``base`` (``http://host:port``)."""

    def __init__(self, base: str, timeout: float = 30.0) -> None:
        parts = urlsplit(base)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80
        self.authority = f"{self.host}:{self.port}".encode()
        self.timeout = timeout
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def post(
        self, path: str, params: dict[str, str], headers: dict[str, str], body: bytes
    ) -> Reply:
        try:
            return await asyncio.wait_for(self._post(path, params, headers, body), self.timeout)
        except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError, ValueError) as exc:
            self.close()
            name = "ReadTimeout" if isinstance(exc, asyncio.TimeoutError) else type(exc).__name__
            raise HttpError(name) from exc

    async def _post(
        self, path: str, params: dict[str, str], headers: dict[str, str], body: bytes
    ) -> Reply:
        if self._writer is None or self._writer.is_closing() or self._reader.at_eof():
            self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
        assert self._reader is not None and self._writer is not None
        head = [f"POST {path}?{urlencode(params)} HTTP/1.1".encode(), b"Host: " + self.authority]
        head += [f"{k}: {v}".encode() for k, v in headers.items()]
        head.append(f"Content-Length: {len(body)}".encode())
        self._writer.write(b"\r\n".join(head) + b"\r\n\r\n" + body)
        await self._writer.drain()
        raw = await self._reader.readuntil(b"\r\n\r\n")
        lines = raw.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        got: dict[str, str] = {}
        for line in lines[1:]:
            if line:
                k, _, v = line.partition(":")
                got[k.strip().lower()] = v.strip()
        size = int(got.get("content-length", "0"))
        data = await self._reader.readexactly(size) if size else b""
        if got.get("connection", "").lower() == "close":
            self.close()
        return Reply(status, got, data)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._reader = self._writer = None
