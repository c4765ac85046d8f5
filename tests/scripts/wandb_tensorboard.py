"""A W&B DDP script that logs through TensorBoard with ``sync_tensorboard=True``, run
unchanged under the shim (``python -m rankwise.wandb``): the W&B guide's shared run
(rank 0 creates it, the others join by ``id=``; rank 0 passes ``sync_tensorboard=True``,
the others ``Settings(sync_tensorboard=True)``), each rank writing its own ``rank_N`` log
directory with a ``SummaryWriter``. Values are exact in float32."""

import sys

import torch
import torch.distributed as dist
import wandb
from torch.utils.tensorboard import SummaryWriter

STEPS = 5

dist.init_process_group("gloo")
rank = dist.get_rank()
if rank == 0:
    run = wandb.init(
        project="tbwb",
        sync_tensorboard=True,
        settings=wandb.Settings(mode="shared", x_label="rank_0", x_primary=True),
    )
    ids = [run.id]
else:
    ids = [None]
dist.broadcast_object_list(ids, src=0)
if rank != 0:
    run = wandb.init(  # here the switch is a setting
        project="tbwb",
        id=ids[0],
        settings=wandb.Settings(
            mode="shared",
            x_label=f"rank_{rank}",
            x_primary=False,
            x_update_finish_state=False,
            sync_tensorboard=True,
        ),
    )

writer = SummaryWriter(f"{sys.argv[1]}/rank_{rank}")
for step in range(STEPS):
    writer.add_scalar("train/loss", torch.tensor(10.0 * rank + step / 2), step)
    writer.add_scalar("eval/acc", rank + step / 8, step)
writer.close()
dist.barrier()
if rank == 0:
    print(f"RUN {run.id}", flush=True)
run.finish()
dist.destroy_process_group()
