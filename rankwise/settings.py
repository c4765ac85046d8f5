"""Tunable knobs of the SDK, with their environment variables.

Passed to ``rankwise.init(settings=...)`` as a ``Settings`` or a dict; each field can also
be set through ``RANKWISE_<FIELD>`` (e.g. ``RANKWISE_HEARTBEAT_INTERVAL=2``). An explicit
argument wins over the environment, which wins over the default.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from ._datadir import default_dir as default_dir
from .errors import UsageError


@dataclass(frozen=True)
class Settings:
    # How often the writer thread wakes to encode and append what log() queued (s).
    flush_interval: float = 0.25
    # How often each stream proves it is alive (s). Readers call a stream crashed when
    # its last record is older than crash_timeout and its process cannot be seen alive.
    heartbeat_interval: float = 5.0
    crash_timeout: float = 60.0
    # Rank health (rankwise.sdk.system / console / watchdog). Console capture: "wrap"
    # (sys.stdout and sys.stderr), "redirect" (file descriptors 1 and 2, so C, CUDA and
    # NCCL output too) or "off".
    console: str = "wrap"
    # System metrics: the node's on one process per node, each GPU's through NVML, and
    # each recording process's own; every system_interval seconds.
    system: bool = True
    system_interval: float = 10.0
    # NVML indices of the GPUs to sample (env: "0,1"); None samples every GPU.
    gpu_device_ids: tuple[int, ...] | None = None
    # A stall is recorded when no log() call came for this long (s); 0 turns it off.
    stall_timeout: float = 300.0
    # With a stall, record PyTorch's flight-recorder entries (the collectives the process
    # entered; init() sets TORCH_FR_BUFFER_SIZE=2000 when unset and no process group
    # exists yet). False: neither (rankwise.sdk.flight).
    flight_recorder: bool = True
    # Bytes (an estimate of each log() call's size) waiting for the writer. While the
    # writer is behind by more than this, log() waits for it: values are kept and memory
    # stays bounded by it.
    max_queue_bytes: int = 64 * 1024 * 1024
    # Rich values (rankwise.Image, Table, Histogram, Audio, Video...): one value may hold
    # at most max_media_bytes (an array's bytes, a file's size; checked from the shape
    # before any copy), and at most max_media_queue_bytes of copies wait for the encoder
    # thread: over it, log() waits for it like for the writer (and drops only when it
    # made no progress for writer_stall_timeout). A gallery (a list of images under one
    # key) keeps its first max_gallery_items (108, as W&B).
    max_media_bytes: int = 256 * 1024 * 1024
    max_media_queue_bytes: int = 256 * 1024 * 1024
    max_gallery_items: int = 108
    # log() waits at most this long for a writer that makes no progress at all (a hung
    # or failing disk); past it, values are dropped and counted rather than hanging
    # training, until the writer moves again (s).
    writer_stall_timeout: float = 10.0
    # finish() and interpreter exit wait at most this long for the writer (s).
    finish_timeout: float = 30.0
    # How long rank agreement may wait for the launcher's store (s).
    store_timeout: float = 30.0
    # fsync the stream at finish (and at every heartbeat when True).
    fsync: bool = False
    # Remote mode: finish() waits at most this long for the upload to drain (within
    # finish_timeout); what is left stays in the stream file for `rankwise sync` (s).
    upload_timeout: float = 30.0
    # At most one upload request per stream per this many seconds while training runs.
    upload_interval: float = 1.0
    # Cap of the exponential backoff between retries while the server is unreachable (s).
    upload_backoff_max: float = 30.0
    # Remote mode: the processes of one node that write one run share one uploader, which
    # posts all their streams in one request (rankwise.sdk.node_upload): a server takes a
    # job of thousands of ranks at one upload a second. Env RANKWISE_NODE_UPLOAD=1.
    node_upload: bool = False
    # What ran, recorded at init off the training thread (rankwise.sdk.provenance): the
    # git commit, branch, remote and dirty flag; the diff of tracked files (a blob); the
    # installed packages. Each can be turned off (RANKWISE_GIT=0 ...). The capture gives
    # up on what it has not got after provenance_timeout seconds.
    git: bool = True
    save_code: bool = True
    packages: bool = True
    provenance_timeout: float = 15.0
    # Remote mode: the ingest token sent as ``Authorization: Bearer`` (env RANKWISE_TOKEN).
    # Kept out of repr() and never written to a stream file or a message.
    token: str | None = field(default=None, repr=False)

    @classmethod
    def resolve(
        cls, given: Settings | Mapping[str, Any] | None, env: Mapping[str, str] | None = None
    ) -> Settings:
        env = os.environ if env is None else env
        values: dict[str, Any] = {}
        known = {f.name: f for f in fields(cls)}
        for name, f in known.items():
            raw = env.get(f"RANKWISE_{name.upper()}")
            if raw is not None and raw != "":
                values[name] = _parse(name, raw, f.type)
        if isinstance(given, Settings):
            given = {f.name: getattr(given, f.name) for f in fields(given)}
        for name, value in (given or {}).items():
            if name == "max_queue":
                raise UsageError(
                    "setting max_queue (a count of calls) was replaced by max_queue_bytes: "
                    "log() now waits for a writer that is behind instead of dropping values"
                )
            if name not in known:
                raise UsageError(
                    f"unknown setting {name!r}; known settings: {', '.join(sorted(known))}"
                )
            values[name] = value
        out = dataclasses.replace(cls(), **values)
        out.validate()
        return out

    def validate(self) -> None:
        for name in (
            "flush_interval",
            "heartbeat_interval",
            "crash_timeout",
            "finish_timeout",
            "upload_timeout",
            "upload_interval",
            "upload_backoff_max",
            "provenance_timeout",
        ):
            if not float(getattr(self, name)) > 0:
                raise UsageError(f"setting {name} must be a positive number of seconds")
        if int(self.max_queue_bytes) < 1024:
            raise UsageError("setting max_queue_bytes must be at least 1024 (bytes)")
        for name in ("max_media_bytes", "max_media_queue_bytes", "max_gallery_items"):
            if int(getattr(self, name)) < 1:
                raise UsageError(f"setting {name} must be a positive integer")
        if not float(self.writer_stall_timeout) >= 0:
            raise UsageError("setting writer_stall_timeout must be >= 0 seconds")
        if self.console not in CONSOLE_MODES:
            raise UsageError(f"console={self.console!r} is not one of {', '.join(CONSOLE_MODES)}")
        if not float(self.system_interval) > 0:
            raise UsageError("setting system_interval must be a positive number of seconds")
        if self.token is not None and not isinstance(self.token, str):
            raise UsageError("setting token must be a string (an rk_i_... ingest token)")
        if not float(self.stall_timeout) >= 0:
            raise UsageError("setting stall_timeout must be >= 0 seconds (0 turns it off)")

    def __post_init__(self) -> None:
        ids = self.gpu_device_ids
        if ids is not None and not isinstance(ids, tuple):
            object.__setattr__(self, "gpu_device_ids", _gpu_ids(ids))

    def override(self, **changes: Any) -> Settings:
        """A copy with the ``changes`` that are not None: ``init()`` arguments win."""
        given = {k: v for k, v in changes.items() if v is not None}
        if not given:
            return self
        out = dataclasses.replace(self, **given)
        out.validate()
        return out


CONSOLE_MODES = ("wrap", "redirect", "off")


def _gpu_ids(value: Any) -> tuple[int, ...]:
    if isinstance(value, str):
        value = [v for v in value.replace(" ", "").split(",") if v]
    elif isinstance(value, int):
        value = [value]
    try:
        return tuple(int(v) for v in value)
    except (TypeError, ValueError):
        raise UsageError(
            f'gpu_device_ids={value!r}: give GPU indices, e.g. [0, 1] or "0,1"'
        ) from None


def _parse(name: str, raw: str, typ: Any) -> Any:
    typ = str(typ)
    try:
        if typ.startswith("str"):
            return raw.strip()
        if "tuple" in typ:
            return _gpu_ids(raw)
        if "bool" in typ:
            return raw.strip().lower() in ("1", "true", "yes", "on")
        if "int" in typ:
            return int(raw)
        return float(raw)
    except ValueError:
        raise UsageError(
            f"environment variable RANKWISE_{name.upper()}={raw!r} is not a valid {typ}"
        ) from None


# The defaults every entry point shares (the SDK, ``Api``, the command line, the
# integrations): an explicit value wins over the environment, which wins over the default.
# ``default_dir`` (``RANKWISE_DIR``, else ``./rankwise-runs``) is ``rankwise._datadir``'s.


def default_project(
    explicit: str | None = None,
    env: Mapping[str, str] | None = None,
    fallback: str = "default",
) -> str:
    """``explicit``, else ``RANKWISE_PROJECT``, else ``fallback`` ("default"; the
    integrations name their own)."""
    return explicit or (os.environ if env is None else env).get("RANKWISE_PROJECT") or fallback


def default_server(explicit: str | None = None, env: Mapping[str, str] | None = None) -> str | None:
    """``explicit``, else ``RANKWISE_SERVER``, else None (local mode)."""
    return explicit or (os.environ if env is None else env).get("RANKWISE_SERVER") or None


def env_flag(name: str, env: Mapping[str, str] | None = None) -> bool:
    env = os.environ if env is None else env
    return env.get(name, "").strip().lower() in ("1", "true", "yes", "on")
