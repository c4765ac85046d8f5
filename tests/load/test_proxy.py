"""The proxy that the network fault tests cut: cut and restored under traffic, it leaks
no socket (the suite turns a ResourceWarning into a failure, as it did once in CI)."""

from __future__ import annotations

import gc
import socket
import threading
import time

from tests.helpers.proxy import TcpProxy

ROUNDS = 6


def _echo_server() -> tuple[socket.socket, threading.Event]:
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.05)
    done = threading.Event()

    def serve() -> None:
        while not done.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(1.0)  # a silent peer never holds the echo's one thread
                try:
                    conn.sendall(conn.recv(100))
                except OSError:
                    pass

    threading.Thread(target=serve, daemon=True).start()
    return listener, done


def test_cuts_under_traffic_reset_connections_and_leak_nothing() -> None:
    listener, done = _echo_server()
    echoed, refused = 0, 0
    try:
        for _ in range(ROUNDS):
            proxy = TcpProxy(listener.getsockname()[1])
            stop = threading.Event()

            def hammer(port: int, stop: threading.Event) -> None:
                nonlocal echoed, refused
                while not stop.is_set():
                    try:
                        with socket.create_connection(("127.0.0.1", port), 1) as s:
                            s.sendall(b"ping")
                            echoed += s.recv(10) == b"ping"
                    except OSError:
                        refused += 1

            clients = [threading.Thread(target=hammer, args=(proxy.port, stop)) for _ in range(3)]
            for c in clients:
                c.start()
            time.sleep(0.03)
            proxy.cut()
            time.sleep(0.01)
            proxy.restore()
            time.sleep(0.03)
            proxy.close()
            stop.set()
            for c in clients:
                c.join()
            assert proxy.cuts == 1
            gc.collect()  # a leaked socket warns here, and the test fails
    finally:
        done.set()
        listener.close()
    assert echoed > 0 and refused > 0
