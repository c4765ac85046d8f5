"""rankwise: experiment tracking built for distributed training.

Call ``rankwise.init()`` on every rank, ``run.log()`` in the loop, ``run.finish()`` at the
end (or let interpreter exit do it). Read runs back with ``rankwise.Api``: its
``run()``/``runs()`` return ``RunInfo``, whose ``streams`` are ``StreamInfo``,
``health()`` a ``RankHealth`` per stream and ``first_failure`` a ``Failure``. Every
exception is a ``RankwiseError`` (``rankwise.errors`` draws the tree).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._version import __version__
from .api import Api, RunInfo, StreamInfo
from .errors import (
    ArgumentTypeError,
    ArtifactError,
    ArtifactNotFoundError,
    BadNameError,
    ConfigError,
    DeliveryError,
    KeyNotLoggedError,
    MediaError,
    RankwiseError,
    ReportNotFoundError,
    RunExistsError,
    RunNotFoundError,
    SchemaTooNewError,
    ServerError,
    SyncError,
    UsageError,
)
from .failures import Failure
from .wire.health import RankHealth

if TYPE_CHECKING:
    from .artifacts.artifact import Artifact
    from .media import Audio, Histogram, Html, Image, Table, Text, Video
    from .sdk.run import Run
    from .sdk.session import define_metric, finish, init, log, log_artifact, use_artifact
    from .sdk.track import get_run, track
    from .settings import Settings

# Imported on first use, so that a process that only reads runs back (``Api``) does not
# pay for the writer, the media encoders and the settings at ``import rankwise``.
_LAZY = {
    **dict.fromkeys(("Audio", "Histogram", "Html", "Image", "Table", "Text", "Video"), "media"),
    "Artifact": "artifacts.artifact",
    "Run": "sdk.run",
    **dict.fromkeys(
        ("define_metric", "finish", "init", "log", "log_artifact", "use_artifact"), "sdk.session"
    ),
    **dict.fromkeys(("get_run", "track"), "sdk.track"),
    "Settings": "settings",
}

__all__ = [
    "Api",
    "ArgumentTypeError",
    "Artifact",
    "ArtifactError",
    "ArtifactNotFoundError",
    "Audio",
    "BadNameError",
    "ConfigError",
    "DeliveryError",
    "Failure",
    "Histogram",
    "Html",
    "Image",
    "KeyNotLoggedError",
    "MediaError",
    "RankHealth",
    "RankwiseError",
    "ReportNotFoundError",
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
    "define_metric",
    "finish",
    "get_run",
    "init",
    "log",
    "log_artifact",
    "run",
    "track",
    "use_artifact",
]


def __getattr__(name: str) -> Any:
    if name == "run":  # the current run of this process, or None
        from .sdk import session

        return session.current
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'rankwise' has no attribute {name!r}")
