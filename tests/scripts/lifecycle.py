"""One process, one way of ending or misbehaving (tests/sdk/test_lifecycle.py).

Usage: ``lifecycle.py SCENARIO DATA_DIR [REPORT_JSON]``. Every scenario uses project
``life`` and run id = the scenario name, logs ``{"x": i}`` for i in 0..4 first and waits
until the writer has put them in the stream file; ``ready`` is printed after that, so a
test may kill the process as soon as it reads it. Scenarios:

ending:   ok, exception, sys_exit_3, raise_systemexit_3, builtin_exit_3,
          main_raises_systemexit_3, caught_systemexit, with_raises, keyboard_interrupt,
          wait (sleeps until the test sends a signal), sigterm_at_format_N (SIGTERM
          at the N-th formatting of the uncaught exception; own_handler_sigterm_at_format_N
          with a handler of the program's own), sigterm_in_the_hooks_lock
fork:     fork (os.fork child uses the run, prints, exits through atexit),
          dataloader (torch DataLoader, 2 fork-context workers that log)
leak:     leak_wrap, leak_redirect (init/log/finish cycles; fds and threads each cycle)
hung fs:  hung_finish, hung_atexit, hung_wait (the writer's os.write never returns;
          hung_wait then sleeps until the test sends SIGTERM)
memory:   drop (writer stalled, tiny max_queue_bytes, many log() calls),
          million (1,000,000 tight-loop log() calls: the writer is outrun, nothing lost),
          large_values (a slowed writer, calls of 20,000 fresh values each: memory
          follows max_queue_bytes),
          disk_full (writes fail part-way with ENOSPC for a while; small retry backlog)

Reports go to REPORT_JSON (JSON) when the scenario has something to tell.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

import rankwise

scenario, data = sys.argv[1], sys.argv[2]
report_path = Path(sys.argv[3]) if len(sys.argv) > 3 else None
FAST = {"flush_interval": 0.05, "heartbeat_interval": 0.5, "finish_timeout": 10.0}


def report(**info: object) -> None:
    assert report_path is not None
    report_path.write_text(json.dumps(info))


def start(**settings: object) -> rankwise.Run:
    run = rankwise.init(project="life", id=scenario, dir=data, settings={**FAST, **settings})
    for i in range(5):
        run.log({"x": i})
    on_disk(run)
    return run


def on_disk(run: rankwise.Run) -> None:
    """Wait until the writer has written everything logged so far to the stream file."""
    assert run._writer is not None and run._writer.sync(timeout=60), "the writer is stuck"


def block_writer_writes(release: threading.Event) -> None:
    """From now on the writer thread's os.write waits for ``release`` (forever if unset)."""
    real_write = os.write

    def write(fd: int, data: bytes) -> int:
        if threading.current_thread().name == "rankwise-writer":
            release.wait()
        return real_write(fd, data)

    os.write = write  # type: ignore[assignment]


def fds() -> list[str]:
    return sorted(os.listdir("/proc/self/fd"))


def fd_targets() -> dict[str, str]:
    out = {}
    for fd in os.listdir("/proc/self/fd"):
        try:
            out[fd] = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            pass
    return out


def threads() -> list[str]:
    return sorted(t.name for t in threading.enumerate())


if scenario == "ok":
    start()
    print("ready", flush=True)

elif scenario == "exception":
    start()
    raise ValueError("the loss went to the moon")

elif scenario == "sys_exit_3":
    start()
    sys.exit(3)

elif scenario == "raise_systemexit_3":
    start()
    raise SystemExit(3)

elif scenario == "builtin_exit_3":
    start()
    exit(3)  # site's exit(), not sys.exit

elif scenario == "main_raises_systemexit_3":

    def main() -> None:
        start()
        raise SystemExit(3)

    main()

elif scenario == "caught_systemexit":
    start()
    try:
        raise SystemExit(3)
    except SystemExit:
        pass  # handled: the program goes on and ends normally

elif scenario == "with_raises":
    with rankwise.init(project="life", id=scenario, dir=data, settings=FAST) as run:
        for i in range(5):
            run.log({"x": i})
        raise RuntimeError("inside the with block")

