"""PyTorch Lightning: ``RankwiseLogger``, a ``Logger`` that records every rank.

``Trainer(logger=RankwiseLogger(project="p"), strategy="ddp", devices=2)``. Lightning's
``WandbLogger`` records on global rank 0 only (its methods are ``@rank_zero_only`` and
other ranks get a dummy experiment); this logger records on every rank, by default into
one shared run (``run_mode="shared"``), each rank its own stream. Everything else follows
``WandbLogger``: hyperparameters as config, metrics at the step the Trainer passes (its
global step), ``log_image``/``log_audio``/``log_video``/``log_table``/``log_text``,
``experiment`` (the rankwise ``Run``), ``watch`` (every rank's gradients), ``log_model``
(checkpoints as ``model`` artifacts named ``model-<run id>``: ``"all"`` as each is
saved, ``True`` at the end) and ``finalize`` (finished, or failed with the exception).

The run id. With ``strategy="ddp"`` Lightning starts the other ranks itself, as new
processes running the script again. The run starts lazily, at the first use of
``experiment`` (the Trainer asks for it on every rank once the process group is up), so
the ranks agree on the id through rankwise's usual agreement (``rankwise.sdk.dist``).
If a program uses ``experiment`` before ``fit`` (so before the other ranks exist), the
run's id is handed to the ranks Lightning then starts through the environment (keyed by
this process's pid and the logger's position among the loggers it makes), so they join
it.
"""

from __future__ import annotations

import itertools
import os
import sys
from argparse import Namespace
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._environ import scoped_env
from ..errors import UsageError
from ..sdk.run import Run
from ..settings import default_project
from . import _common

if TYPE_CHECKING:
    from pytorch_lightning.callbacks import ModelCheckpoint
    from pytorch_lightning.loggers import Logger
else:
    try:  # the ``rankwise[lightning]`` extra installs pytorch-lightning
        from pytorch_lightning.loggers import Logger
    except ImportError:  # the ``lightning`` package alone
        from lightning.pytorch.loggers import Logger

__all__ = ["RankwiseLogger"]

_made = itertools.count()  # RankwiseLoggers made by this process, in order
_ID_ENV = "RANKWISE_LIGHTNING_RUN_ID_{n}"  # "<launcher pid>:<base id>"
_CHECKPOINT_KEYS = (
    "monitor",
    "mode",
    "save_last",
    "save_top_k",
    "save_weights_only",
    "_every_n_train_steps",
)


