"""TensorBoard in: the cost of live capture on ``add_scalar``, and the import's speed.

``scalar``: ``SummaryWriter.add_scalar`` of ``torch.utils.tensorboard`` (and of
tensorboardX with ``--writer tensorboardX``) with rankwise's capture on (the wrapped
method, recording into a run) against the writer's own method on the same writer, in
interleaved rounds in one process, so machine noise hits both alike. Prints the median
per-call time of each and their ratio per round (the target: within 1.10). Then
rankwise's own cost alone: the same wrapper around a writer method that does nothing,
against that method, in interleaved rounds (training thread CPU, ns per call).
``--logger-thread`` (tensorboardX only) measures the alternative issue 24 allows instead:
capturing scalars on tensorboardX's own logger thread (``EventsWriter.write_event``), the
writer's own ``add_scalar`` left as it is on the training thread (``logger_thread``).

``import``: writes ``--events`` scalar events (default 1,000,000) over ``--dirs`` event
directories ``rank_N`` with tensorboardX's writer (once; kept in ``--keep`` if given),
then times ``rankwise import tensorboard`` of them: wall and CPU seconds.

    python benchmarks/bench_tensorboard.py scalar [--calls 1000] [--rounds 201]
        [--writer torch|tensorboardX] [--logger-thread]
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
    tail = logger_thread(run, plain, tmp, args.rounds, n) if args.logger_thread else []
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
    for line in tail:
        print(line)


def own_cost(tb: Any, rounds: int, n: int) -> float:
    """Median training-thread ns per call that the capture adds to a no-op method."""

    class Null:
        _rankwise_ns = ""  # no key prefix, as for a process's only writer

        def add_scalar(
            self, tag: str, scalar_value: Any, global_step: Any = None, walltime: Any = None
        ) -> None:  # the writers' parameter names: the capture's wrapper is made from them
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


def logger_thread(run: Any, plain: Any, tmp: str, rounds: int, n: int) -> list[str]:
    """The scalars of a tensorboardX writer captured on its logger thread: each event its
    ``_EventLoggerThread`` writes is handed to the run there (``Run._log_one`` under a
    lock: ``Run.log`` is not thread-safe), the writer's own ``add_scalar`` called on the
    training thread. Against a second writer left alone, in interleaved rounds. A
    measurement only: the prototype lacks what a capture must also do (the prefix,
    ``global_step=None``, draining the writers' queues before the run finishes)."""
    import threading

    import tensorboardX

    alone = tensorboardX.SummaryWriter(os.path.join(tmp, "alone"))
    hooked = tensorboardX.SummaryWriter(os.path.join(tmp, "hooked"))
    events = hooked._get_file_writer().event_writer._ev_writer
    write, lock = events.write_event, threading.Lock()
    taken = [0]

    def write_event(event: Any) -> None:  # on tensorboardX's logger thread
        write(event)
        step = event.step
        for v in event.summary.value:
            if v.WhichOneof("value") == "simple_value":
                with lock:
                    run._log_one(v.tag, v.simple_value, step)
                    taken[0] += 1

    events.write_event = write_event
    got: dict[str, list[tuple[float, float]]] = {"alone": [], "hooked": []}
    for r in range(rounds):
        order = (("alone", alone), ("hooked", hooked))[:: 1 if r % 2 else -1]
        for name, writer in order:
            base = (2 * rounds + r) * n
            t0, p0 = time.thread_time_ns(), time.process_time_ns()
            for i in range(n):
                plain(writer, "train/loss", 0.5, base + i)
            got[name].append(((time.thread_time_ns() - t0) / n, (time.process_time_ns() - p0) / n))
    alone.close()
    hooked.close()  # its logger thread has written (and handed over) every event
    assert taken[0] == rounds * n, (taken[0], rounds * n)
    out = ["  captured on tensorboardX's logger thread instead (--logger-thread), medians:"]
    for i, what in enumerate(("training thread CPU", "process CPU (all threads)")):
        a = statistics.median(x[i] for x in got["alone"])
        b = statistics.median(x[i] for x in got["hooked"])
        ratios = [y[i] / x[i] for x, y in zip(got["alone"], got["hooked"], strict=True)]
        out.append(
            f"  {what:27s} alone {a / 1000:7.2f} µs  logger-thread capture {b / 1000:7.2f} µs"
            f"  ratio {b / a:.3f} (per round, median {statistics.median(ratios):.3f})"
        )
    return out


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
    s.add_argument("--logger-thread", action="store_true", help="tensorboardX: also measure "
                   "scalars captured on its logger thread instead")  # fmt: skip
    i = sub.add_parser("import")
    i.add_argument("--events", type=int, default=1_000_000)
    i.add_argument("--dirs", type=int, default=2)
    i.add_argument("--keep", default=None, help="event folder to reuse (written if missing)")
    args = p.parse_args()
    if getattr(args, "logger_thread", False) and args.writer != "tensorboardX":
        p.error("--logger-thread needs --writer tensorboardX")
    bench_scalar(args) if args.what == "scalar" else bench_import(args)


if __name__ == "__main__":
    main()
