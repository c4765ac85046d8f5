"""Remote mode: a surviving process uploads what a dead sibling left in its stream file.

A process killed with SIGKILL (or by the OOM killer) cannot upload its last frames: its
uploader dies with it, and the server stays short of the file until someone runs
``rankwise sync``. Its siblings on the same node share the data directory, and a stream
file says whose it is (its first record, ``StreamStart``), so a survivor can finish the
upload for it through the same path as ``rankwise sync`` (``StreamUpload``: resume from
the server's mark, whole frames, advance on acknowledgement).

Why this is safe: a sibling's file is adopted only when its writer is provably gone (same
host, its pid dead or reused, ``rankwise.stream.fold.process_alive``), so the file no
longer grows; the server applies each record once however many survivors send it. A
process on another host cannot be checked and is left alone. Survivors adopt at their
own end when the job is going down (their state is not ``finished``) — the moment a
launcher tears a job down after a crash — within the time left of their finish deadline.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from .. import _log
from ..stream.files import SUFFIX, read_stream_start
from ..stream.fold import process_alive
from .retry import GiveUp, Retry
from .uploader import BATCH_BYTES, StreamUpload, stream_ref

if TYPE_CHECKING:
    import httpx


def dead_siblings(own: Path) -> list[Path]:
    """Stream files next to ``own`` whose writer is known to be dead (same host)."""
    out = []
    for path in sorted(own.parent.glob(f"*{SUFFIX}")):
        if path == own:
            continue
        start = read_stream_start(path)
        if start is None:
            continue
        if process_alive(start.host, start.pid, start.pid_start_time) is False:
            out.append(path)
    return out


def adopt(
    server: str,
    own: Path,
    deadline: float,
    transport: httpx.BaseTransport | None = None,
) -> int:
    """Upload the dead siblings' remaining frames until ``deadline`` (monotonic).

    Returns the bytes sent. Never raises: a failure leaves the files for ``rankwise sync``.
    """
    from .. import _http

    sent = 0
    try:
        siblings = dead_siblings(own)
        if not siblings:
            return 0
        with _http.make_client(server, transport=transport) as client:
            for path in siblings:
                if time.monotonic() >= deadline:
                    break
                up = StreamUpload(client, path, stream_ref(path), max_batch=BATCH_BYTES)
                try:
                    while time.monotonic() < deadline and up.pump():
                        pass
                except (Retry, GiveUp):
                    continue
                if up.sent_bytes:
                    _log.logger.info(
                        f"uploaded {up.sent_bytes} bytes that {up.ref} left behind "
                        "(its process is gone)"
                    )
                sent += up.sent_bytes
    except Exception as exc:  # tracking never takes the job down
        _log.warn(f"could not upload a dead sibling's stream: {exc!r}")
    return sent
