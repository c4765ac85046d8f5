"""What PyTorch's flight recorder costs a collective: a gloo all_reduce loop, buffer on vs off.

``rankwise.init()`` sets ``TORCH_FR_BUFFER_SIZE=2000`` when the variable is unset and no
process group exists yet (``rankwise/sdk/flight.py``), so every collective of the job
then leaves an entry in the recorder's ring. torch reads the variable when it makes its
first process group, so the settings cannot alternate inside one process: each *round*
launches one job with the buffer at 2000 ("on", what rankwise sets), one at 0 ("off")
and one with the variable unset ("torch default": torch 2.13 keeps a ring of its own on
gloo even then), in rotating order, so that the drift of a shared machine hits all
alike. Each job (``--ranks`` CPU processes,
gloo, ``torch.multiprocessing``) times ``--iters`` all_reduces of a ``--numel`` float32
tensor after a warm-up, and reports its median time per call (rank 0's); the rounds'
medians are then summarised per setting, with the overhead of "on" against "off".

    python benchmarks/bench_flight_recorder.py [--rounds 7] [--ranks 2] [--iters 2000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path


def _job(rank: int, world: int, port: int, iters: int, numel: int, out: str) -> None:
    import torch
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    x = torch.ones(numel)
    for _ in range(100):  # warm-up
        dist.all_reduce(x)
    times = []
    for _ in range(iters):
        t = time.perf_counter()
        dist.all_reduce(x)
        times.append(time.perf_counter() - t)
    dist.barrier()
    if rank == 0:
        Path(out).write_text(str(statistics.median(times)))
    dist.destroy_process_group()


def one_job(buffer: str, args: argparse.Namespace, port: int) -> float:
    import torch.multiprocessing as mp

    os.environ.pop("TORCH_FR_BUFFER_SIZE", None)
    if buffer:  # the children read it at their first group
        os.environ["TORCH_FR_BUFFER_SIZE"] = buffer
    with tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / "median")
        mp.spawn(_job, args=(args.ranks, port, args.iters, args.numel, out), nprocs=args.ranks)
        return float(Path(out).read_text())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--iters", type=int, default=2000)
    p.add_argument("--numel", type=int, default=1024, help="float32 elements per all_reduce")
    args = p.parse_args()
    import torch

    arms = {"on": "2000", "off": "0", "torch default": ""}
    got: dict[str, list[float]] = {name: [] for name in arms}
    port = 29600 + os.getpid() % 1000
    names = list(arms)
    for r in range(args.rounds):
        for name in names[r % 3 :] + names[: r % 3]:
            port += 1
            got[name].append(one_job(arms[name], args, port))
        line = ", ".join(f"{n} {got[n][-1] * 1e6:.1f} µs" for n in names)
        print(f"round {r + 1}/{args.rounds}: {line}", file=sys.stderr)
    med = {n: statistics.median(v) for n, v in got.items()}
    print(f"torch {torch.__version__}, {args.ranks} ranks, gloo, all_reduce of "
          f"{args.numel} float32, {args.iters} calls a job, {args.rounds} rounds")  # fmt: skip
    print(f"off (TORCH_FR_BUFFER_SIZE=0):      median {med['off'] * 1e6:8.1f} µs/call")
    print(f"torch default (unset):             median {med['torch default'] * 1e6:8.1f} µs/call")
    print(f"on (TORCH_FR_BUFFER_SIZE=2000):    median {med['on'] * 1e6:8.1f} µs/call")
    for other in ("off", "torch default"):
        paired = [100 * (a - b) / b for a, b in zip(got["on"], got[other])]
        print(f"on against {other}: {100 * (med['on'] - med[other]) / med[other]:+.1f} % "
              f"(medians); paired per round: median {statistics.median(paired):+.1f} %, "
              f"from {min(paired):+.1f} % to {max(paired):+.1f} %")  # fmt: skip


if __name__ == "__main__":
    main()
