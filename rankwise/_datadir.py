"""The default data directory: ``RANKWISE_DIR``, else ``./rankwise-runs``.

Not ``./rankwise``, which rankwise used before: a folder named like the package, beside a
script or in the working directory, is importable as a namespace package ``rankwise`` and
can hide the real one (an editable install's import finder comes after the path). Readers
(``rankwise.Api``, ``rankwise ui``/``runs``/``sync``) still find runs in an old
``./rankwise`` when there is no ``./rankwise-runs``; writers use the new name.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

DEFAULT = "rankwise-runs"
LEGACY = "rankwise"


def legacy_dir(parent: str | os.PathLike[str] = ".") -> Path | None:
    """``<parent>/rankwise`` when it is a data directory of an earlier rankwise (a folder
    that is not the package's own source), else None."""
    old = Path(parent) / LEGACY
    if old.is_dir() and not (old / "__init__.py").exists():
        return old
    return None


def subdir(parent: str | os.PathLike[str], read: bool = False) -> Path:
    """The data directory inside ``parent`` (``<parent>/rankwise-runs``); for reading, an
    old ``<parent>/rankwise`` when the new one does not exist."""
    new = Path(parent) / DEFAULT
    if read and not new.exists():
        return legacy_dir(parent) or new
    return new


def default_dir(
    explicit: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    read: bool = False,
) -> Path:
    """``explicit``, else ``RANKWISE_DIR``, else ``./rankwise-runs`` (for reading, an old
    ``./rankwise`` when there is no ``./rankwise-runs``). Not made absolute."""
    if explicit:
        return Path(explicit).expanduser()
    from_env = (os.environ if env is None else env).get("RANKWISE_DIR")
    if from_env:
        return Path(from_env).expanduser()
    return subdir(".", read=read) if read else Path(DEFAULT)
