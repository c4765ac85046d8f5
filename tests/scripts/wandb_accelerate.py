"""Accelerate's own ``log_with="wandb"`` tracker, unchanged, recording into rankwise:
``torchrun --nproc-per-node=2 -m rankwise.wandb wandb_accelerate.py OUT`` or
``python -m rankwise.wandb accelerate launch --num_processes 2 --cpu wandb_accelerate.py
OUT`` (the opt-in shim). Accelerate's tracker logs from the main process only, with
``step=``. Each rank writes what it passed to ``accelerator.log`` to
``OUT/rank-<r>.json``."""

import gc
import importlib.metadata
import json
import sys
from pathlib import Path

import torch
from accelerate import Accelerator

if __name__ == "__main__":
    accelerator = Accelerator(log_with="wandb", cpu=True)
    accelerator.init_trackers(
        "accel", config={"lr": 0.1}, init_kwargs={"wandb": {"group": "acc", "tags": ["a"]}}
    )
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model, optimizer = accelerator.prepare(model, optimizer)
    rank = accelerator.process_index
    logged = []
    for step in range(4):
        loss = model(torch.full((4, 2), 1.0 + rank)).pow(2).mean()
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
        values = {"loss": loss.item(), "rank_seen": rank}
        accelerator.log(values, step=step)
        logged.append(values)
    if accelerator.is_main_process:
        run = accelerator.get_tracker("wandb", unwrap=True)
        print(f"RUN {run.id}", flush=True)
    import wandb

    seen = {"rank": rank, "world_size": accelerator.num_processes, "wandb": wandb.__name__,
            "version": importlib.metadata.version("wandb"), "logged": logged}  # fmt: skip
    Path(sys.argv[1], f"rank-{rank}.json").write_text(json.dumps(seen))
    accelerator.end_training()
    # A clean exit: drop what holds the gloo process group (the DDP wrapper) and
    # end the group while the interpreter is alive. Left to the interpreter's own
    # teardown, gloo's threads can abort a rank ("terminate called without an active
    # exception"), with or without rankwise.
    del model, optimizer
    accelerator.free_memory()
    gc.collect()
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()
