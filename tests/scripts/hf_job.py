"""A Transformers ``Trainer`` job under torchrun (gloo, CPU) with ``RankwiseCallback``.

A 2-layer BERT built from a config (tiny vocabulary, nothing downloaded) classifies
synthetic sequences. Loss every step, an evaluation every 2 steps and after training
(``trainer.evaluate()``, once the callback has finished the run: it goes on). Each rank
writes its ``state.log_history`` and what it knows to ``<report>/rank-<r>.json``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import warnings
from pathlib import Path

import torch
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

from rankwise.integrations.transformers import RankwiseCallback

warnings.filterwarnings("ignore")

p = argparse.ArgumentParser()
p.add_argument("--dir", required=True)
p.add_argument("--report", required=True)
p.add_argument("--steps", type=int, default=4)
p.add_argument("--log-model", default="end", help="'env': RANKWISE_LOG_MODEL decides")
p.add_argument("--save-steps", type=int, default=0, help="a checkpoint every N steps")
a = p.parse_args()


class Sequences(torch.utils.data.Dataset):
    def __init__(self, n: int, seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(1, 32, (n, 8), generator=g)
        self.labels = (self.ids.sum(dim=1) % 2).long()

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[i], "labels": self.labels[i]}


torch.manual_seed(0)
config = BertConfig(  # type: ignore[call-arg]
    vocab_size=32,
    hidden_size=8,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=16,
    max_position_embeddings=16,
    num_labels=2,
)
model = BertForSequenceClassification(config)
args = TrainingArguments(
    output_dir=str(Path(a.report) / "out"),
    run_name="tiny-bert",
    per_device_train_batch_size=4,
    per_device_eval_batch_size=4,
    max_steps=a.steps,
    learning_rate=0.01,
    logging_steps=1,
    eval_strategy="steps",
    eval_steps=2,
    save_strategy="steps" if a.save_steps else "no",
    save_steps=a.save_steps or 500,
    report_to="none",
    use_cpu=True,
    ddp_backend="gloo",
    disable_tqdm=True,
    dataloader_num_workers=0,
)
log_model = None if a.log_model == "env" else a.log_model
callback = RankwiseCallback(project="hf", dir=a.dir, log_model=log_model, watch_freq=2)
trainer = Trainer(
    model=model,
    args=args,
    train_dataset=Sequences(64, 1),
    eval_dataset=Sequences(16, 2),
    callbacks=[callback],
)
trainer.train()
ended_as = callback.run.state if callback.run is not None else None
trainer.evaluate(metric_key_prefix="test")  # after train(): test/loss, the run goes on
run = callback.run
assert run is not None
rank = int(os.environ["RANK"])
out = {
    "rank": rank,
    "run_id": run.id,
    "pid": os.getpid(),
    "ended_as": ended_as,
    "num_parameters": model.num_parameters(),
    "log_history": trainer.state.log_history,
}
run.finish()
Path(a.report, f"rank-{rank}.json").write_text(json.dumps(out))
# A clean exit: drop what holds the gloo process group (the DDP wrapper) and
# end the group while the interpreter is alive. Left to the interpreter's own
# teardown, gloo's threads can abort a rank ("terminate called without an active
# exception"), with or without rankwise.
del trainer, model
gc.collect()
if torch.distributed.is_initialized():
    torch.distributed.destroy_process_group()
