"""``wandb.sdk.lib``: Lightning checks ``isinstance(run, (Run, RunDisabled))``."""

from ..._run import RunDisabled
from . import config_util

__all__ = ["RunDisabled", "config_util"]