elif scenario == "keyboard_interrupt":
    start()
    raise KeyboardInterrupt

elif scenario.startswith(("sigterm_at_format_", "own_handler_sigterm_at_format_")):
    # A launcher's SIGTERM lands just as an uncaught exception is ending the run: at the
    # n-th time the exception is made a string (the traceback noted among the console
    # lines, the Finish record's message and traceback, the printed traceback). With
    # "own_handler", the program installed a SIGTERM handler of its own before init().
    import signal

    if scenario.startswith("own_handler"):
        signal.signal(signal.SIGTERM, lambda sig, frame: print("own handler ran", flush=True))

    class Boom(RuntimeError):
        formatted = 0

        def __str__(self) -> str:
            Boom.formatted += 1
            if Boom.formatted == int(scenario.rsplit("_", 1)[1]):
                os.kill(os.getpid(), signal.SIGTERM)  # its handler runs before this returns
            return "the peer went away"

    start(console="wrap")
    raise Boom()

elif scenario == "sigterm_in_the_hooks_lock":
    # The SIGTERM lands while the main thread is inside the hooks' bookkeeping (as when
    # it interrupts forget() or open_runs() of an ending run): the handler must not
    # wait for a lock its own thread holds.
    import signal

    from rankwise.sdk import hooks

    start()
    with hooks._lock:
        os.kill(os.getpid(), signal.SIGTERM)
    sys.exit("the signal did not end the process")

elif scenario == "wait":
    start()
    print("ready", flush=True)
    time.sleep(120)
    sys.exit("no signal came")

elif scenario == "fork":
    run = start()  # what was logged before the fork is in the file
    pid = os.fork()
    if pid == 0:
        # The child tries everything a careless program might do with the parent's run.
        run.log({"x": -1.0, "child": 1.0})
        rankwise.log({"child": 2.0})
        run.config["child"] = True
        run.summary["child"] = 3.0
        print("child output must not reach the parent's stream", flush=True)
        run.finish()
        rankwise.finish()
        sys.exit(0)  # through atexit, which must not write the parent's finish either
    for i in range(5, 10):
        run.log({"x": i})
    _, status = os.waitpid(pid, 0)
    run.finish()
    report(child_status=status, parent_pid=os.getpid())

elif scenario == "dataloader":
    import torch
    from torch.utils.data import DataLoader, Dataset

    run = start()

    class Logs(Dataset):
        def __len__(self) -> int:
            return 8

        def __getitem__(self, i: int) -> torch.Tensor:
            run.log({"x": -1.0, "worker_item": float(i)})
            rankwise.log({"worker_item": float(i)})
            print(f"worker output {i}", flush=True)
            return torch.tensor([float(i)])

    loader = DataLoader(Logs(), batch_size=2, num_workers=2, multiprocessing_context="fork")
    seen = sorted(float(x) for batch in loader for x in batch)
    assert seen == [float(i) for i in range(8)], seen
    for i in range(5, 10):
        run.log({"x": i})
    run.finish()
    report(parent_pid=os.getpid())

elif scenario in ("leak_wrap", "leak_redirect"):
    console = scenario.split("_")[1]
    before = {"fds": fd_targets(), "threads": threads()}
    cycles = []
    for n in range(6):
        run = rankwise.init(
            project="life", id=f"{scenario}-{n}", dir=data, console=console, system=True,
            system_interval=0.1, stall_timeout=0.2, settings=FAST,
        )  # fmt: skip
        for i in range(20):
            run.log({"x": i})
        print(f"cycle {n}", flush=True)
        time.sleep(0.3)  # the system sampler and watchdog get to run
        run.finish()
        cycles.append({"fds": fd_targets(), "threads": threads()})
    report(before=before, cycles=cycles)

