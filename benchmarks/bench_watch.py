"""What ``run.watch(model)`` costs a training step, as a share of the step's time.

A ~10M-parameter MLP (1024 → 2560 → 2560 → 512, 10.5M parameters) trains with SGD on
random batches; every step logs its loss to a local run. Blocks of ``--block`` steps
alternate watch off / watch on (``run.watch`` before an "on" block, ``run.unwatch`` after,
so each "on" block of k·log_freq steps holds exactly k recorded passes). Each block is
timed by the process's CPU time (``time.process_time``: every thread, the stream writer's
included), which a machine shared with other jobs disturbs far less than wall time, and
also by wall time. The overhead is the median over pairs of (on − off) / off. Because
that difference is small beside a shared machine's noise, the work of one recorded pass
(every gradient's row, as the hooks make it) is also timed alone and spread over
``log_freq`` steps. Torch runs
one intra-op thread unless ``--threads`` says otherwise: idle OpenMP threads spin, and
their CPU time would follow the machine's load rather than the work.

    python benchmarks/bench_watch.py                       # log_freq 100 and 1, CPU
    python benchmarks/bench_watch.py --log-freq 100 --pairs 7 --log all
    python benchmarks/bench_watch.py --device cuda         # a GPU (waits on the device
                                                           # once per block, not per step)
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from typing import Any

import torch

import rankwise


def build(device: str) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(1024, 2560),
        torch.nn.ReLU(),
        torch.nn.Linear(2560, 2560),
        torch.nn.ReLU(),
        torch.nn.Linear(2560, 512),
    ).to(device)
    return model, torch.optim.SGD(model.parameters(), lr=1e-3)


def block(run: Any, model: Any, opt: Any, batches: list[Any], device: str) -> tuple[float, float]:
    """CPU seconds and wall seconds of one block of steps."""
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    sync()
    cpu, wall = time.process_time(), time.perf_counter()
    for x in batches:
        opt.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        run.log({"loss": loss.detach()})  # the writer thread reads the tensor
    sync()
    return time.process_time() - cpu, time.perf_counter() - wall


def direct_ms(args: argparse.Namespace) -> float:
    """CPU ms of one recorded pass's own work, timed alone: the rows of every gradient
    (and parameter, by ``--log``) as the hooks make them. Median of 7."""
    from rankwise.sdk import tensor_stats

    model, _ = build(args.device)
    model(torch.randn(args.batch, 1024, device=args.device)).pow(2).mean().backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    tensors = [] if args.log == "parameters" else grads
    tensors += list(model.parameters()) if args.log in ("parameters", "all") else []
    times = []
    for _ in range(7):
        cpu = time.process_time()
        rows = [tensor_stats.row(t, hist=args.log is not None) for t in tensors]
        if args.device == "cuda":
            torch.stack(rows).cpu()
        times.append(time.process_time() - cpu)
    return statistics.median(times) * 1e3


def measure(args: argparse.Namespace, log_freq: int, root: str) -> dict[str, float]:
    model, opt = build(args.device)
    steps = args.block or max(2 * log_freq, 50)
    batches = [torch.randn(args.batch, 1024, device=args.device) for _ in range(steps)]
    run = rankwise.init(project="bench", dir=root, id=f"watch-{log_freq}")
    block(run, model, opt, batches[:10], args.device)  # warm up
    offs: list[tuple[float, float]] = []
    ons: list[tuple[float, float]] = []
    for _ in range(args.pairs):
        offs.append(block(run, model, opt, batches, args.device))
        run.watch(model, log=args.log, log_freq=log_freq)
        ons.append(block(run, model, opt, batches, args.device))
        run.unwatch(model)
    run.finish()
    out: dict[str, float] = {"steps": steps}
    for i, what in enumerate(("cpu", "wall")):
        pairs = [(on[i] - off[i]) / off[i] * 100 for off, on in zip(offs, ons, strict=True)]
        out[f"{what}_off_ms"] = statistics.median(o[i] for o in offs) / steps * 1e3
        out[f"{what}_on_ms"] = statistics.median(o[i] for o in ons) / steps * 1e3
        out[f"{what}_pct"] = statistics.median(pairs)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--log-freq", type=int, nargs="+", default=[100, 1])
    p.add_argument("--log", default="gradients", help="gradients | parameters | all | none")
    p.add_argument("--pairs", type=int, default=5, help="off/on block pairs")
    p.add_argument("--block", type=int, default=0, help="steps a block (default 2*log_freq)")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--device", default="cpu")
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch intra-op threads (default 1: OpenMP threads spin while they wait, so with "
        "more, CPU time measures the machine's load as much as the work)",
    )
    args = p.parse_args()
    args.log = None if args.log == "none" else args.log
    if args.threads:
        torch.set_num_threads(args.threads)
    model, _ = build("cpu")
    n = sum(p.numel() for p in model.parameters())
    print(
        f"model: {n / 1e6:.1f}M parameters, batch {args.batch}, device {args.device}, "
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, log={args.log}"
    )
    print(
        "log_freq  steps/block  CPU ms/step off → on   overhead (CPU)   "
        "wall ms/step off → on   overhead (wall)"
    )
    one = direct_ms(args)
    print(f"one recorded pass's own work, timed alone: {one:.1f} ms CPU")
    with tempfile.TemporaryDirectory() as root:
        for log_freq in args.log_freq:
            r = measure(args, log_freq, root)
            print(
                f"{log_freq:>8}  {r['steps']:>11.0f}  {r['cpu_off_ms']:>8.1f} → "
                f"{r['cpu_on_ms']:<8.1f}   {r['cpu_pct']:>+13.2f}%   "
                f"{r['wall_off_ms']:>8.1f} → {r['wall_on_ms']:<8.1f}   {r['wall_pct']:>+13.2f}%"
            )
            print(
                f"{'':>8}  that pass's work alone, per step: {one / log_freq:.2f} ms = "
                f"{one / log_freq / r['cpu_off_ms'] * 100:.2f}% of the CPU step"
            )


if __name__ == "__main__":
    main()
