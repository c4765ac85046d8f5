"""The W&B guide's third method: one shared run written by every process.

The primary creates the run with ``mode="shared"``, ``x_label`` and ``x_primary=True``;
the workers join it by ``id=`` with ``x_primary=False`` and
``x_update_finish_state=False`` (only the import changed; the id is broadcast here, the
guide passes it on the command line).
"""

import torch.distributed as dist

import rankwise.wandb as wandb

dist.init_process_group("gloo")
rank = dist.get_rank()

if rank == 0:
    run = wandb.init(
        entity="my-team",
        project="guide-shared",
        config={"epochs": 3},
        settings=wandb.Settings(
            x_label="rank_0",
            mode="shared",
            x_primary=True,
            x_stats_gpu_device_ids=[0, 1],
        ),
    )
    ids = [run.id]
else:
    ids = [None]
dist.broadcast_object_list(ids, src=0)
if rank != 0:
    run = wandb.init(
        entity="my-team",
        project="guide-shared",
        id=ids[0],
        settings=wandb.Settings(
            x_label=f"rank_{rank}",
            mode="shared",
            x_primary=False,
            x_stats_gpu_device_ids=[rank],
            x_update_finish_state=False,
        ),
    )

for epoch in range(3):
    run.log({"loss": 1.0 / (epoch + 1) + rank, "epoch": epoch})
dist.barrier()
if rank == 0:
    print(f"RUN {run.id}", flush=True)
run.finish()
dist.destroy_process_group()
