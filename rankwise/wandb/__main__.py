"""``python -m rankwise.wandb SCRIPT [ARGS]``: run SCRIPT with ``import wandb`` giving
``rankwise.wandb`` (the opt-in shim, ``rankwise.wandb.install``). Works under torchrun
too: ``torchrun --nproc-per-node=2 -m rankwise.wandb train.py``."""

from __future__ import annotations

import runpy
import sys

USAGE = """usage: python -m rankwise.wandb SCRIPT [ARGS ...]
       python -m rankwise.wandb -m MODULE [ARGS ...]

Run SCRIPT (or MODULE) with `import wandb` giving rankwise.wandb, so that integrations
that import wandb themselves (Lightning's WandbLogger, the Transformers WandbCallback)
record into rankwise. Works under torchrun too:

  torchrun --nproc-per-node=2 -m rankwise.wandb train.py
"""


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(USAGE, end="", file=sys.stdout if len(sys.argv) >= 2 else sys.stderr)
        raise SystemExit(0 if len(sys.argv) >= 2 else 2)
    from .install import install

    install()
    script = sys.argv[1]
    sys.argv = sys.argv[1:]
    if script == "-m":
        module = sys.argv[1]
        sys.argv = sys.argv[1:]
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    else:
        runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
