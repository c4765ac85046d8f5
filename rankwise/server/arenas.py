"""The server process's malloc arenas: at most ``MALLOC_ARENAS`` (glibc).

glibc gives each thread that allocates its own arena, up to eight per core, and keeps
what a thread freed in its arena for that arena's next allocations. A server's worker
threads (the reads, the checks) allocate and free arrays of every size, so each holds
freed memory the others cannot use: with a run page open on a 1,000-rank run under
load, the process grew to 370-413 MB against 292-299 MB with two arenas, no slower
(``benchmarks/README.md``, "Cheaper uploads and reads at 1,000 ranks"). Set before the
server starts its threads; ``MALLOC_ARENA_MAX`` in the environment, when set, is the
operator's and is left alone. Elsewhere than Linux with glibc, nothing is done.
"""

from __future__ import annotations

import ctypes
import os
import sys

MALLOC_ARENAS = 2
_M_ARENA_MAX = -8  # mallopt's parameter (malloc.h)


def limit_arenas(count: int = MALLOC_ARENAS) -> bool:
    """Cap this process's malloc arenas at ``count``; whether it was set here."""
    if sys.platform != "linux" or os.environ.get("MALLOC_ARENA_MAX"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_ARENA_MAX, count))
