"""What rank health costs a training step: sampling + console capture + watchdog, on vs off.

The training step of ``examples/ddp_digits.py`` (same data, model, optimizer, batch and
``log()`` call; the data set is the example's own ``datasets()``) runs under torchrun on
CPU with gloo, in one run whose health components are switched between three
configurations in blocks of ``--block-seconds`` each, round-robin for ``--cycles``
cycles, so that the drift of a shared machine hits all three alike:

* ``off``      — no system sampler, no console capture, no watchdog;
* ``default``  — what ``init()`` attaches unless told otherwise: system metrics every
  10 s, console ``wrap``, watchdog at 5 min. The ≤ 1 % budget is about this one, and a
  block lasts long enough (12 s by default) for its sampler to fire;
* ``stressed`` — system metrics every 0.5 s, console ``redirect``, watchdog at 2 s
  (polling every 0.4 s): far busier than anyone would run it, an upper bound.

Blocks are counted in steps, equal on every rank (DDP keeps them in lockstep), from the
step time measured in a warm-up. A step is timed from fetching its batch to the return
of ``log()``; the first step of each block, which pays for the switch, is left out; the
example's per-epoch evaluation is not run. Reported: median and mean step time per
configuration over all ranks, and the overhead against ``off``.

    python benchmarks/bench_health_overhead.py [--block-seconds 12] [--cycles 3]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "ddp_digits.py"
CONFIGS: dict[str, dict[str, Any] | None] = {
    "off": None,
    "default": {},
    "stressed": {"system_interval": 0.5, "console": "redirect", "stall_timeout": 2.0},
}
HEALTH_THREADS = {
    "rankwise-system", "rankwise-watchdog", "rankwise-console", "rankwise-stdout",
    "rankwise-stderr",
}  # fmt: skip


def worker(args: argparse.Namespace) -> None:
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.utils.data import DataLoader
    from torch.utils.data.distributed import DistributedSampler

    import rankwise
    from rankwise.sdk import console, system, watchdog

    spec = importlib.util.spec_from_file_location("ddp_digits", EXAMPLE)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    run = rankwise.init(
        project="bench-health", run_mode="shared", system=False, console="off", stall_timeout=0
    )
    train, _ = example.datasets(0)
    sampler = DistributedSampler(train, shuffle=True, seed=0)
    loader = DataLoader(train, batch_size=32, sampler=sampler)
    model = DDP(nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    def batches():  # type: ignore[no-untyped-def]
        epoch = 0
        while True:
            sampler.set_epoch(epoch)
            for xb, yb in loader:
                yield epoch, xb, yb
            epoch += 1

    def train_step(data) -> None:  # type: ignore[no-untyped-def]
        # As in examples/ddp_digits.py: forward, backward, step, one log() call.
        t0 = time.perf_counter()
        epoch, xb, yb = next(data)
        loss = F.cross_entropy(model(xb), yb)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        elapsed = time.perf_counter() - t0
        run.log(
            {"train/loss": loss.detach(), "train/samples_per_s": len(xb) / elapsed,
             "epoch": epoch},
            weight=len(xb),
        )  # fmt: skip

    data = batches()
    warmup = 200
    t0 = time.perf_counter()
    for _ in range(warmup):
        train_step(data)
    slowest = torch.tensor([(time.perf_counter() - t0) / warmup])
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)  # every rank agrees on the block length
    block = max(50, int(args.block_seconds / float(slowest)))

    names = list(CONFIGS)
    times: dict[str, list[float]] = {name: [] for name in names}
    helper_cpu = dict.fromkeys(names, 0.0)  # CPU seconds of the health threads
    for index in range(args.cycles * len(names)):
        name = names[index % len(names)]
        config = CONFIGS[name]
        handle = run.handle()
        assert handle is not None
        opts = handle.settings.override(system=True, console="wrap", stall_timeout=300.0)
        opts = opts.override(**(config or {}))
        mods = (system, watchdog, console) if config is not None else ()
        parts = [p for p in (m.attach(handle, opts) for m in mods) if p is not None]
        train_step(data)  # the switch's step: not timed
        for _ in range(block - 1):
            t0 = time.perf_counter()
            train_step(data)
            times[name].append(time.perf_counter() - t0)
        helper_cpu[name] += helper_seconds()
        for part in parts:
            part.stop(time.monotonic() + 5.0)
        run._components = [c for c in run._components if c[0] not in parts]
    step = warmup + block * args.cycles * len(names)
    gathered: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, (times, helper_cpu))
    run.finish()
    dist.destroy_process_group()
    if rank == 0:
        merged = {name: [t for g, _ in gathered for t in g[name]] for name in names}
        cpu = {name: sum(c[name] for _, c in gathered) for name in names}
        print("RESULT " + json.dumps({"steps": step, "times": merged, "cpu": cpu}), flush=True)


def helper_seconds() -> float:
    """CPU seconds used so far by the live health threads of this process, from the
    kernel's per-thread accounting (Linux ``schedstat``, nanoseconds): unaffected by
    whatever else the machine runs."""
    total = 0.0
    for t in threading.enumerate():
        if t.name in HEALTH_THREADS:
            try:
                with open(f"/proc/self/task/{t.native_id}/schedstat") as f:
                    total += int(f.read().split()[0]) / 1e9
            except (OSError, ValueError, IndexError):
                pass  # the thread just ended, or not Linux
    return total


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--block-seconds", type=float, default=12.0)
    p.add_argument("--cycles", type=int, default=3)
    p.add_argument("--nproc", type=int, default=2)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return worker(args)

    with tempfile.TemporaryDirectory(prefix="rankwise-bench-") as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith("RANKWISE_")}
        env.update(RANKWISE_DIR=tmp, OMP_NUM_THREADS="1")
        cmd = [
            sys.executable, "-m", "torch.distributed.run", "--standalone",
            f"--nproc-per-node={args.nproc}", __file__, "--worker",
            "--block-seconds", str(args.block_seconds), "--cycles", str(args.cycles),
        ]  # fmt: skip
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=3600)
        wall = time.perf_counter() - t0
    lines = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        sys.exit(f"torchrun failed\n{proc.stderr[-3000:]}")
    result = json.loads(lines[-1][len("RESULT ") :])
    times: dict[str, list[float]] = result["times"]
    base_med = statistics.median(times["off"])
    base_mean = statistics.fmean(times["off"])
    print(
        f"{args.nproc} ranks x {result['steps']} steps of examples/ddp_digits.py "
        f"(torchrun, gloo, CPU), {args.cycles} cycles of {args.block_seconds:g} s blocks, "
        f"{wall:.0f} s wall"
    )
    head = ("config", "steps", "median", "overhead", "mean", "overhead")
    print("{:9s} {:>6s} {:>10s} {:>9s} {:>10s} {:>9s}".format(*head))
    for name, got in times.items():
        med, mean = statistics.median(got), statistics.fmean(got)
        print(
            f"{name:9s} {len(got):6d} {med * 1e3:7.3f} ms {100 * (med / base_med - 1):+8.2f}% "
            f"{mean * 1e3:7.3f} ms {100 * (mean / base_mean - 1):+8.2f}%"
        )
    # Wall-clock figures on a shared machine carry its noise; the CPU the health threads
    # used is measured per thread by the kernel, so it bounds their cost without noise.
    print("\nCPU used by the health threads (sampler, watchdog, console), per step:")
    for name, got in times.items():
        per_step = result["cpu"][name] / len(got)
        print(
            f"{name:9s} {per_step * 1e6:8.2f} us/step = {100 * per_step / base_med:6.3f}% "
            "of the median step off"
        )


if __name__ == "__main__":
    main()
