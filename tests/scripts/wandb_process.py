"""The W&B guide's "share a run" snippet: a run object passed to an ``mp.Process``
child, which logs to it (only the import changed). The child attaches to the parent's
run as a stream of its own."""

import multiprocessing as mp
import sys

import rankwise.wandb as wandb


def process_child(run):
    # This process will have the run object
    run.log({"child_metric": 1})
    run.log({"child_metric": 2})


def process_child_init(run):
    # a child that calls wandb.init() attaches too
    child = wandb.init()
    assert child.id == run.id, (child.id, run.id)
    wandb.log({"init_child_metric": 3})


if __name__ == "__main__":
    ctx = mp.get_context(sys.argv[1] if len(sys.argv) > 1 else "spawn")
    run = wandb.init(project="guide-process")
    run.log({"parent_metric": 0})
    for target in (process_child, process_child_init):
        p = ctx.Process(target=target, kwargs=dict(run=run))  # type: ignore[attr-defined]
        p.start()
        p.join()
        assert p.exitcode == 0, p.exitcode
    run.log({"parent_metric": 1})
    print(f"RUN {run.id}", flush=True)
    run.finish()
