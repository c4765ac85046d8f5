"""Every rank of a gloo job logs artifacts of one name at the same moment (after a barrier).

``ckpt``: each rank its own content -> one version each, none lost. ``shared``: the same
bytes on every rank -> one version. Then every rank uses ``ckpt:v0`` (lineage). Each rank
writes what it saw to ``--report``/rank-N.json.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import torch.distributed as dist

import rankwise

p = argparse.ArgumentParser()
p.add_argument("--dir", required=True)
p.add_argument("--report", required=True)
a = p.parse_args()

dist.init_process_group("gloo")
rank = dist.get_rank()
run = rankwise.init(project="arts", id="job", dir=a.dir, run_mode="shared", system=False)
mine = Path(a.report) / f"src-{rank}"
mine.mkdir(parents=True)
(mine / "weights.bin").write_bytes(f"rank {rank} ".encode() * 100_000)
(mine / "shared.bin").write_bytes(b"the same on every rank " * 50_000)

ckpt = rankwise.Artifact("ckpt", "model", metadata={"rank": rank})
ckpt.add_file(mine / "weights.bin")
shared = rankwise.Artifact("shared", "dataset")
shared.add_file(mine / "shared.bin", name="data/shared.bin")
dist.barrier()
run.log_artifact(ckpt, aliases=[f"from-rank-{rank}"])
run.log_artifact(shared)
ckpt.wait(60)
shared.wait(60)
dist.barrier()
used = run.use_artifact("ckpt:v0")
got = Path(used.download(mine / "v0"), "weights.bin").read_bytes()
report = {
    "ckpt": ckpt.version,
    "shared": shared.version,
    "shared_copied": shared.bytes_copied,
    "v0_first_bytes": got[:8].decode(),
    "label": run.label,
}
(Path(a.report) / f"rank-{rank}.json").write_text(json.dumps(report))
run.finish()
dist.destroy_process_group()
os._exit(0)
