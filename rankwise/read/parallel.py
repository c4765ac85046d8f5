"""A big run's stream files read in worker processes (``Api(dir=..., workers=N)``).

``LocalReader.load`` reads every stream file of a run, one after the other: a 1,024-rank
run of 50 metrics x 10,000 steps is 10 GB of files and 75 s of one core. With
``workers`` above 1 (the CLI passes the CPU count; a library caller's ``Api(dir=)``
reads in its own process unless it asks), a run of at least ``MIN_FILES`` files and
``MIN_BYTES`` in all is read by ``min(workers, CPUs, files)`` processes: this one, which
reads the first files (about its share of the bytes: those whose columns are kept
within ``KEEP_BYTES``, so they are not pickled), and a pool of the others, started by
the ``"forkserver"`` method (``"spawn"`` where there is none: never a plain fork of a
process that may hold threads). Each worker returns, per file, what this process would
have kept reading it itself: the ``StreamFacts``, the ``StreamFold`` and the columns
(every key's) of a file within ``KEEP_BYTES``, or only their last rows
(``stream.columns.tail``) past it, or none (``load(keep=False)``). The results are in
file order and the same objects the in-process read gives, so the run folds the same.
As with any process pool, a script that sets ``workers`` runs its own code under
``if __name__ == "__main__":`` (each worker imports the main module).

A pool that cannot start, a worker that dies or raises: the files are read again in
this process (a warning on the ``rankwise`` logger says why), never a failed command.
The function the workers run, ``read.local.load_job``, lives beside ``load_stream``.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import TypeVar

_log = logging.getLogger("rankwise")

# A run read in workers has at least this many stream files, of this many bytes in all:
# below that, starting the pool (~0.2 s) costs more than it saves.
MIN_FILES = 8
MIN_BYTES = 64 * 1024 * 1024
# How the workers start: never "fork" (the reading process may hold threads).
START_METHOD = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"

T = TypeVar("T")
R = TypeVar("R")


def cpus() -> int:
    """The CPUs this process may run on (its affinity where the OS tells it)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not on every OS
        return os.cpu_count() or 1


def pool_size(workers: int, sizes: Sequence[int]) -> int:
    """How many processes read these files, this one included: 1 (this one alone) unless
    ``workers`` asks for more and the run is big enough (``MIN_FILES``, ``MIN_BYTES``)."""
    if workers <= 1 or len(sizes) < MIN_FILES or sum(max(s, 0) for s in sizes) < MIN_BYTES:
        return 1
    return max(1, min(workers, cpus(), len(sizes)))


def map_files(
    fn: Callable[[T], R], jobs: Sequence[T], workers: int, sizes: Sequence[int]
) -> list[R]:
    """``fn`` of every job, in order, in ``workers`` processes: this one and a pool of
    ``workers - 1`` (when the pool works; else all in this one). This process takes the
    first jobs, about its share of ``sizes`` (each job's bytes), while the pool reads
    the rest: the first files of a run are those whose columns are kept, and those read
    here are not pickled. ``fn`` is a module's function (workers import it by name), and
    what it returns for the pool's jobs is pickled back."""
    if workers <= 1 or len(jobs) < 2:
        return [fn(job) for job in jobs]
    share, mine = sum(max(s, 0) for s in sizes) / workers, 0
    taken = 0
    while taken < len(jobs) - 1 and taken < len(sizes) and mine + max(sizes[taken], 0) <= share:
        mine += max(sizes[taken], 0)
        taken += 1
    rest = jobs[taken:]
    pool, pending = _start_pool(fn, rest, min(workers - 1, len(rest)))
    out = [fn(job) for job in jobs[:taken]]  # while the pool reads the rest
    got = _collect(pool, pending, len(rest), min(workers - 1, len(rest)))
    return out + (got if got is not None else [fn(job) for job in rest])


def _warn(files: int, workers: int, exc: BaseException) -> None:
    _log.warning(
        "rankwise: %d worker process(es) reading %d stream files failed (%s: %s); "
        "reading them in this process",
        workers, files, type(exc).__name__, exc,
    )  # fmt: skip


def _start_pool(
    fn: Callable[[T], R], jobs: Sequence[T], workers: int
) -> tuple[ProcessPoolExecutor | None, Iterator[R] | None]:
    """The pool, its results to come (None, None: it did not start, and says why)."""
    pool = None
    try:
        ctx = multiprocessing.get_context(START_METHOD)
        if START_METHOD == "forkserver":
            # The server imports the reader (and the main module, as by default) once;
            # each worker forked from it has them.
            ctx.set_forkserver_preload(
                ["__main__", "rankwise.read.local", "rankwise.stream.history"]
            )
        pool = ProcessPoolExecutor(workers, mp_context=ctx)
        # In order, a few files at a time, so that the workers finish close together.
        chunk = max(1, min(16, len(jobs) // (workers * 8)))
        return pool, pool.map(fn, jobs, chunksize=chunk)
    except Exception as exc:  # any failure to start: read here instead
        _warn(len(jobs), workers, exc)
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        return None, None


def _collect(
    pool: ProcessPoolExecutor | None, pending: Iterator[R] | None, files: int, workers: int
) -> list[R] | None:
    """The pool's results in order, or None when it failed (a worker died or raised)."""
    if pool is None or pending is None:
        return None
    try:
        out = list(pending)
    except Exception as exc:  # any failure of the pool: read its files here instead
        _warn(files, workers, exc)
        pool.shutdown(wait=True, cancel_futures=True)
        return None
    pool.shutdown(wait=True)
    return out
