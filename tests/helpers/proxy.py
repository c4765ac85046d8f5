"""A tiny TCP proxy that a test can cut and restore: a network failure, not a mock.

``TcpProxy(target_port)`` listens on a free loopback port of its own and forwards bytes
both ways. ``cut()`` closes the listener and resets every open connection (an upload in
flight sees its connection reset); ``restore()`` listens again on the same port.

Plain threads and blocking sockets, each socket closed by the one thread that owns it.
(An asyncio version leaked a socket now and then: a connection accepted in the same turn
as the listener's close fails to become a transport, and nobody closes it; the test then
failed on the ResourceWarning.)
"""

from __future__ import annotations

import socket
import struct
import threading
import time

from .servers import free_port

_RESET = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 s: the close sends a reset


class TcpProxy:
    def __init__(self, target_port: int, host: str = "127.0.0.1") -> None:
        self.host, self.target_port = host, target_port
        self.port = free_port()
        self.url = f"http://{host}:{self.port}"
        self.cuts = 0
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None
        self._acceptor: threading.Thread | None = None
        self._open: set[socket.socket] = set()  # every socket of a live connection
        self._pipes: set[threading.Thread] = set()
        self.restore()

    def restore(self) -> None:
        with self._lock:
            if self._listener is not None:
                return
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind((self.host, self.port))
            listener.listen(128)
            listener.settimeout(0.05)  # how soon the acceptor sees a cut
            self._listener = listener
            self._acceptor = threading.Thread(target=self._accept, args=(listener,), daemon=True)
            self._acceptor.start()

    def cut(self) -> None:
        self.cuts += 1
        self._cut()

    def close(self) -> None:
        self._cut()
        with self._lock:
            pipes = list(self._pipes)
        deadline = time.monotonic() + 10  # reset, every pipe ends at once
        for t in pipes:
            t.join(max(0.0, deadline - time.monotonic()))

    def _cut(self) -> None:
        with self._lock:
            self._listener, acceptor = None, self._acceptor
            self._acceptor = None
            doomed = list(self._open)
            self._open.clear()
        if acceptor is not None:
            acceptor.join(10)  # it closes the listener: the port is free to listen again
        for s in doomed:  # their pipes see the reset, end, and close them
            _reset(s)

    def _accept(self, listener: socket.socket) -> None:
        try:
            while self._listener is listener:
                try:
                    conn, _ = listener.accept()
                except TimeoutError:
                    continue
                except OSError:
                    return
                conn.settimeout(None)
                with self._lock:
                    if self._listener is not listener:  # cut while it was accepted
                        _reset(conn)
                        conn.close()
                        return
                    self._open.add(conn)
                    pipe = threading.Thread(target=self._pipe, args=(conn,), daemon=True)
                    self._pipes.add(pipe)
                pipe.start()
        finally:
            listener.close()

    def _pipe(self, conn: socket.socket) -> None:
        up: socket.socket | None = None
        try:
            try:
                up = socket.create_connection((self.host, self.target_port), timeout=5)
                up.settimeout(None)
            except OSError:
                return
            with self._lock:
                if conn not in self._open:  # cut while the target's connection opened
                    return
                self._open.add(up)
            back = threading.Thread(target=_pump, args=(up, conn), daemon=True)
            back.start()
            _pump(conn, up)
            back.join()
        finally:
            with self._lock:
                self._open.discard(conn)
                if up is not None:
                    self._open.discard(up)
                self._pipes.discard(threading.current_thread())
            for s in (conn, up):
                if s is not None:
                    s.close()


def _pump(src: socket.socket, dst: socket.socket) -> None:
    """Bytes from src to dst until either side ends; then both ends are shut, so the
    pump the other way ends too."""
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    for s in (src, dst):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def _reset(s: socket.socket) -> None:
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RESET)
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
