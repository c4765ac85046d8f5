"""``wandb.wandb_run.Run`` (Lightning's ``isinstance`` check)."""

from ._run import Run, RunDisabled

__all__ = ["Run", "RunDisabled"]
