"""``wandb.termlog/termwarn/termerror``: W&B's ``wandb: `` lines on stderr.

``WANDB_SILENT`` (or ``Settings(silent=True)`` at ``init``) quiets ``termlog``; warnings
and errors are always shown. ``warn_once`` is the compat layer's own one-time warning.
"""

from __future__ import annotations

import os
import sys

_seen: set[str] = set()
_silent = [False]


def silent() -> bool:
    return _silent[0] or os.environ.get("WANDB_SILENT", "").strip().lower() in ("1", "true")


def set_silent(value: bool) -> None:
    _silent[0] = bool(value)


def _write(prefix: str, string: str, newline: bool) -> None:
    stream = sys.stderr if sys.stderr is not None else sys.__stderr__
    if stream is None:
        return
    text = "\n".join(f"{prefix}{line}" for line in str(string).split("\n"))
    try:
        stream.write(text + ("\n" if newline else ""))
        stream.flush()
    except Exception:
        pass


def termlog(
    string: str = "", newline: bool = True, repeat: bool = True, prefix: bool = True
) -> None:
    if silent() or (not repeat and not _first(f"log:{string}")):
        return
    _write("wandb: " if prefix else "", string, newline)


def termwarn(string: str, newline: bool = True, repeat: bool = True, prefix: bool = True) -> None:
    if not repeat and not _first(f"warn:{string}"):
        return
    _write("wandb: WARNING " if prefix else "", string, newline)


def termerror(string: str, newline: bool = True, repeat: bool = True, prefix: bool = True) -> None:
    if not repeat and not _first(f"error:{string}"):
        return
    _write("wandb: ERROR " if prefix else "", string, newline)


def _first(key: str) -> bool:
    if key in _seen:
        return False
    _seen.add(key)
    return True


def warn_once(key: str, message: str) -> None:
    """A compat warning, shown once per process per ``key``."""
    if _first(f"once:{key}"):
        termwarn(message)
