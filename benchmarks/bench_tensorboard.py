"""TensorBoard in: the cost of live capture on ``add_scalar``, and the import's speed.

``scalar``: ``SummaryWriter.add_scalar`` of ``torch.utils.tensorboard`` (and of
tensorboardX with ``--writer tensorboardX``) with rankwise's capture on (the wrapped
method, recording into a run) against the writer's own method on the same writer, in
interleaved rounds in one process, so machine noise hits both alike. Prints the median
per-call time of each and their ratio per round (the target: within 1.10). Then
rankwise's own cost alone: the same wrapper around a writer method that does nothing,
against that method, in interleaved rounds (training thread CPU, ns per call).

``import``: writes ``--events`` scalar events (default 1,000,000) over ``--dirs`` event
directories ``rank_N`` with tensorboardX's writer (once; kept in ``--keep`` if given),
then times ``rankwise import tensorboard`` of them: wall and CPU seconds.

    python benchmarks/bench_tensorboard.py scalar [--calls 1000] [--rounds 201]
    python benchmarks/bench_tensorboard.py import [--events 1000000] [--dirs 2] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import rankwise


def writer_class(name: str) -> type:
    if name == "tensorboardX":
        import tensorboardX

        return tensorboardX.SummaryWriter  # type: ignore[no-any-return]
    from torch.utils.tensorboard import SummaryWriter

    return SummaryWriter


def bench_scalar(args: argparse.Namespace) -> None:
    from rankwise.sdk import tensorboard as tb

    tmp = tempfile.mkdtemp()
    cls = writer_class(args.writer)
    run = rankwise.init(project="bench", dir=tmp, tensorboard=True, system=False)
    wrapped = cls.add_scalar
    plain = wrapped.__wrapped__  # the writer's own method
    assert getattr(wrapped, "_rankwise", False) and tb._target is run
    writer = cls(os.path.join(tmp, "tb"))
    n = args.calls
    # per round and setting: (wall, training thread CPU, process CPU) ns per call
    got: dict[str, list[tuple[float, float, float]]] = {"plain": [], "rankwise": []}
    for r in range(args.rounds):
        order = (("plain", plain), ("rankwise", wrapped))[:: 1 if r % 2 else -1]
        for name, fn in order:
            base = r * n
            w0, t0, p0 = time.perf_counter_ns(), time.thread_time_ns(), time.process_time_ns()
            for i in range(n):
                fn(writer, "train/loss", 0.5, base + i)
            got[name].append(
                (
                    (time.perf_counter_ns() - w0) / n,
                    (time.thread_time_ns() - t0) / n,
                    (time.process_time_ns() - p0) / n,
                )
            )
    writer.close()
    own = own_cost(tb, args.rounds, n)
    run.finish()
    print(f"add_scalar ({args.writer}), {n} calls x {args.rounds} rounds each, medians:")
    for i, what in enumerate(("wall", "training thread CPU", "process CPU (all threads)")):
        alone = statistics.median(x[i] for x in got["plain"])
        with_rw = statistics.median(x[i] for x in got["rankwise"])
        ratios = [b[i] / a[i] for a, b in zip(got["plain"], got["rankwise"], strict=True)]
        print(
            f"  {what:27s} alone {alone / 1000:7.2f} µs  with rankwise {with_rw / 1000:7.2f} µs"
            f"  ratio {with_rw / alone:.3f} (per round, median {statistics.median(ratios):.3f})"
        )
    print("  target: training thread within 1.10 of the writer alone")
    print(
        f"  rankwise's own cost (around a writer method that does nothing): {own:.0f} ns "
        "per call, training thread CPU"
    )


def own_cost(tb: Any, rounds: int, n: int) -> float:
    """Median training-thread ns per call that the capture adds to a no-op method."""

    class Null:
        _rankwise_ns = ""  # no key prefix, as for a process's only writer

        def add_scalar(self, tag: str, value: Any, step: Any = None, walltime: Any = None) -> None:
            return None

    plain = Null.add_scalar
    wrapped = tb._wrapped_scalar(plain)
    writer = Null()
    got: dict[str, list[float]] = {"plain": [], "rankwise": []}
    for r in range(rounds):
        order = (("plain", plain), ("rankwise", wrapped))[:: 1 if r % 2 else -1]
        for name, fn in order:
            base = (rounds + r) * n
            t0 = time.thread_time_ns()
            for i in range(n):
                fn(writer, "train/loss", 0.5, base + i)
            got[name].append((time.thread_time_ns() - t0) / n)
    return statistics.median(b - a for a, b in zip(got["plain"], got["rankwise"], strict=True))


def write_events(folder: Path, events: int, dirs: int) -> None:
    import tensorboardX

    per = events // dirs
    tags = [f"m{j}" for j in range(10)]
    for d in range(dirs):
        w = tensorboardX.SummaryWriter(str(folder / f"rank_{d}"), max_queue=1000)
        for i in range(per // len(tags)):
            for tag in tags:
                w.add_scalar(tag, i * 0.25 + d, i)
        w.close()


def children_cpu() -> float:
    t = os.times()
    return t.children_user + t.children_system


def bench_import(args: argparse.Namespace) -> None:
    from rankwise.tensorboard_import import describe, import_tensorboard

    src = Path(args.keep) if args.keep else Path(tempfile.mkdtemp()) / "tb"
    if not src.exists():
        t = time.monotonic()
        write_events(src, args.events, args.dirs)
        print(f"wrote {args.events} events in {time.monotonic() - t:.1f}s under {src}")
    data = Path(tempfile.mkdtemp())
    w0, c0, k0 = time.perf_counter(), time.process_time(), children_cpu()
    report = import_tensorboard(src, data, "bench", "tb")
    wall = time.perf_counter() - w0
    cpu = time.process_time() - c0 + children_cpu() - k0  # the import's worker processes too
    for line in describe(report, wall):
        print(line)
    values = sum(s.events for s in report.streams)
    print(f"import: {values} scalar values in {wall:.2f}s wall, {cpu:.2f}s CPU "
          f"({values / wall / 1e6:.2f} M values/s wall)")  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="what", required=True)
    s = sub.add_parser("scalar")
    s.add_argument("--calls", type=int, default=1000)  # short rounds: neighbours see alike
    s.add_argument("--rounds", type=int, default=201)
    s.add_argument("--writer", choices=("torch", "tensorboardX"), default="torch")
    i = sub.add_parser("import")
    i.add_argument("--events", type=int, default=1_000_000)
    i.add_argument("--dirs", type=int, default=2)
    i.add_argument("--keep", default=None, help="event folder to reuse (written if missing)")
    args = p.parse_args()
    bench_scalar(args) if args.what == "scalar" else bench_import(args)


if __name__ == "__main__":
    main()
