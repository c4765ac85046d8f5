"""Imported by ``site`` at interpreter start-up when this directory is on ``PYTHONPATH``
(``python -m rankwise.wandb`` puts it there for every process its program starts:
Lightning's DDP launcher, ``mp.spawn``, ``multiprocessing`` spawn and forkserver,
``accelerate launch``, torchrun, any ``subprocess`` of ``python script.py``).

It installs the ``wandb`` shim (``rankwise.wandb.install``) only where the environment
holds the marker ``RANKWISE_WANDB_SHIM=1``, set by an ancestor that asked for it; then it
runs the ``sitecustomize`` this one hides, if there is one. It never stops a process: a
failure is one line on stderr; a process of another Python without rankwise that inherits
the path is left alone.
"""

import os
import sys

_HOOK = os.path.join("rankwise", "wandb", "_hook")


def _install() -> None:
    if os.environ.get("RANKWISE_WANDB_SHIM") != "1":
        return
    try:
        from rankwise.wandb.install import install

        install()
    except ModuleNotFoundError as e:
        if e.name != "rankwise":  # else another Python, without rankwise: not ours to touch
            _warn(e)
    except Exception as e:  # never stop the process over tracking
        _warn(e)


def _warn(e: BaseException) -> None:
    sys.stderr.write(f"rankwise.wandb: the wandb shim is not installed in this process: {e}\n")


def _chain() -> None:
    """Run the next ``sitecustomize`` on ``sys.path`` (this one shadows it)."""
    try:
        import importlib.machinery
        import importlib.util

        # every rankwise hook left out (two installs on one path must not chain in a loop)
        rest = [p for p in sys.path if not os.path.abspath(p or os.curdir).endswith(_HOOK)]
        spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
        if spec is None or spec.loader is None:
            return
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except Exception as e:
        sys.stderr.write(f"rankwise.wandb: error in the chained sitecustomize: {e!r}\n")


_install()
_chain()
