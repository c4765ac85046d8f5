"""``wandb.sdk.lib.config_util.ConfigError`` (the Transformers callback catches it)."""

from ...errors import ConfigError

__all__ = ["ConfigError"]
