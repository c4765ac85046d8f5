"""The ``rankwise`` logger: every warning the SDK gives goes through it, to stderr.

Logging (not ``warnings.warn``) is used on purpose: a program run with ``-W error`` must
not have its training stopped by a tracking warning, and the writer thread can log safely.
"""

from __future__ import annotations

import logging
import sys

logger = logging.getLogger("rankwise")


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is *now* (console capture may replace it)."""

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(logging.Formatter("rankwise: %(levelname)s: %(message)s"))

    @property
    def stream(self):  # type: ignore[no-untyped-def]
        return sys.__stderr__ if sys.stderr is None else sys.stderr

    @stream.setter
    def stream(self, _value) -> None:  # type: ignore[no-untyped-def]
        pass


if not logger.handlers:
    logger.addHandler(_StderrHandler())
    logger.setLevel(logging.INFO)
    logger.propagate = False


def warn(message: str) -> None:
    logger.warning(message)


class Once:
    """``warn_once(key, message)``: warn the first time a key is seen, never again (one
    per run component, or per module; safe from any thread: a key may at worst be
    warned twice when two threads race on its first use)."""

    def __init__(self) -> None:
        self._seen: set[str] = set()

    def __call__(self, key: str, message: str) -> None:
        if key not in self._seen:
            self._seen.add(key)
            warn(message)
