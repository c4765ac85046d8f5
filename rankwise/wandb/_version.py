"""The W&B API version ``rankwise.wandb`` follows (integrations check it), apart so that
``install`` reads it without importing the package module that imports ``install``."""

__version__ = "0.31.0"
