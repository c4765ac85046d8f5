"""Lightning's own ``WandbLogger``, unchanged, recording into rankwise: run with
``python -m rankwise.wandb wandb_lightning.py DIR [DEVICES]`` (the opt-in shim; with
DEVICES=2, Lightning's own launcher starts rank 1 as a new ``python wandb_lightning.py``)
or under ``torchrun ... -m rankwise.wandb``. Each rank writes what it saw and the losses
it computed to ``DIR/rank-<r>.json``."""

import gc
import importlib.metadata
import json
import sys
from pathlib import Path

import pytorch_lightning as pl
import torch
from pytorch_lightning.loggers import WandbLogger
from torch.utils.data import DataLoader, TensorDataset


class Model(pl.LightningModule):
    def __init__(self, hidden: int = 4):
        super().__init__()
        self.save_hyperparameters()
        self.layer = torch.nn.Linear(3, 1)
        self.losses: list[float] = []

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = ((self.layer(x) - y) ** 2).mean()
        self.log("train/loss", loss)
        self.losses.append(loss.item())
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val/loss", ((self.layer(x) - y) ** 2).mean())

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


if __name__ == "__main__":
    out = Path(sys.argv[1])
    devices = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(32, 3), torch.randn(32, 1))
    logger = WandbLogger(project="lightning", save_dir=str(out), tags=["lit"], log_model=True)
    logger.log_hyperparams({"batch_size": 8})
    trainer = pl.Trainer(
        max_epochs=2, logger=logger, log_every_n_steps=2, accelerator="cpu", devices=devices,
        strategy="ddp" if devices > 1 else "auto", enable_progress_bar=False,
        enable_model_summary=False, default_root_dir=str(out),
    )  # fmt: skip
    model = Model()
    trainer.fit(model, DataLoader(data, batch_size=8), DataLoader(data, batch_size=8))
    import wandb

    rank = trainer.global_rank
    seen = {
        "rank": rank,
        "world_size": trainer.world_size,
        "wandb": wandb.__name__,
        "version": importlib.metadata.version("wandb"),
        "experiment": type(logger.experiment).__module__,
        "losses": model.losses,
    }
    (out / f"rank-{rank}.json").write_text(json.dumps(seen))
    if rank == 0:
        print(f"RUN {logger.experiment.id} {logger.version}", flush=True)
        wandb.finish()
    # A clean exit: drop what holds the gloo process group (the DDP wrapper) and
    # end the group while the interpreter is alive. Left to the interpreter's own
    # teardown, gloo's threads can abort a rank ("terminate called without an active
    # exception"), with or without rankwise.
    del trainer, model
    gc.collect()
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
