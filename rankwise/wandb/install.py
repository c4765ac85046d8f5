"""The opt-in shim: ``rankwise.wandb`` as the ``wandb`` module, for third-party code.

Integrations import ``wandb`` themselves and check that it is installed in their own
ways (``docs/wandb-migration.md``): Lightning's ``WandbLogger`` asks
``importlib.metadata.version("wandb")``, the Transformers ``WandbCallback``
``importlib.util.find_spec("wandb")``, Accelerate both. ``install()`` therefore

* registers ``sys.modules`` aliases, each a real module with a real ``__spec__``, for
  ``wandb``, ``wandb.sdk``, ``wandb.sdk.lib``, ``wandb.sdk.lib.config_util``,
  ``wandb.wandb_run``, ``wandb.errors``, ``wandb.plot`` and ``wandb.data_types``;
* puts a finder on ``sys.meta_path`` whose ``find_distributions`` answers for a
  distribution ``wandb`` at version ``rankwise.wandb.__version__``.

It is never active unless asked for, in one of two ways:

* ``import rankwise.wandb; rankwise.wandb.install()`` at the top of the program, before
  the integration is imported;
* ``python -m rankwise.wandb train.py ARGS`` (or ``torchrun ... -m rankwise.wandb
  train.py ARGS``), which installs it, runs the script as ``__main__`` and carries it to
  every process the script starts (``rankwise.wandb._launch``: a marker and a start-up
  hook on ``PYTHONPATH``).

``install()`` refuses (``ImportError``) when the real ``wandb`` is already imported, and
``uninstall()`` takes everything back.
"""

from __future__ import annotations

import importlib
import importlib.abc
import sys
from collections.abc import Iterable
from importlib.metadata import Distribution, DistributionFinder
from pathlib import Path
from typing import Any

from ._version import __version__

ALIASES = {
    "wandb": "rankwise.wandb",
    "wandb.sdk": "rankwise.wandb.sdk",
    "wandb.sdk.lib": "rankwise.wandb.sdk.lib",
    "wandb.sdk.lib.config_util": "rankwise.wandb.sdk.lib.config_util",
    "wandb.wandb_run": "rankwise.wandb.wandb_run",
    "wandb.errors": "rankwise.wandb.errors",
    "wandb.plot": "rankwise.wandb.plot",
    "wandb.data_types": "rankwise.wandb.data_types",
}


class _Metadata(Distribution):
    """The distribution ``wandb`` the shim stands for (metadata only, no files)."""

    def read_text(self, filename: str) -> str | None:
        if filename == "METADATA":
            return (
                "Metadata-Version: 2.1\nName: wandb\n"
                f"Version: {__version__}\n"
                "Summary: rankwise.wandb standing in for wandb (rankwise.wandb.install)\n"
            )
        return None

    def locate_file(self, path: Any) -> Path:
        return Path(__file__).parent / str(path)


class _Finder(importlib.abc.MetaPathFinder):
    """Answers ``importlib.metadata`` for ``wandb``; finds no modules (the aliases are
    in ``sys.modules`` already)."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> None:
        return None

    def find_distributions(
        self, context: DistributionFinder.Context | None = None
    ) -> Iterable[Distribution]:
        name = context.name if context is not None else None
        if name is None or name.lower().replace("-", "_") == "wandb":
            return [_Metadata()]
        return []


_finder = _Finder()


def installed() -> bool:
    return sys.modules.get("wandb") is sys.modules.get("rankwise.wandb") is not None


def install() -> None:
    """Make ``import wandb`` (and its submodules the integrations use) give
    ``rankwise.wandb``, and ``importlib.metadata`` see a ``wandb`` distribution."""
    if installed():
        return
    existing = sys.modules.get("wandb")
    if existing is not None:
        raise ImportError(
            "the real wandb is already imported: call rankwise.wandb.install() before "
            "anything imports wandb, or uninstall wandb from this environment"
        )
    for alias, real in ALIASES.items():
        sys.modules[alias] = importlib.import_module(real)
    if _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)
    importlib.invalidate_caches()


def uninstall() -> None:
    """Take the aliases and the distribution back (for tests)."""
    for alias, real in ALIASES.items():
        if sys.modules.get(alias) is sys.modules.get(real):
            del sys.modules[alias]
    if _finder in sys.meta_path:
        sys.meta_path.remove(_finder)
    importlib.invalidate_caches()
