"""``wandb.errors``: W&B's exception names, rooted in rankwise's tree.

::

    Error (RankwiseError)          wandb.Error: a call made in the wrong state
    ├── UsageError (also ValueError)  bad arguments; a finished run's log()
    ├── CommError                  no server could be reached
    │   └── AuthenticationError
    └── ConfigError (also TypeError)  config key changed without allow_val_change

``ValidationError`` (a ``ValueError``) is what ``Settings`` raises for an unknown field,
as pydantic's does for W&B's ``extra="forbid"`` model.
"""

from __future__ import annotations

from ..errors import RankwiseError


class Error(RankwiseError):
    """Base of the W&B-named exceptions (``wandb.Error``)."""

    def __init__(self, message: str = "", context: object = None) -> None:
        super().__init__(message)
        self.message = message
        self.context = context


class UsageError(Error, ValueError):
    """An argument or a call the run's state does not allow."""


class CommError(Error):
    """The server could not be reached (or refused the request)."""

    def __init__(self, msg: str = "", exc: BaseException | None = None) -> None:
        super().__init__(msg)
        self.exc = exc


class AuthenticationError(CommError):
    """Credentials were refused."""


class UnsupportedError(UsageError):
    """A W&B feature rankwise does not have."""


class ConfigError(Error, TypeError):
    """A config key was changed to a different value without ``allow_val_change``."""


class ValidationError(ValueError):
    """``Settings`` got a field it does not have, or a value of the wrong kind."""


__all__ = [
    "AuthenticationError",
    "CommError",
    "ConfigError",
    "Error",
    "UnsupportedError",
    "UsageError",
    "ValidationError",
]
