"""Tunable knobs of the SDK, with their environment variables.

Passed to ``rankwise.init(settings=...)`` as a ``Settings`` or a dict; each field can also
be set through ``RANKWISE_<FIELD>`` (e.g. ``RANKWISE_HEARTBEAT_INTERVAL=2``). An explicit
argument wins over the environment, which wins over the default.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, fields
from typing import Any, Mapping

from .errors import UsageError


@dataclass(frozen=True)
class Settings:
    # How often the writer thread wakes to encode and append what log() queued (s).
    flush_interval: float = 0.25
    # How often each stream proves it is alive (s). Readers call a stream crashed when
    # its last record is older than crash_timeout and its process cannot be seen alive.
    heartbeat_interval: float = 5.0
    crash_timeout: float = 60.0
    # log() calls waiting for the writer. Past this, values are dropped and counted
    # rather than blocking training; memory is bounded by it.
    max_queue: int = 100_000
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
            "flush_interval", "heartbeat_interval", "crash_timeout", "finish_timeout",
            "upload_timeout", "upload_interval", "upload_backoff_max",
        ):
            if not float(getattr(self, name)) > 0:
                raise UsageError(f"setting {name} must be a positive number of seconds")
        if int(self.max_queue) < 1:
            raise UsageError("setting max_queue must be at least 1")


def _parse(name: str, raw: str, typ: Any) -> Any:
    typ = str(typ)
    try:
        if "bool" in typ:
            return raw.strip().lower() in ("1", "true", "yes", "on")
        if "int" in typ:
            return int(raw)
        return float(raw)
    except ValueError:
        raise UsageError(
            f"environment variable RANKWISE_{name.upper()}={raw!r} is not a valid {typ}"
        ) from None


def env_flag(name: str, env: Mapping[str, str] | None = None) -> bool:
    env = os.environ if env is None else env
    return env.get(name, "").strip().lower() in ("1", "true", "yes", "on")
