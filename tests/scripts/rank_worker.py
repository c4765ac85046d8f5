"""One rank of a test job (tests/e2e/test_launchers.py, tests/unit/test_detect.py).

Calls ``rankwise.init()`` under whatever launcher environment it was started in, logs
``--steps`` values with ``step=None``, writes a JSON report of what the run looked like
from this process to ``<report>/<RANK>.<restart>.json``, then ends as ``--die`` says.

Every value encodes who logged it and when: ``rank * 1000 + incarnation * 100 + i + 0.25``
(exact in binary floating point), so a reader can tell a value logged twice, lost, or
written into the wrong stream.

``--die KIND --die-rank K``: once every rank's values are in its stream file (each
touches a ready file in ``<report>`` after a writer sync),
rank K ends by ``exception`` / ``sigkill`` / ``exit3`` while the other ranks sleep until
the launcher terminates them. With ``--once`` this happens only on the first
incarnation (TORCHELASTIC_RESTART_COUNT=0); later incarnations finish normally.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

parser = argparse.ArgumentParser()
parser.add_argument("--dir", required=True)
parser.add_argument("--report", required=True)
parser.add_argument("--mode", default="auto")
parser.add_argument("--scope", default="global")
parser.add_argument("--steps", type=int, default=5)
parser.add_argument("--pg", choices=("none", "before", "after"), default="none")
parser.add_argument("--die", choices=("none", "exception", "sigkill", "exit3"), default="none")
parser.add_argument("--die-rank", type=int, default=1)
parser.add_argument("--once", action="store_true")
args = parser.parse_args()

env_rank = next(
    (
        int(os.environ[k])
        for k in ("RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK")
        if k in os.environ
    ),
    0,
)
restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
report = Path(args.report)
report.mkdir(parents=True, exist_ok=True)

if args.pg != "none":
    import torch
    import torch.distributed as dist

if args.pg == "before":
    dist.init_process_group("gloo")

import rankwise  # noqa: E402

run = rankwise.init(run_mode=args.mode, rank_scope=args.scope, dir=args.dir, project="launch")

if args.pg == "after":
    dist.init_process_group("gloo")
if args.pg != "none":
    # Prove the job is a real one: every rank takes part in a collective.
    total = torch.tensor([float(run.rank)])
    dist.all_reduce(total)
    assert total.item() == sum(range(run.world_size)), total

logged = []
for i in range(args.steps):
    value = run.rank * 1000 + run.incarnation * 100 + i + 0.25
    run.log({"value": value, "rank": run.rank})
    logged.append(value)

info = {
    "env_rank": env_rank,
    "pid": os.getpid(),
    "restart": restart,
    "recording": bool(run),
    "id": run.id,
    "group": run.group,
    "label": run.label,
    "is_primary": run.is_primary,
    "rank": run.rank,
    "world_size": run.world_size,
    "local_rank": run.local_rank,
    "local_world_size": run.local_world_size,
    "node_rank": run.node_rank,
    "num_nodes": run.num_nodes,
    "incarnation": run.incarnation,
    "step": run.step,
    "logged": logged,
}
(report / f"{env_rank}.{restart}.json").write_text(json.dumps(info))
if run:  # what this rank logged is in its stream file before it says ready
    assert run._writer is not None and run._writer.sync(timeout=60), "the writer is stuck"
(report / f"ready-{env_rank}-{restart}").touch()

dying = args.die != "none" and not (args.once and restart > 0)
if dying and env_rank == args.die_rank:
    world = run.world_size
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not all(
        (report / f"ready-{r}-{restart}").exists() for r in range(world)
    ):
        time.sleep(0.02)
    if args.die == "exception":
        raise RuntimeError(f"rank {env_rank} fails on purpose")
    if args.die == "exit3":
        sys.exit(3)
    os.kill(os.getpid(), signal.SIGKILL)
elif dying:
    time.sleep(120)  # until the launcher terminates this rank (SIGTERM)
    sys.exit("not terminated by the launcher")

if args.pg != "none":
    dist.barrier()
    dist.destroy_process_group()
run.finish()
