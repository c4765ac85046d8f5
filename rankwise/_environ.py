"""``scoped_env``: environment variables set (or removed) for one block only."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator


@contextlib.contextmanager
def scoped_env(**values: str | None) -> Iterator[None]:
    """``values`` in ``os.environ`` for the block (None: the variable removed), then each
    variable as it was before."""
    saved = {k: os.environ.get(k) for k in values}
    try:
        _apply(values)
        yield
    finally:
        _apply(saved)


def _apply(values: dict[str, str | None]) -> None:
    for k, v in values.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
