"""PyTorch's flight recorder: turned on at ``init()``, read by the watchdog on a stall.

The flight recorder keeps, per process, a ring of the collectives it entered (NCCL and
gloo alike), each numbered per process group (``collective_seq_id``: every member of a
group numbers its collectives alike). Compared across ranks, the numbers tell which
collective a hung job waits in and which rank never entered it (``rankwise.hang``).

* ``configure()`` (from ``init()``) sets ``TORCH_FR_BUFFER_SIZE=2000`` when the variable
  is unset and no process group exists yet, since torch reads it when the first group
  is made. A value already set is respected; ``Settings(flight_recorder=False)`` leaves
  it alone and records nothing.
* ``entries()`` (from the watchdog's thread, on a stall) dumps the recorders through
  ``torch._C._distributed_c10d._dump_nccl_trace`` (NCCL's groups; only in a CUDA
  build) and ``_dump_fr_trace`` (gloo's and other backends') — the dumps torch's own
  analyser (``torch.distributed.flight_recorder``) reads — and keeps the last ``PER_GROUP``
  entries of each process group as compact ``Collective`` records. Without torch, an
  initialised process group or a working dump it returns nothing: the hang report then
  stands on the stacks alone. When a group exists but the recorder holds nothing, it
  says once how to turn it on.

Nothing here runs on the training thread after ``init()``.
"""

from __future__ import annotations

import os
import pickle
import sys
from typing import Any

from .. import _log
from ..stream import records as R

BUFFER_VAR = "TORCH_FR_BUFFER_SIZE"
# torch keeps one recorder for NCCL's groups (CUDA events) and another for every other
# backend's (gloo's): a job may use both, and each has its own dump.
DUMPS = ("_dump_nccl_trace", "_dump_fr_trace")
BUFFER_SIZE = "2000"
PER_GROUP = 64
_told = False


def _dist() -> Any:
    """torch.distributed when the program imported it, else None (never imports torch)."""
    return sys.modules.get("torch.distributed")


def _group_exists() -> bool:
    dist = _dist()
    try:
        return bool(dist is not None and dist.is_available() and dist.is_initialized())
    except Exception:
        return False


def configure(enabled: bool, env: Any = None) -> None:
    """Turn the recorder's buffer on when it is still possible (module docstring)."""
    env = os.environ if env is None else env
    if not enabled or env.get(BUFFER_VAR) not in (None, ""):
        return
    if not _group_exists():
        env[BUFFER_VAR] = BUFFER_SIZE


def _tell_once() -> None:
    global _told
    if _told:
        return
    _told = True
    _log.logger.info(
        "PyTorch's flight recorder holds no entries, so a hang report can name ranks by "
        f"their stacks only: set {BUFFER_VAR}={BUFFER_SIZE} in the job's environment, or "
        "call rankwise.init() before init_process_group() (it sets it then)"
    )


def _collective(e: dict[str, Any]) -> R.Collective | None:
    if e.get("is_p2p"):
        return None
    pg = e.get("process_group") or ("", "")
    name, desc = (str(pg[0]), str(pg[1])) if len(pg) == 2 else (str(pg), "")
    state = "completed" if e.get("retired") else str(e.get("state") or "")
    created = e.get("time_created_ns")
    return R.Collective(
        pg=f"{name} ({desc})" if desc else name,
        seq=int(e.get("collective_seq_id") or 0),
        op=str(e.get("profiling_name") or ""),
        state=state,
        sizes=[list(map(int, s)) for s in e.get("input_sizes") or []],
        dtypes=[str(d) for d in e.get("input_dtypes") or []],
        time=float(created) / 1e9 if created else 0.0,
    )


def parse(dump: dict[str, Any]) -> list[R.Collective]:
    """The last ``PER_GROUP`` collectives of each process group in a flight-recorder
    dump (oldest first)."""
    per_group: dict[str, list[R.Collective]] = {}
    for e in dump.get("entries") or []:
        c = _collective(e)
        if c is not None and c.seq > 0:
            per_group.setdefault(c.pg, []).append(c)
    out: list[R.Collective] = []
    for group in per_group.values():
        group.sort(key=lambda c: c.seq)
        out.extend(group[-PER_GROUP:])
    return out


def entries(enabled: bool) -> list[R.Collective]:
    """This process's recent collectives, or [] (module docstring). Never raises."""
    if not enabled or not _group_exists():
        return []
    try:
        c10d = sys.modules["torch"]._C._distributed_c10d
    except Exception:
        return []
    found: list[dict[str, Any]] = []
    for name in DUMPS:
        dump = getattr(c10d, name, None)
        if dump is None:
            continue
        try:
            raw = dump(includeCollectives=True, includeStackTraces=False, onlyActive=False)
            found.extend(pickle.loads(raw).get("entries") or [])
        except Exception:
            continue
    try:
        got = parse({"entries": found})
    except Exception:
        got = []
    if not got:
        _tell_once()
    return got
