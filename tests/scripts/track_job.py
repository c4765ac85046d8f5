"""``@rankwise.track`` on every rank of a torchrun job (``tests/e2e/test_track_torchrun.py``).

Each case is one decorated call; every rank writes what it saw (``get_run()``, the
returned value, the exception) as a JSON line to ``--report``.
"""

from __future__ import annotations

import argparse
import json
import os

import rankwise

p = argparse.ArgumentParser()
p.add_argument("--dir", required=True)
p.add_argument("--report", required=True)
p.add_argument("--worker-only", action="store_true", help="the worker-scope cases alone")
a = p.parse_args()
rank = int(os.environ["RANK"])
where = {"node": int(os.environ.get("GROUP_RANK", "0")), "local": int(os.environ["LOCAL_RANK"])}


def note(case: str, **more: object) -> None:
    run = rankwise.get_run()
    seen = None if run is None else {"id": run.id, "label": run.label, "group": run.group}
    with open(a.report, "a") as f:
        f.write(json.dumps({"case": case, "rank": rank, "run": seen, **where, **more}) + "\n")


def make(mode: str, scope: str):
    @rankwise.track(project="track", run_mode=mode, rank_scope=scope, dir=a.dir,
                    config={"mode": mode, "scope": scope}, system=False)  # fmt: skip
    def train(x: int) -> int:
        note(f"{mode}/{scope}")
        run = rankwise.get_run()
        if run is not None:
            run.log({"x": float(x + rank)})
        return x * 10 + rank

    return train


for mode in ("auto", "shared", "new"):
    for scope in ("worker",) if a.worker_only else ("global", "worker"):
        got = make(mode, scope)(7)
        note(f"{mode}/{scope}:after", returned=got, current=rankwise.run is not None)
if a.worker_only:
    raise SystemExit(0)


@rankwise.track
def inner(step: int) -> str:
    run = rankwise.get_run()
    if run is not None:
        run.log({"inner": float(step)}, step=step)
    note("nested:inner")
    return "inner-done"


@rankwise.track(project="track", run_mode="shared", dir=a.dir, system=False)
def outer() -> list[str]:
    out = [inner(0), inner(1)]  # reuse this run, never finish it
    run = rankwise.get_run()
    note("nested:outer", state=None if run is None else run.state)
    if run is not None:
        run.log({"outer": 1.0}, step=2)
    return out


note("nested:result", returned=outer())


@rankwise.track(project="track", run_mode="shared", dir=a.dir, system=False)
def boom() -> None:
    note("boom")
    raise ValueError(f"boom on rank {rank}")


try:
    boom()
except ValueError as exc:
    note("boom:caught", error=str(exc))
