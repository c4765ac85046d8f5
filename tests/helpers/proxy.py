"""A tiny TCP proxy that a test can cut and restore: a network failure, not a mock.

``TcpProxy(target_port)`` listens on a free loopback port of its own and forwards bytes
both ways. ``cut()`` closes the listener and aborts every open connection (an upload in
flight sees its connection reset); ``restore()`` listens again on the same port.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from .servers import free_port


class TcpProxy:
    def __init__(self, target_port: int, host: str = "127.0.0.1") -> None:
        self.host, self.target_port = host, target_port
        self.port = free_port()
        self.url = f"http://{host}:{self.port}"
        self.cuts = 0
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.base_events.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self.restore()

    def _call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(10)

    def restore(self) -> None:
        self._call(self._listen())

    def cut(self) -> None:
        self.cuts += 1
        self._call(self._cut())

    def close(self) -> None:
        self._call(self._shutdown())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()

    async def _shutdown(self) -> None:
        await self._cut()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for _ in range(3):  # the aborted transports close their sockets in the next turns
            await asyncio.sleep(0)

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(
            self._pipe_client, self.host, self.port, reuse_address=True
        )

    async def _cut(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        for w in list(self._writers):
            w.transport.abort()
        self._writers.clear()

    async def _pipe_client(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        # Held from the moment it is accepted: a cut (or the shutdown's cancel) while the
        # target's connection opens must close it too, or it leaks (a ResourceWarning).
        self._writers.add(writer)
        up_w: asyncio.StreamWriter | None = None
        try:
            try:
                up_r, up_w = await asyncio.open_connection(self.host, self.target_port)
            except OSError:
                return
            self._writers.add(up_w)
            await asyncio.gather(_pump(reader, up_w), _pump(up_r, writer))
        finally:
            for w in (writer, up_w):
                if w is not None:
                    w.transport.abort()
                    self._writers.discard(w)


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        writer.transport.abort()
