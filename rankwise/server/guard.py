"""Connections before authentication: a header deadline, a connection cap, quiet EMFILE.

uvicorn starts no timer on a connection until a response is complete, and any byte
cancels its keep-alive timer: a client that opens sockets and sends half a request
holds them forever, before a token is ever looked at, until the process runs out of
file descriptors (and then logs every failed ``accept``). ``GuardedH11Protocol`` is
uvicorn's h11 protocol with three guards:

* **Header deadline.** From the moment a connection opens, or the first byte of a next
  request on a kept-alive one, its request line and headers must arrive within
  ``header_timeout`` seconds; otherwise it gets 408 and is closed. Bodies have their own
  deadline where they are read (``ServerSettings.body_deadline`` for uploads).
* **Connection cap.** Past ``max_connections`` open connections a new one is closed at
  once (with 503): it costs a file descriptor for a moment, never for long. The default
  stays below the process's descriptor limit, leaving room for the database, blobs and
  logs.
* **Quiet accept errors.** ``install_accept_log`` makes the event loop log an accept
  failure (EMFILE, ENFILE, ENOBUFS) once per ``ACCEPT_LOG_INTERVAL`` seconds with a
  count, instead of a traceback per attempt.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

HEADER_TIMEOUT = 10.0
# Descriptors kept free of client connections (database, blob files, logs, the pool).
FD_RESERVE = 128
MAX_CONNECTIONS = 10_000
ACCEPT_LOG_INTERVAL = 60.0

_log = logging.getLogger("rankwise.server")


def _reply(status: str, text: str, *extra: str) -> bytes:
    """A whole HTTP/1.1 reply that closes the connection (written before any h11 state)."""
    body = text.encode()
    head = [f"HTTP/1.1 {status}", "content-type: text/plain", "connection: close", *extra]
    head.append(f"content-length: {len(body)}")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


_TIMEOUT = _reply("408 Request Timeout", "request headers did not arrive in time")
_FULL = _reply("503 Service Unavailable", "too many connections: retry", "retry-after: 1")


def connection_cap(wanted: int = MAX_CONNECTIONS) -> int:
    """``wanted``, lowered to leave ``FD_RESERVE`` descriptors under this process's
    limit (and never under 16)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return wanted
    return max(16, min(wanted, soft - FD_RESERVE))


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a header deadline and a connection cap (see the
    module). ``guarded(header_timeout, max_connections)`` makes one with other limits."""

    header_timeout: float = HEADER_TIMEOUT
    max_connections: int = MAX_CONNECTIONS

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_timer: asyncio.TimerHandle | None = None
        self._waiting_since: object = None  # the cycle in place when the timer was armed

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > connection_cap(self.max_connections):
            transport.write(_FULL)
            transport.close()
            return
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self._header_timer is None and (self.cycle is None or self.cycle.response_complete):
            self._arm()  # the first bytes of a next request on a kept-alive connection
        super().data_received(data)
        if self._header_timer is not None and self.cycle is not self._waiting_since:
            self._disarm()  # its request line and headers are in

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._waiting_since = self.cycle
        self._header_timer = self.loop.call_later(self.header_timeout, self._too_slow)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _too_slow(self) -> None:
        self._header_timer = None
        if not self.transport.is_closing():
            self.transport.write(_TIMEOUT)
            self.transport.close()


def guarded(header_timeout: float, max_connections: int) -> type[GuardedH11Protocol]:
    """A ``GuardedH11Protocol`` with these limits (for ``uvicorn.Config(http=...)``)."""
    return type(
        "GuardedH11Protocol",
        (GuardedH11Protocol,),
        {"header_timeout": header_timeout, "max_connections": max_connections},
    )


def install_accept_log(
    loop: asyncio.AbstractEventLoop, interval: float = ACCEPT_LOG_INTERVAL
) -> None:
    """Log the event loop's accept failures once per ``interval`` seconds, with a count;
    every other error goes to the handler that was there before."""
    previous = loop.get_exception_handler()
    state = {"last": -interval, "count": 0}

    def handle(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if str(context.get("message", "")).startswith("socket.accept() out of system resource"):
            state["count"] += 1
            now = time.monotonic()
            if now - state["last"] >= interval:
                _log.error(
                    "rankwise server: cannot accept connections (%s), %d time(s) since the "
                    "last report: raise the file limit (ulimit -n) or lower the connection cap",
                    context.get("exception"),
                    state["count"],
                )
                state["last"], state["count"] = now, 0
            return
        if previous is not None:
            previous(loop, context)
        else:
            loop.default_exception_handler(context)

    loop.set_exception_handler(handle)
