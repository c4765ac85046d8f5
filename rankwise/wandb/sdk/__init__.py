"""``wandb.sdk``: the submodules integrations import from (``wandb.sdk.lib``)."""

from .. import _settings as wandb_settings
from .._run import Run
from . import lib

__all__ = ["Run", "lib", "wandb_settings"]
