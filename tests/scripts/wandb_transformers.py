"""The Transformers ``WandbCallback``, unchanged (``report_to="wandb"``), recording into
rankwise: run with ``python -m rankwise.wandb wandb_transformers.py OUT`` or under
``torchrun ... -m rankwise.wandb`` (the shim). A tiny GPT-2 built from a config: nothing
is downloaded. Each rank writes the losses it computed to ``OUT/rank-<r>.json``."""

import gc
import importlib.metadata
import json
import sys
from pathlib import Path

import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments
from transformers.integrations import WandbCallback  # type: ignore[attr-defined]


class Recording(Trainer):
    """The Trainer, keeping each step's loss of this rank (what the callback averages)."""

    losses: list[float]

    def compute_loss(self, model, inputs, return_outputs=False, **kwargs):  # type: ignore[override]
        loss = super().compute_loss(model, inputs, return_outputs=return_outputs, **kwargs)
        value = loss[0] if return_outputs else loss
        self.losses.append(float(value.detach()))
        return loss


if __name__ == "__main__":
    torch.manual_seed(0)
    config = GPT2Config(
        n_layer=1, n_head=2, n_embd=16, vocab_size=50, n_positions=16, bos_token_id=0,
        eos_token_id=0,
    )  # fmt: skip
    model = GPT2LMHeadModel(config)
    ids = [torch.tensor([(k + i) % 50 for i in range(8)]) for k in range(16)]
    data = [{"input_ids": x, "labels": x} for x in ids]
    args = TrainingArguments(
        output_dir=sys.argv[1], report_to="wandb", max_steps=4, logging_steps=1,
        per_device_train_batch_size=4, use_cpu=True, save_strategy="no", run_name="tiny",
        disable_tqdm=True,
    )  # fmt: skip
    trainer = Recording(model=model, args=args, train_dataset=data)
    trainer.losses = []
    assert any(isinstance(c, WandbCallback) for c in trainer.callback_handler.callbacks)
    trainer.train()
    import wandb

    rank = trainer.args.process_index
    seen = {"rank": rank, "world_size": trainer.args.world_size, "wandb": wandb.__name__,
            "version": importlib.metadata.version("wandb"), "losses": trainer.losses,
            "run": wandb.run.id if wandb.run else None}  # fmt: skip
    Path(sys.argv[1], f"rank-{rank}.json").write_text(json.dumps(seen))
    if rank == 0:
        print(f"RUN {wandb.run.id}", flush=True)
    wandb.finish()
    # A clean exit: drop what holds the gloo process group (the DDP wrapper) and
    # end the group while the interpreter is alive. Left to the interpreter's own
    # teardown, gloo's threads can abort a rank ("terminate called without an active
    # exception"), with or without rankwise.
    del trainer, model
    gc.collect()
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()