class RankwiseLogger(Logger):
    """Record a Lightning run with rankwise, on every rank.

    ``project`` (``RANKWISE_PROJECT`` or ``"lightning_logs"``), ``name``, ``id``,
    ``run_mode`` and ``rank_scope`` are ``rankwise.init()``'s (``run_mode="auto"`` records
    rank 0 only, like ``WandbLogger``); ``config`` is the run's first config; other
    keywords go to ``rankwise.init()``. ``log_model``: ``False``, ``True`` (checkpoints at
    the end of training) or ``"all"`` (each as it is saved). ``prefix`` is put before every
    metric name (joined with ``-``, as ``WandbLogger``).
    """

    LOGGER_JOIN_CHAR = "-"

    def __init__(
        self,
        project: str | None = None,
        name: str | None = None,
        id: str | None = None,
        run_mode: str = "shared",
        rank_scope: str = "global",
        log_model: bool | str = False,
        config: Any = None,
        prefix: str = "",
        checkpoint_name: str | None = None,
        **init_kwargs: Any,
    ) -> None:
        super().__init__()
        if log_model not in (False, True, "all"):
            raise UsageError(f"log_model={log_model!r}: pass False, True or 'all'")
        project = default_project(project, fallback="lightning_logs")
        self._init = _common.check_init_kwargs(
            dict(
                init_kwargs,
                project=project,
                name=name,
                id=id,
                run_mode=run_mode,
                rank_scope=rank_scope,
                config=None if config is None else _common.check_config(config),
            ),
            "RankwiseLogger",
        )
        self._project = project
        self._log_model = log_model
        self._prefix = prefix
        self._checkpoint_name = checkpoint_name
        self._run: Run | None = None
        self._owned = False
        self._nth = next(_made)
        self._logged_model_time: dict[str, float] = {}
        self._checkpoint_callbacks: dict[int, ModelCheckpoint] = {}

    # -- the run ------------------------------------------------------------------------
    @property
    def experiment(self) -> Run:
        """The rankwise ``Run`` of this process (started on first use, on every rank)."""
        run = self._run
        if run is None:
            run, self._owned = self._start()
        elif self._owned and _common.ended(run):
            # Used again after finalize() (trainer.test() after fit()): the same run goes on.
            run = _common.start_again(run, self._init)
        self._run = run
        return run

    def _start(self) -> tuple[Run, bool]:
        kwargs = dict(self._init)
        if kwargs["id"] is not None or os.environ.get("RANKWISE_RUN_ID"):
            return _common.start_run(kwargs)
        from ..sdk.dist import detect, random_id

        key = _ID_ENV.format(n=self._nth)
        handed = _handed_id(os.environ.get(key))
        ident = detect()
        if handed is not None:  # a rank Lightning started after the launcher's run began
            kwargs["id"] = handed
            if ident.world_size == 1 and "LOCAL_RANK" in os.environ:
                # Before the process group is up Lightning's env has no RANK: on the one
                # node the launcher (whose id this is) runs, a rank is its local rank.
                with scoped_env(RANK=os.environ["LOCAL_RANK"]):
                    return _common.start_run(kwargs)
            return _common.start_run(kwargs)
        if ident.world_size == 1 and "LOCAL_RANK" not in os.environ:
            # Maybe the launcher before fit(): the ranks it starts next take this id.
            kwargs["id"] = random_id()
            os.environ[key] = f"{os.getpid()}:{kwargs['id']}"
        return _common.start_run(kwargs)

    def __getstate__(self) -> dict[str, Any]:
        """Pickled (``strategy="ddp_spawn"`` sends the logger to its processes): the run
        stays here; the processes start theirs on the same base id."""
        state = self.__dict__.copy()
        run = state["_run"]
        state["_run"] = None
        if run is not None and state["_init"]["id"] is None:
            state["_init"] = dict(state["_init"], id=run._start.base_id)
        return state

    @property
    def name(self) -> str:
        """The project (as ``WandbLogger``'s); checkpoints go under ``<name>/<version>``."""
        return self._project

    @property
    def version(self) -> str | None:
        """The run id (the id given until the run starts)."""
        if self._run is not None:
            return str(self._run.id)
        given: str | None = self._init["id"]
        return given

    def watch(
        self,
        model: Any,
        log: str | None = "gradients",
        log_freq: int = 100,
        log_graph: bool = True,
        ranks: str = "all",
    ) -> None:
        """``run.watch``: gradient (and/or parameter) histograms and norms every
        ``log_freq``-th backward pass, on every rank by default (each its own, before
        DDP averages them). ``log_graph`` is accepted for ``WandbLogger``'s callers."""
        self.experiment.watch(model, log=log, log_freq=log_freq, ranks=ranks)

    # -- what the Trainer calls, on every rank ------------------------------------------
    def log_hyperparams(
        self, params: dict[str, Any] | Namespace, *args: Any, **kwargs: Any
    ) -> None:
        if isinstance(params, Namespace):
            params = vars(params)
        params = {k: _plain(v) for k, v in dict(params or {}).items()}
        self.experiment.config.update(params)

    def log_metrics(self, metrics: Mapping[str, Any], step: int | None = None) -> None:
        if self._prefix:
            metrics = {f"{self._prefix}{self.LOGGER_JOIN_CHAR}{k}": v for k, v in metrics.items()}
        self.experiment.log(metrics, step=step)

    def log_table(
        self,
        key: str,
        columns: list[str] | None = None,
        data: list[list[Any]] | None = None,
        dataframe: Any = None,
        step: int | None = None,
    ) -> None:
        """A ``rankwise.Table`` from ``columns`` and ``data``, or from a DataFrame."""
        self.log_metrics({key: _common.table(columns, data, dataframe)}, step)

    def log_text(
        self,
        key: str,
        columns: list[str] | None = None,
        data: list[list[str]] | None = None,
        dataframe: Any = None,
        step: int | None = None,
    ) -> None:
        """Text as a table, as ``WandbLogger.log_text``."""
        self.log_table(key, columns, data, dataframe, step)

    def log_image(
        self, key: str, images: list[Any], step: int | None = None, **kwargs: Any
    ) -> None:
        """Images (tensors, arrays, PIL images or paths) as one gallery; ``caption=`` is a
        list with one caption per image."""
        self.log_metrics({key: _common.images(images, kwargs, "log_image")}, step)

    def log_audio(
        self, key: str, audios: list[Any], step: int | None = None, **kwargs: Any
    ) -> None:
        """Audio clips (arrays or WAV paths); ``sample_rate=``/``caption=`` are lists."""
        self.log_metrics({key: _common.media("Audio", audios, kwargs, "log_audio")}, step)

    def log_video(
        self, key: str, videos: list[Any], step: int | None = None, **kwargs: Any
    ) -> None:
        """Videos (``(time, channel, height, width)`` arrays or GIF paths); ``fps=``/
        ``caption=`` are lists."""
        self.log_metrics({key: _common.media("Video", videos, kwargs, "log_video")}, step)

    def after_save_checkpoint(self, checkpoint_callback: ModelCheckpoint) -> None:
        # The Trainer calls this on global rank 0 only: one artifact for the run.
        if self._log_model == "all" or (
            self._log_model is True and checkpoint_callback.save_top_k == -1
        ):
            self._log_checkpoints(checkpoint_callback)
        elif self._log_model is True:
            self._checkpoint_callbacks[id(checkpoint_callback)] = checkpoint_callback

    def finalize(self, status: str) -> None:
        """``success``: log the checkpoints kept for the end, then finish the run;
        anything else: end it as failed (killed for a KeyboardInterrupt), with the
        exception the Trainer is handling."""
        run = self._run
        if run is None:
            return
        if status == "success":
            for callback in self._checkpoint_callbacks.values():
                self._log_checkpoints(callback)
        if not self._owned:
            return  # the program's own run: the program ends it
        if status == "success":
            run.finish()
            return
        error = sys.exc_info()[1]
        state = "killed" if isinstance(error, KeyboardInterrupt) else "failed"
        run.end(state, exit_code=1, error=error if isinstance(error, Exception) else None)

    # -- checkpoints as model artifacts -------------------------------------------------
    def _log_checkpoints(self, callback: ModelCheckpoint) -> None:
        run = self.experiment
        name = self._checkpoint_name or f"model-{run.id}"
        best = getattr(callback, "best_model_path", "")
        for mtime, path, score in _new_checkpoints(callback, self._logged_model_time):
            metadata = {
                "score": _plain(score),
                "original_filename": Path(path).name,
                callback.__class__.__name__: {  # a weakref proxy's too
                    k: _plain(getattr(callback, k))
                    for k in _CHECKPOINT_KEYS
                    if hasattr(callback, k)
                },
            }
            aliases = ["best"] if path == best else []
            _common.log_model(run, name, [(path, "model.ckpt")], metadata=metadata, aliases=aliases)
            self._logged_model_time[path] = mtime


