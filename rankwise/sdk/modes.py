"""Run modes: which processes record, into which run, under which group and label.

N nodes with M processes each (names as in the Flyte W&B plugin):

========  ==========  =========================  ====  ======================================  ====================
run_mode  rank_scope  who records                runs  run id                                  group
========  ==========  =========================  ====  ======================================  ====================
auto      global      global rank 0              1     {base}                                  -
auto      worker      local rank 0 of each node  N     {base}-worker-{node}                    {base}
shared    global      every rank, one run        1     {base}                                  -
shared    worker      every rank, run per node   N     {base}-worker-{node}                    {base}
new       global      every rank, own run        N*M   {base}-rank-{rank}                      {base}
new       worker      every rank, own run        N*M   {base}-worker-{node}-rank-{local_rank}  {base}-worker-{node}
========  ==========  =========================  ====  ======================================  ====================

A single-node job is one node and is named as under global scope: ``{base}`` under auto
and shared, ``{base}-rank-{rank}`` under new. Stream labels are ``rank-{rank}``, or
``worker-{node}-rank-{local_rank}`` under worker scope. The primary stream of a run
(rank 0, or local rank 0 under worker scope, or the only stream of a ``new`` run) alone
decides the run's final state.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import UsageError
from .dist import Identity, check_id

RUN_MODES = ("auto", "shared", "new")
RANK_SCOPES = ("global", "worker")


@dataclass(frozen=True)
class Placement:
    records: bool  # does this process write a stream at all?
    run_id: str
    group: str | None
    label: str
    is_primary: bool


def place(
    base: str,
    ident: Identity,
    run_mode: str = "auto",
    rank_scope: str = "global",
    group: str | None = None,
    label: str | None = None,
) -> Placement:
    """Apply the table above to this process."""
    if run_mode not in RUN_MODES:
        raise UsageError(f"run_mode={run_mode!r} is not one of {', '.join(RUN_MODES)}")
    if rank_scope not in RANK_SCOPES:
        raise UsageError(f"rank_scope={rank_scope!r} is not one of {', '.join(RANK_SCOPES)}")
    worker = rank_scope == "worker"
    multi_node = worker and ident.num_nodes > 1
    node, rank, local = ident.node_rank, ident.rank, ident.local_rank
    default_label = f"worker-{node}-rank-{local}" if worker else f"rank-{rank}"
    primary = local == 0 if worker else rank == 0

    derived_group: str | None
    if run_mode == "new":
        if multi_node:
            run_id, derived_group = f"{base}-worker-{node}-rank-{local}", f"{base}-worker-{node}"
        else:
            run_id, derived_group = f"{base}-rank-{rank}", base
        records, primary = True, True
    else:
        if multi_node:
            run_id, derived_group = f"{base}-worker-{node}", base
        else:
            run_id, derived_group = base, None
        records = True if run_mode == "shared" else primary

    check_id(run_id)
    stream_label = check_id(label, "label") if label is not None else default_label
    if group is not None:
        check_id(group, "group")
    return Placement(
        records=records,
        run_id=run_id,
        group=group if group is not None else derived_group,
        label=stream_label,
        is_primary=primary,
    )
