"""Accelerate's own ``log_with="wandb"`` tracker, unchanged, recording into rankwise:
``torchrun --nproc-per-node=2 -m rankwise.wandb wandb_accelerate.py`` (the opt-in
shim). Accelerate's tracker logs from the main process only, with ``step=``."""

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
    for step in range(4):
        loss = model(torch.ones(4, 2)).pow(2).mean()
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
        accelerator.log({"loss": loss.item(), "rank_seen": accelerator.process_index}, step=step)
    if accelerator.is_main_process:
        run = accelerator.get_tracker("wandb", unwrap=True)
        print(f"RUN {run.id}", flush=True)
    accelerator.end_training()
