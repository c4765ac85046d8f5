"""A 4-rank gloo job that goes wrong on one rank (tests/e2e/test_hang_story.py).

* ``hang`` / ``hang-nofr``: every rank logs and all_reduces for a few steps; then rank 2
  sleeps (the odd one out) while ranks 0, 1 and 3 enter the next all_reduce, which rank
  2 never joins. The stall timeout is short; the test reads the hang report and then
  stops the job. ``hang-nofr`` turns rankwise's flight recorder off
  (``Settings(flight_recorder=False)``): the report must stand on the stacks alone.
  ``rankwise.init()`` runs before ``init_process_group()``, so it turns torch's flight
  recorder on itself. Rank 2 writes ``<data>/stray-<mode>`` (the time) as it goes astray
  and comes back when ``<data>/release`` appears; then the job finishes.
* ``nan``: rank 3's loss turns NaN at step ``NAN_AT``; the other ranks' follow one step
  later (after the all_reduce that carries it), and the job finishes.

Usage: ``torchrun --nproc-per-node=4 hang_job.py <data dir> <mode>``.
"""

from __future__ import annotations

import sys
import time
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist

import rankwise

LIMIT = 300.0  # nobody waits longer than this, whatever happens
STEPS = 5
NAN_AT = 7
STALL = 2.0


def main() -> None:
    data, mode = sys.argv[1], sys.argv[2]
    run = rankwise.init(
        project="hang",
        dir=data,
        run_mode="shared",
        console="off",
        system=False,
        stall_timeout=STALL,
        settings={
            "flush_interval": 0.05,
            "heartbeat_interval": 0.5,
            "flight_recorder": mode != "hang-nofr",
        },
    )
    dist.init_process_group("gloo", timeout=timedelta(seconds=LIMIT))
    rank = dist.get_rank()
    if mode == "nan":
        loss = torch.ones(1)
        for step in range(12):
            if rank == 3 and step == NAN_AT:
                loss = torch.tensor([float("nan")])
            run.log({"train/loss": float(loss.item()), "lr": 0.1}, step=step)
            dist.all_reduce(loss)  # NaN reaches every rank at the next step
            loss = loss / 4
            time.sleep(0.02)
        run.finish()
        dist.destroy_process_group()
        return
    for step in range(STEPS):
        run.log({"loss": 1.0 / (step + 1)}, step=step)
        dist.all_reduce(torch.ones(4))
        time.sleep(0.02)
    if rank == 2:
        Path(data, f"stray-{mode}").write_text(str(time.time()))
        release, start = Path(data, "release"), time.monotonic()
        while not release.exists() and time.monotonic() - start < LIMIT:
            time.sleep(0.1)  # STRAY: the odd one out, away from the all_reduce
    dist.all_reduce(torch.ones(4))  # WAIT: where the others wait
    run.log({"loss": 0.0}, step=STEPS)  # logging again clears every stall
    run.finish()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
