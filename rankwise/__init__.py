"""rankwise: experiment tracking built for distributed training.

Call ``rankwise.init()`` on every rank, ``run.log()`` in the loop, ``run.finish()`` at the
end (or let interpreter exit do it). Read runs back with ``rankwise.Api``.
"""

from __future__ import annotations

from typing import Any

from ._version import __version__
from .api import Api
from .errors import (
    ConfigError,
    RankwiseError,
    RunExistsError,
    RunNotFoundError,
    UsageError,
)
from .sdk.run import Run
from .sdk.session import finish, init, log
from .settings import Settings

__all__ = [
    "Api",
    "ConfigError",
    "RankwiseError",
    "Run",
    "RunExistsError",
    "RunNotFoundError",
    "Settings",
    "UsageError",
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
