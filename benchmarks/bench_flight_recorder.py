"""What PyTorch's flight recorder costs a collective: a gloo all_reduce loop, buffer on vs off.

``rankwise.init()`` sets ``TORCH_FR_BUFFER_SIZE=2000`` when the variable is unset and no
process group exists yet (``rankwise/sdk/flight.py``), so every collective of the job
then leaves an entry in the recorder's ring. torch reads the variable when it makes its
first process group, so on and off cannot alternate inside one process: each *round*
launches one job with the buffer at 2000 and one with it at 0, in alternating order, so
that the drift of a shared machine hits both alike. Each job (``--ranks`` CPU processes,
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

    os.environ["TORCH_FR_BUFFER_SIZE"] = buffer  # the children read it at their first group
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

    got: dict[str, list[float]] = {"on": [], "off": []}
    port = 29600 + os.getpid() % 1000
    for r in range(args.rounds):
        order = ("on", "off") if r % 2 == 0 else ("off", "on")
        for name in order:
            port += 1
            got[name].append(one_job("2000" if name == "on" else "0", args, port))
        print(f"round {r + 1}/{args.rounds}: on {got['on'][-1] * 1e6:.1f} µs, "
              f"off {got['off'][-1] * 1e6:.1f} µs", file=sys.stderr)  # fmt: skip
    on, off = statistics.median(got["on"]), statistics.median(got["off"])
    print(f"torch {torch.__version__}, {args.ranks} ranks, gloo, all_reduce of "
          f"{args.numel} float32, {args.iters} calls a job, {args.rounds} rounds")  # fmt: skip
    print(f"flight recorder off (TORCH_FR_BUFFER_SIZE=0):    median {off * 1e6:8.1f} µs/call")
    print(f"flight recorder on  (TORCH_FR_BUFFER_SIZE=2000): median {on * 1e6:8.1f} µs/call")
    print(f"overhead: {100 * (on - off) / off:+.1f} % (median of the rounds' medians)")
    spread = [100 * (a - b) / b for a, b in zip(got["on"], got["off"])]
    print(f"per round: {', '.join(f'{s:+.1f} %' for s in spread)}")


if __name__ == "__main__":
    main()
