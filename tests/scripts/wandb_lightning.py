"""Lightning's own ``WandbLogger``, unchanged, recording into rankwise: run with
``python -m rankwise.wandb wandb_lightning.py DIR`` (the opt-in shim)."""

import sys

import pytorch_lightning as pl
import torch
from pytorch_lightning.loggers import WandbLogger
from torch.utils.data import DataLoader, TensorDataset


class Model(pl.LightningModule):
    def __init__(self, hidden: int = 4):
        super().__init__()
        self.save_hyperparameters()
        self.layer = torch.nn.Linear(3, 1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = ((self.layer(x) - y) ** 2).mean()
        self.log("train/loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val/loss", ((self.layer(x) - y) ** 2).mean())

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


if __name__ == "__main__":
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(32, 3), torch.randn(32, 1))
    logger = WandbLogger(project="lightning", save_dir=sys.argv[1], tags=["lit"], log_model=True)
    logger.log_hyperparams({"batch_size": 8})
    trainer = pl.Trainer(
        max_epochs=2, logger=logger, log_every_n_steps=2, accelerator="cpu", devices=1,
        enable_progress_bar=False, enable_model_summary=False, default_root_dir=sys.argv[1],
    )  # fmt: skip
    trainer.fit(Model(), DataLoader(data, batch_size=8), DataLoader(data, batch_size=8))
    import wandb

    assert type(logger.experiment).__module__ == "rankwise.wandb._run"
    print(f"RUN {logger.experiment.id} {logger.version}", flush=True)
    wandb.finish()
