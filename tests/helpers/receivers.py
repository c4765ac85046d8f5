"""Real alert receivers for tests: a tiny HTTP webhook server and a local SMTP server.

``WebhookReceiver`` records every POST (path, headers, JSON body) and answers
``status`` (a test sets it to 500 to play a failing receiver, then back to 200). A POST
whose sender was gone before its answer (a server SIGKILLed mid-send) is recorded as
not answered: for the sender it was never delivered, and sending it again is right, so
``accepted`` leaves it out.
``SmtpReceiver`` is aiosmtpd's own server on a port chosen up front, so a test can name
the port in a destination before the server is up (a receiver that is down).
"""

from __future__ import annotations

import json
import select
import socket
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .env import free_port


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    raw: bytes
    status: int  # what the receiver answered
    answered: bool = True  # False: the sender was gone before the answer reached it

    @property
    def body(self) -> Any:
        return json.loads(self.raw)


@dataclass
class WebhookReceiver:
    status: int = 200
    port: int = field(default_factory=free_port)
    got: list[Received] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> WebhookReceiver:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(n)
                with outer._lock:
                    status = outer.status
                    got = Received(self.path, dict(self.headers), raw, status)
                    outer.got.append(got)
                if _peer_closed(self.connection):
                    got.answered = False
                    return
                try:
                    self.send_response(status)
                    self.send_header("Content-Length", "2")
                    self.end_headers()
                    self.wfile.write(b"ok")
                except OSError:  # the sender died while it was answered
                    got.answered = False

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def accepted(self, path: str | None = None) -> list[Received]:
        """The requests answered 2xx (at ``path``)."""
        with self._lock:
            return [
                r
                for r in self.got
                if 200 <= r.status < 300 and r.answered and (path is None or r.path == path)
            ]

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


@dataclass
class SmtpReceiver:
    port: int = field(default_factory=free_port)
    messages: list[Any] = field(default_factory=list)

    def start(self) -> SmtpReceiver:
        from aiosmtpd.controller import Controller
        from aiosmtpd.handlers import Message

        outer = self

        class Keep(Message):
            def handle_message(self, message: Any) -> None:
                outer.messages.append(message)

        self._controller = Controller(Keep(), hostname="127.0.0.1", port=self.port)
        self._controller.start()
        return self

    def stop(self) -> None:
        controller = getattr(self, "_controller", None)
        if controller is not None:
            self._controller = None  # type: ignore[assignment]  # stopped: not again
            controller.stop()


def _peer_closed(sock: socket.socket) -> bool:
    """Whether the sender has closed its end (a killed process's sockets are closed by
    its kernel): readable with nothing to read."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
        return bool(readable) and sock.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True
