"""Where the ``wandb`` shim reaches, run as ``python -m rankwise.wandb wandb_children.py
OUT``: this process and each child it starts in the ways launchers do (``mp.spawn``,
``multiprocessing`` spawn and forkserver, a new ``python script.py`` process as
Lightning's and DeepSpeed's launchers start, and one whose environment drops the
marker) write what they see as ``wandb`` to ``OUT/<name>.json``, and whether a
``sitecustomize`` of the user's ran (it sets ``builtins.CHAINED_SITECUSTOMIZE``)."""

import builtins
import importlib.metadata
import importlib.util
import json
import multiprocessing as mp
import os
import subprocess
import sys
from pathlib import Path


def report(out: str, name: str) -> None:
    try:
        version = importlib.metadata.version("wandb")
    except importlib.metadata.PackageNotFoundError:
        version = None
    found = importlib.util.find_spec("wandb") is not None
    try:
        import wandb

        module = wandb.__name__
    except ImportError:
        module = None
    seen = {"pid": os.getpid(), "version": version, "find_spec": found, "module": module,
            "chained": getattr(builtins, "CHAINED_SITECUSTOMIZE", None)}  # fmt: skip
    Path(out, f"{name}.json").write_text(json.dumps(seen))


def spawned(index: int, out: str) -> None:  # torch.multiprocessing.spawn's signature
    report(out, f"mp_spawn-{index}")


if __name__ == "__main__":
    out = sys.argv[1]
    if len(sys.argv) > 2:  # a child started as a new `python wandb_children.py OUT NAME`
        report(out, sys.argv[2])
        raise SystemExit(0)
    report(out, "main")
    import torch.multiprocessing

    torch.multiprocessing.spawn(spawned, args=(out,), nprocs=2)  # type: ignore[attr-defined]
    for method in ("spawn", "forkserver"):
        child = mp.get_context(method).Process(target=report, args=(out, method))  # type: ignore[attr-defined]
        child.start()
        child.join()
        assert child.exitcode == 0, method
    script = os.path.abspath(__file__)
    env = {**os.environ, "RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2"}
    subprocess.run([sys.executable, "-u", script, out, "script"], env=env, check=True)
    env.pop("RANKWISE_WANDB_SHIM", None)
    subprocess.run([sys.executable, script, out, "unmarked"], env=env, check=True)
