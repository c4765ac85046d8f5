"""An Accelerate job under torchrun (gloo, CPU) with ``RankwiseTracker``.

``every_rank(Accelerator(log_with=[RankwiseTracker()]))``: ``init_trackers`` and
``accelerator.log`` reach the tracker on every rank. Each rank trains its shard of a
tiny regression and logs its own loss with ``step=``, an image gallery and a table; rank
1 also logs through the tracker it holds directly. ``--plain`` leaves out
``every_rank``: Accelerate then calls trackers on the main process only. Each rank
writes what it logged to ``<report>/rank-<r>.json``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import warnings
from pathlib import Path

import numpy as np
import torch
from accelerate import Accelerator

from rankwise.integrations.accelerate import RankwiseTracker, every_rank

warnings.filterwarnings("ignore")

p = argparse.ArgumentParser()
p.add_argument("--dir", required=True)
p.add_argument("--report", required=True)
p.add_argument("--steps", type=int, default=4)
p.add_argument("--plain", action="store_true")
a = p.parse_args()

tracker = RankwiseTracker(dir=a.dir, tags=["tiny"])
accelerator = Accelerator(log_with=[tracker], cpu=True)
if not a.plain:
    every_rank(accelerator)
accelerator.init_trackers("acc", config={"lr": 0.1, "steps": a.steps})
rank = accelerator.process_index

torch.manual_seed(0)
x = torch.randn(32, 3)
data = torch.utils.data.TensorDataset(x, x.sum(dim=1, keepdim=True))
model = torch.nn.Linear(3, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
model, opt, loader = accelerator.prepare(
    model, opt, torch.utils.data.DataLoader(data, batch_size=4)
)
seen = []
for step, (xb, yb) in enumerate(loader):
    if step == a.steps:
        break
    loss = torch.nn.functional.mse_loss(model(xb), yb)
    accelerator.backward(loss)
    opt.step()
    opt.zero_grad()
    seen.append((10 * step, loss.item()))
    accelerator.log({"loss": loss.item(), "rank_mark": 100.0 * rank + step}, step=10 * step)
shade = np.full((4, 6, 3), 50 * rank, dtype=np.uint8)
tracker.log_images({"samples": [shade]}, step=10 * a.steps)
tracker.log_table("preds", columns=["rank", "steps"], data=[[rank, len(seen)]], step=10 * a.steps)
if rank == 1:
    tracker.log({"direct": 1.0}, step=10 * a.steps)  # the tracker itself works on any rank
run = tracker.tracker
got = accelerator.get_tracker("rankwise", unwrap=True)
out = {
    "rank": rank,
    "run_id": run.id,
    "pid": os.getpid(),
    "seen": seen,
    "get_tracker_is_run": got is run,
}
accelerator.end_training()
out["state"] = run.state
Path(a.report, f"rank-{rank}.json").write_text(json.dumps(out))
# A clean exit: drop what holds the gloo process group (the DDP wrapper) and
# end the group while the interpreter is alive. Left to the interpreter's own
# teardown, gloo's threads can abort a rank ("terminate called without an active
# exception"), with or without rankwise.
del model, opt, loader
accelerator.free_memory()
gc.collect()
if torch.distributed.is_initialized():
    torch.distributed.destroy_process_group()
