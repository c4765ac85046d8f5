"""rankwise: experiment tracking built for distributed training.

Call ``rankwise.init()`` on every rank, ``run.log()`` in the loop, ``run.finish()`` at the
end (or let interpreter exit do it). Read runs back with ``rankwise.Api``: its
``run()``/``runs()`` return ``RunInfo``, whose ``streams`` are ``StreamInfo``,
``health()`` a ``RankHealth`` per stream and ``first_failure`` a ``Failure``. Every
exception is a ``RankwiseError`` (``rankwise.errors`` draws the tree).
"""

from __future__ import annotations

from typing import Any

from ._version import __version__
from .api import Api, RunInfo, StreamInfo
from .errors import (
    BadNameError,
    ConfigError,
    MediaError,
    RankwiseError,
    RunExistsError,
    RunNotFoundError,
    SchemaTooNewError,
    ServerError,
    SyncError,
    UsageError,
)
from .failures import Failure
from .health import RankHealth
from .media import Audio, Histogram, Html, Image, Table, Text, Video
from .sdk.run import Run
from .sdk.session import finish, init, log
from .settings import Settings

__all__ = [
    "Api",
    "Audio",
    "BadNameError",
    "ConfigError",
    "Failure",
    "Histogram",
    "Html",
    "Image",
    "MediaError",
    "RankHealth",
    "RankwiseError",
    "Run",
    "RunExistsError",
    "RunInfo",
    "RunNotFoundError",
    "SchemaTooNewError",
    "ServerError",
    "Settings",
    "StreamInfo",
    "SyncError",
    "Table",
    "Text",
    "UsageError",
    "Video",
    "__version__",
    "finish",
    "init",
    "log",
    "run",
]


def __getattr__(name: str) -> Any:
    if name == "run":  # the current run of this process, or None
        from .sdk import session

        return session.current
    raise AttributeError(f"module 'rankwise' has no attribute {name!r}")