def _handed_id(value: str | None) -> str | None:
    """The id in ``value`` when this process's parent (the launcher) put it there."""
    if not value or ":" not in value:
        return None
    pid, _, base = value.partition(":")
    return base if pid == str(os.getppid()) else None


def _new_checkpoints(callback: Any, logged: dict[str, float]) -> list[tuple[float, str, Any]]:
    """The callback's checkpoint files (last, best, top k) not logged since they changed,
    oldest first, with their score."""
    found: dict[str, Any] = {}
    if getattr(callback, "last_model_path", ""):
        found[callback.last_model_path] = getattr(callback, "current_score", None)
    if getattr(callback, "best_model_path", ""):
        found[callback.best_model_path] = getattr(callback, "best_model_score", None)
    for path, score in dict(getattr(callback, "best_k_models", {}) or {}).items():
        found[path] = score
    out = []
    for path, score in found.items():
        try:
            mtime = Path(path).stat().st_mtime
        except OSError:
            continue
        if path not in logged or logged[path] < mtime:
            out.append((mtime, path, score))
    return sorted(out, key=lambda c: c[0])


def _plain(value: Any) -> Any:
    """A one-element tensor as its number, a callable as its name; the rest as it is
    (``run.config`` stores what is not JSON-like as its string form, with a warning)."""
    item = getattr(value, "item", None)
    if callable(item) and getattr(value, "numel", lambda: 0)() == 1:
        try:
            return item()
        except Exception:
            return value
    if callable(value) and not isinstance(value, type):
        return getattr(value, "__qualname__", None) or getattr(value, "__name__", repr(value))
    return value
