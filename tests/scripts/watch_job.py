"""A DDP job (gloo, CPU) that watches its model on every rank of one shared run.

Every rank draws the same batches, but rank 1 multiplies its inputs by 10: its local
gradients, which the watch's tensor hooks see before DDP's all-reduce, differ from rank
0's, while the averaged ``.grad`` (logged as ``synced_norm``) and the parameters stay the
same on both. A small local ``probe`` model is watched on the primary rank only.
"""

from __future__ import annotations

import argparse
import gc

import torch
import torch.distributed as dist

import rankwise

p = argparse.ArgumentParser()
p.add_argument("--dir", required=True)
p.add_argument("--steps", type=int, default=6)
a = p.parse_args()

dist.init_process_group("gloo")
rank = dist.get_rank()
run = rankwise.init(project="watch", id="ddp", dir=a.dir, run_mode="shared")
torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
model = torch.nn.parallel.DistributedDataParallel(net)
probe = torch.nn.Linear(4, 1)
run.watch(model, log="all", log_freq=2, ranks="all")
run.watch(probe, log_freq=2)  # ranks="primary"
opt = torch.optim.SGD([*model.parameters(), *probe.parameters()], lr=0.01)
data = torch.Generator().manual_seed(1)
for step in range(a.steps):
    x = torch.randn(32, 8, generator=data)
    if rank == 1:
        x = x * 10
    opt.zero_grad()
    loss = probe(model(x)).pow(2).mean()
    loss.backward()
    synced = float(torch.linalg.vector_norm(net[0].weight.grad))
    run.log({"loss": loss.item(), "synced_norm": synced}, step=step)
    opt.step()
run.finish()
# A clean exit: drop what holds the gloo process group (the DDP wrapper) and
# end the group while the interpreter is alive. Left to the interpreter's own
# teardown, gloo's threads can abort a rank ("terminate called without an active
# exception"), with or without rankwise.
del model, net, opt
gc.collect()
dist.destroy_process_group()
