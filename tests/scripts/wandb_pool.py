"""The W&B guide's spawn snippet: ``wandb.setup()`` then a ``Pool`` of workers, each
starting its own run with ``wandb.init(config=...)`` (only the import changed)."""

import multiprocessing as mp
import sys

import rankwise.wandb as wandb


def do_work(n):
    with wandb.init(project="guide-pool", config=dict(n=n)) as run:
        run.log(dict(this=n * n))
        return run.id


def main():
    wandb.setup()
    with mp.get_context(sys.argv[1] if len(sys.argv) > 1 else "spawn").Pool(processes=2) as pool:
        ids = pool.map(do_work, range(4))
    print("RUNS " + " ".join(ids), flush=True)


if __name__ == "__main__":
    main()
