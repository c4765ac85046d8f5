"""``rankwise sync``: upload runs written offline, or left behind by an outage.

Every stream goes through ``StreamUpload``, the live uploader's own path: resume from the
server's mark, send the blobs the next frames name (those the server lacks), send whole
frames, advance on acknowledgement. So running it twice (or
while the live uploader is still at work) sends what the server already holds at most
once more, and its store ignores that: nothing is doubled.

``follow=True`` keeps uploading a run that is still being written, until each of its
streams has uploaded its ``Finish`` record or its process is gone (crashed).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import SyncError, UsageError
from ..settings import Settings
from ..stream import records as R
from ..stream.files import SUFFIX, read_last_frame, read_stream_start, stream_files_under
from ..stream.fold import process_alive
from .retry import GiveUp, Retry, backoff_delay
from .uploader import StreamUpload, stream_ref

if TYPE_CHECKING:
    import httpx

T = TypeVar("T")


@dataclass
class SyncReport:
    streams: int = 0
    uploaded_bytes: int = 0
    blob_bytes: int = 0  # blob bytes PUT (0 when the server held every blob already)
    blobs_lost: int = 0  # blobs named by records whose files were gone (warned once)
    failed: dict[str, str] = field(default_factory=dict)  # path -> why


def find_stream_files(path: Path) -> list[Path]:
    """Stream files of a stream file, a run dir, a project dir or a data dir."""
    path = Path(path).expanduser()
    if path.is_file():
        if not path.name.endswith(SUFFIX):
            raise UsageError(f"{path} is not a stream file (*{SUFFIX})")
        return [path]
    if not path.is_dir():
        raise UsageError(f"no such file or directory: {path}")
    return stream_files_under(path)


def sync(
    path: Path,
    server: str,
    *,
    follow: bool = False,
    settings: Settings | None = None,
    transport: httpx.BaseTransport | None = None,
    progress: bool | None = None,
    poll: float = 1.0,
    retry_for: float = 120.0,
    token: str | None = None,
) -> SyncReport:
    """Upload every stream under ``path`` to ``server``; see the module docstring.

    ``progress``: a progress bar on stderr (True), none (False), or (None) one on a
    terminal only, for a sync that takes more than half a second, cleared at the end.

    Raises ``SyncError`` when the server stays unreachable for ``retry_for`` seconds.
    """
    from tqdm import tqdm  # type: ignore[import-untyped]

    from .. import _http

    settings = settings or Settings.resolve(None)
    report = SyncReport()
    uploads: dict[Path, StreamUpload] = {}
    done: set[Path] = set()
    # progress=None (the CLI's default): a bar only on a terminal, only for a sync that
    # takes a while (``delay``), and gone when it ends: the result line is what stays.
    auto = progress is None
    show = bool(progress) or (auto and sys.stderr is not None and sys.stderr.isatty())
    bar = tqdm(
        total=0, unit="B", unit_scale=True, desc="rankwise sync", disable=not show,
        delay=0.5 if auto else 0.0, leave=not auto,
    )  # fmt: skip
    token = token or settings.token
    with _http.make_client(server, transport=transport, token=token) as client, bar:
        retry = _Retrier(server, settings.upload_backoff_max, retry_for)
        while True:
            for p in find_stream_files(path):
                if p in uploads or str(p) in report.failed:
                    continue
                try:
                    up = StreamUpload(client, p, stream_ref(p), watch_finish=follow)
                    retry(up.resume)
                except GiveUp as exc:
                    report.failed[str(p)] = str(exc)
                    continue
                uploads[p] = up
                if follow and _finished_on_disk(p) and up.pending_bytes() == 0:
                    done.add(p)
            for p, up in uploads.items():
                if p in done or str(p) in report.failed:
                    continue
                bar.total = sum(u.sent_bytes + u.pending_bytes() for u in uploads.values())
                try:
                    more = True
                    while more:
                        before = up.sent_bytes
                        more = retry(up.pump)
                        bar.update(up.sent_bytes - before)
                except GiveUp as exc:
                    report.failed[str(p)] = str(exc)
                    continue
                if not follow or up.finished or _gone(p, settings.crash_timeout):
                    done.add(p)
            if not follow or all(p in done or str(p) in report.failed for p in uploads):
                break
            time.sleep(poll)
    report.streams = len(uploads)
    report.uploaded_bytes = sum(u.sent_bytes for u in uploads.values())
    report.blob_bytes = sum(u.blobs.sent_bytes for u in uploads.values())
    report.blobs_lost = len(set().union(*(u.blobs.lost for u in uploads.values())))
    return report


class _Retrier:
    """Calls a step, retrying ``Retry`` failures with backoff for at most ``retry_for``."""

    def __init__(
        self, server: str, cap: float, retry_for: float, say: Callable[[str], None] | None = None
    ) -> None:
        self.server, self.cap, self.retry_for = server, cap, retry_for
        self.say = say or _say
        self.told = False  # the outage was announced; told again only after a success

    def __call__(self, step: Callable[[], T]) -> T:
        failures, since = 0, time.monotonic()
        while True:
            try:
                result = step()
            except Retry as exc:
                failures += 1
                if not self.told:  # at once, not after retry_for seconds of silence
                    self.told = True
                    self.say(
                        f"rankwise: cannot reach {self.server} ({exc}); retrying for up to "
                        f"{self.retry_for:.0f} s (Ctrl-C stops it; nothing is lost)"
                    )
                if time.monotonic() - since > self.retry_for:
                    raise SyncError(
                        f"cannot upload to {self.server} ({exc}) for {self.retry_for:.0f}s: "
                        "nothing was lost; run rankwise sync again once the server is up"
                    ) from None
                time.sleep(backoff_delay(failures, self.cap, advised=exc.after))
                continue
            if self.told:
                self.told = False
                self.say(f"rankwise: reached {self.server}; uploading")
            return result


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _finished_on_disk(path: Path) -> bool:
    # A Finish record is the last a stream gets: only the last frame needs decoding.
    return any(type(r) is R.Finish for r in read_last_frame(path))


def _gone(path: Path, crash_timeout: float) -> bool:
    """The stream's writer is dead: its process is gone, or it has been silent too long."""
    start = read_stream_start(path)
    age = time.time() - _mtime(path)
    alive: Any = process_alive(start.host, start.pid, start.pid_start_time) if start else None
    if alive is False:
        return True
    return alive is None and age > crash_timeout


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0
