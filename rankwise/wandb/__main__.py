"""``python -m rankwise.wandb SCRIPT [ARGS]``: run SCRIPT with ``import wandb`` giving
``rankwise.wandb`` (the opt-in shim, ``rankwise.wandb.install``). Works under torchrun
too: ``torchrun --nproc-per-node=2 -m rankwise.wandb train.py``."""

from __future__ import annotations

import runpy
import sys


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
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
