"""A Lightning ``strategy="ddp", devices=2`` job on CPU with ``RankwiseLogger``.

Started as one process: Lightning starts rank 1 itself (the script again). Each rank
trains a tiny regression on its own shard and logs its own loss and a rank-specific value
every step; hyperparameters, an image gallery and a table go through the logger. Each
rank writes what it logged, at which global step, to ``<report>/rank-<r>.json``.
``--early`` uses ``logger.experiment`` before ``fit()``, before rank 1 exists.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import warnings
from pathlib import Path

import numpy as np
import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import ModelCheckpoint
from torch.utils.data import DataLoader, TensorDataset

from rankwise.integrations.lightning import RankwiseLogger

warnings.filterwarnings("ignore")  # Lightning's advice about workers and GPUs

p = argparse.ArgumentParser()
p.add_argument("--dir", required=True)
p.add_argument("--report", required=True)
p.add_argument("--steps", type=int, default=4)
p.add_argument("--log-model", default="false")
p.add_argument("--early", action="store_true")
p.add_argument("--fail-at", type=int, default=-1, help="raise at this global step, every rank")
p.add_argument("--every", type=int, default=0, help="a checkpoint every N steps (0: at the end)")
a = p.parse_args()


class Tiny(pl.LightningModule):
    def __init__(self, lr: float = 0.05, hidden: int = 4) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = torch.nn.Sequential(torch.nn.Linear(3, hidden), torch.nn.Linear(hidden, 1))
        self.seen: list[tuple[int, float, float]] = []

    def training_step(self, batch: list[torch.Tensor], _: int) -> torch.Tensor:
        x, y = batch
        if self.global_step == a.fail_at:
            raise RuntimeError(f"boom at step {self.global_step}")
        loss = torch.nn.functional.mse_loss(self.net(x), y)
        mark = 100.0 * self.global_rank + self.global_step
        self.log("loss", loss)
        self.log("mark", mark)
        self.seen.append((self.global_step, float(loss), mark))
        return loss

    def on_train_start(self) -> None:
        logger = self.logger
        assert isinstance(logger, RankwiseLogger)
        logger.watch(self.net, log_freq=2)  # every rank's own gradients

    def on_train_end(self) -> None:
        logger = self.logger
        assert isinstance(logger, RankwiseLogger)
        shade = np.full((6, 5, 3), 40 * self.global_rank, dtype=np.uint8)
        logger.log_image("samples", [shade, shade], step=self.global_step, caption=["a", "b"])
        logger.log_table("preds", columns=["rank", "n"], data=[[self.global_rank, len(self.seen)]])
        clip = np.full(400, 0.1 * (1 + self.global_rank), dtype=np.float32)
        logger.log_audio("clips", [clip], step=self.global_step, sample_rate=[8000])
        frames = np.zeros((3, 3, 4, 4), dtype=np.uint8)  # time, channel, height, width
        logger.log_video("moves", [frames], step=self.global_step, fps=[2], caption=["v"])

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=self.hparams["lr"])


log_model: bool | str = {"false": False, "true": True}.get(a.log_model, a.log_model)
logger = RankwiseLogger(project="lit", dir=a.dir, log_model=log_model, config={"seed": 7})
if a.early:
    logger.experiment.log({"early": 1.0}, step=0)
torch.manual_seed(0)
x = torch.randn(64, 3)
data = TensorDataset(x, x.sum(dim=1, keepdim=True))
model = Tiny()
trainer = pl.Trainer(
    strategy="ddp",
    devices=2,
    accelerator="cpu",
    max_steps=a.steps,
    logger=logger,
    log_every_n_steps=1,
    enable_progress_bar=False,
    enable_model_summary=False,
    default_root_dir=str(Path(a.report) / "root"),
    callbacks=[ModelCheckpoint(every_n_train_steps=a.every, save_top_k=-1)] if a.every else None,
)
try:
    trainer.fit(model, DataLoader(data, batch_size=4))
except RuntimeError as exc:
    if a.fail_at < 0:
        raise
    print(f"rank {trainer.global_rank} failed as asked: {exc}")
out = {
    "rank": trainer.global_rank,
    "run_id": logger.version,  # not logger.experiment: that would start the run again
    "pid": os.getpid(),
    "seen": model.seen,
    "checkpoint": trainer.checkpoint_callback.best_model_path  # type: ignore[attr-defined]
    if trainer.checkpoint_callback
    else "",
}
Path(a.report, f"rank-{trainer.global_rank}.json").write_text(json.dumps(out))
# A clean exit: drop what holds the gloo process group (the DDP wrapper) and
# end the group while the interpreter is alive. Left to the interpreter's own
# teardown, gloo's threads can abort a rank ("terminate called without an active
# exception"), with or without rankwise.
del trainer, model
gc.collect()
if a.fail_at < 0 and torch.distributed.is_initialized():  # a failed rank's peers may wait
    torch.distributed.destroy_process_group()
