"""``python -m rankwise.wandb SCRIPT|-m MODULE|COMMAND [ARGS]``: run a program with
``import wandb`` giving ``rankwise.wandb`` (the opt-in shim, ``rankwise.wandb.install``)
in this process and in every Python process the program starts.

  python -m rankwise.wandb train.py --epochs 3          # Lightning devices=N, mp.spawn...
  python -m rankwise.wandb -m my_package.train
  python -m rankwise.wandb accelerate launch --num_processes 2 train.py
  python -m rankwise.wandb torchrun --nproc-per-node=2 train.py
  torchrun --nproc-per-node=2 -m rankwise.wandb train.py

SCRIPT is a Python file (or a directory or zip with __main__.py), run here as __main__;
COMMAND, any other program on PATH or beside this Python (a launcher such as torchrun,
accelerate, deepspeed), replaces this process. Either way the
environment carries RANKWISE_WANDB_SHIM=1 and the start-up hook on PYTHONPATH, so that
each child Python installs the shim before its own code runs."""

from __future__ import annotations

import os
import runpy
import shutil
import sys

from ._launch import export

USAGE = """usage: python -m rankwise.wandb SCRIPT [ARGS ...]
       python -m rankwise.wandb -m MODULE [ARGS ...]
       python -m rankwise.wandb LAUNCHER [ARGS ...]   (torchrun, accelerate launch, ...)

Run SCRIPT (or MODULE) with `import wandb` giving rankwise.wandb, so that integrations
that import wandb themselves (Lightning's WandbLogger, the Transformers WandbCallback)
record into rankwise. Every Python process the program starts gets the shim too
(Lightning's own DDP launcher, mp.spawn, multiprocessing). Works under torchrun too:

  torchrun --nproc-per-node=2 -m rankwise.wandb train.py
"""


def _is_script(path: str) -> bool:
    """A Python program to run here: a ``.py`` file, or any file, directory or zip that
    is not an executable of another kind (a launcher script on PATH given by its path)."""
    if not os.path.exists(path):
        return False
    executable = os.path.isfile(path) and os.access(path, os.X_OK)
    return path.endswith((".py", ".pyw")) or not executable


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(USAGE, end="", file=sys.stdout if len(sys.argv) >= 2 else sys.stderr)
        raise SystemExit(0 if len(sys.argv) >= 2 else 2)
    target = sys.argv[1]
    if target == "-m" and len(sys.argv) < 3:
        raise SystemExit("python -m rankwise.wandb -m: name the module to run")
    export()
    if target != "-m" and not _is_script(target):
        # on PATH, else beside this Python (a virtual environment that is not activated)
        command = shutil.which(target) or shutil.which(target, path=os.path.dirname(sys.executable))
        if command is None:
            raise SystemExit(
                f"python -m rankwise.wandb: {target!r} is neither a Python script nor a "
                "command on PATH: give the path of the training script (or -m MODULE)"
            )
        sys.stdout.flush()
        sys.stderr.flush()
        os.execv(command, [target, *sys.argv[2:]])
    from .install import install

    install()
    sys.argv = sys.argv[1:]
    if target == "-m":
        module = sys.argv[1]
        sys.argv = sys.argv[1:]
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    else:
        runpy.run_path(target, run_name="__main__")


if __name__ == "__main__":
    main()