elif scenario in ("hung_finish", "hung_atexit", "hung_wait"):
    run = start(finish_timeout=1.0)
    block_writer_writes(threading.Event())  # never set: the disk is gone
    for i in range(5, 10):
        run.log({"x": i})
    if scenario == "hung_wait":
        print("ready", flush=True)
        time.sleep(120)
        sys.exit("no signal came")
    if scenario == "hung_finish":
        t0 = time.monotonic()
        run.finish()
        print(f"finish took {time.monotonic() - t0:.3f}", flush=True)
    print(f"exiting at {time.time():.3f}", flush=True)

elif scenario == "drop":
    from rankwise.sdk.writer import UNIT, call_units

    max_bytes, calls, stall = 16_384, 20000, 0.3
    max_queue = max_bytes // UNIT // call_units({"a": 0, "b": 0, "c": 0}) + 1  # calls that fit
    run = rankwise.init(
        project="life", id=scenario, dir=data, console="off", system=False,
        settings={**FAST, "max_queue_bytes": max_bytes, "writer_stall_timeout": stall},
    )  # fmt: skip
    release = threading.Event()
    block_writer_writes(release)
    slowest = 0.0
    t_all = time.perf_counter()
    for i in range(calls):
        t0 = time.perf_counter()
        run.log({"a": i, "b": 1.0, "c": 2.0})
        slowest = max(slowest, time.perf_counter() - t0)
    total = time.perf_counter() - t_all
    release.set()
    run.finish()
    report(calls=calls, per_call=3, max_queue=max_queue, slowest=slowest, total=total, stall=stall)

elif scenario == "million":
    run = rankwise.init(project="life", id=scenario, dir=data, console="off", system=False)
    t0 = time.perf_counter()
    for i in range(1_000_000):
        run.log({"series": i * 0.5}, step=i)
    loop = time.perf_counter() - t0
    run.finish()
    report(loop=loop, finish=time.perf_counter() - t0 - loop)

elif scenario == "large_values":
    max_bytes, calls, per_call = 8 * 2**20, 200, 20_000
    run = rankwise.init(
        project="life", id=scenario, dir=data, console="off", system=False,
        settings={**FAST, "max_queue_bytes": max_bytes},
    )  # fmt: skip
    real_write = os.write

    def slow_write(fd: int, data: bytes) -> int:
        if threading.current_thread().name == "rankwise-writer":
            time.sleep(0.03)  # a slow disk: the training loop outruns the writer
        return real_write(fd, data)

    def rss() -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    keys = [f"layer{j}/grad_norm" for j in range(per_call)]
    rss0 = peak = rss()
    os.write = slow_write  # type: ignore[assignment]
    for i in range(calls):
        run.log({k: i + j * 1e-6 for j, k in enumerate(keys)}, step=i)  # fresh floats
        peak = max(peak, rss())
    os.write = real_write
    run.finish()
    # One call's values as the queue holds them: the dict copy plus its float objects.
    one = {k: i + j * 1e-6 for j, k in enumerate(keys)}
    held = sys.getsizeof(one) + sum(sys.getsizeof(v) for v in one.values())
    report(
        calls=calls, per_call=per_call, max_bytes=max_bytes, growth=peak - rss0,
        held_per_call=held,
    )  # fmt: skip

elif scenario == "disk_full":
    import errno

    import rankwise.sdk.writer

    rankwise.sdk.writer._MAX_BACKLOG = 20_000  # bytes kept for retry: a small bound
    run = rankwise.init(
        project="life", id=scenario, dir=data, console="off", system=False,
        settings={**FAST, "flush_interval": 0.02},
    )  # fmt: skip
    full = threading.Event()
    real_write = os.write

    def failing_write(fd: int, data: bytes) -> int:
        if full.is_set() and threading.current_thread().name == "rankwise-writer":
            if len(data) > 64:
                return real_write(fd, data[: len(data) // 2])  # part of the frame lands
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    os.write = failing_write  # type: ignore[assignment]
    calls, per_call = 150, 20
    full.set()
    for i in range(calls):
        run.log({f"k{j}": float(i * j) for j in range(per_call)})
        time.sleep(0.004)  # several frames, more than the backlog holds
    full.clear()  # space again: the rest is written
    run.finish()
    report(calls=calls, per_call=per_call)

else:
    sys.exit(f"unknown scenario {scenario!r}")
