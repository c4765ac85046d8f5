"""Hugging Face Transformers: ``RankwiseCallback``, a ``TrainerCallback`` for every rank.

``Trainer(..., callbacks=[RankwiseCallback(project="p")])``. The Trainer calls its
callbacks on every process; Transformers' ``WandbCallback`` acts on world process zero
only, this one records on every rank, by default into one shared run, each rank its own
stream. Otherwise as ``WandbCallback``: the ``TrainingArguments`` and the model's config
as the run's config (the arguments win a clash), ``model/num_parameters``, the logs at
``state.global_step`` with keys rewritten to ``train/``, ``eval/`` and ``test/``, the
single values of the final log (``train_runtime``, ``train_loss``, ...) as summary values,
and the model as a ``model`` artifact when asked: ``log_model="end"`` (the final model,
alias ``final_model``) or ``"checkpoint"`` (each checkpoint the Trainer saves), also from
``RANKWISE_LOG_MODEL``. The run ends when training does (if the callback started it);
``evaluate()`` after ``train()`` goes on in it. Each trial of a hyperparameter search is
a run of its own, named after the trial and grouped under the run name.

The final model is written with ``save_pretrained`` (or its ``state_dict``) by world
process zero: a model sharded across ranks (FSDP, DeepSpeed ZeRO-3) is not gathered for
it; log its checkpoints (``log_model="checkpoint"``) instead.
"""

from __future__ import annotations

import numbers
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from ..errors import UsageError
from ..sdk.run import Run
from ..settings import default_project
from . import _common

__all__ = ["RankwiseCallback", "rewrite_logs"]

LOG_MODEL = ("end", "checkpoint", "false")
WATCH = ("gradients", "parameters", "all", "false")
# Logged once at the end of training: summary values, as WandbCallback keeps them.
SINGLE_VALUES = frozenset(
    (
        "train_runtime",
        "train_samples_per_second",
        "train_steps_per_second",
        "train_loss",
        "total_flos",
    )
)


def rewrite_logs(logs: Mapping[str, Any]) -> dict[str, Any]:
    """``eval_x`` → ``eval/x``, ``test_x`` → ``test/x``, anything else ``x`` → ``train/x``."""
    out = {}
    for key, value in logs.items():
        if key.startswith("eval_"):
            out["eval/" + key[5:]] = value
        elif key.startswith("test_"):
            out["test/" + key[5:]] = value
        else:
            out["train/" + key] = value
    return out


class RankwiseCallback(TrainerCallback):
    """Record a ``Trainer`` run with rankwise, on every rank.

    ``project`` (``RANKWISE_PROJECT`` or ``"huggingface"``), ``name`` (default
    ``args.run_name``), ``id``, ``run_mode`` and ``rank_scope`` are ``rankwise.init()``'s;
    ``config`` is added to the run's config; other keywords go to ``rankwise.init()``.
    ``log_model``: ``"end"``, ``"checkpoint"`` or ``"false"`` (default
    ``RANKWISE_LOG_MODEL``, else ``"false"``). ``watch`` (default ``RANKWISE_WATCH``):
    ``"gradients"``, ``"parameters"`` or ``"all"`` watches the model on every rank every
    ``watch_freq`` backward passes (default ``max(100, logging_steps)``, as
    ``WandbCallback``). A run this process already has
    (``rankwise.init()`` before ``train()``) is used, and left for the program to end.
    """

    def __init__(
        self,
        project: str | None = None,
        name: str | None = None,
        id: str | None = None,
        run_mode: str = "shared",
        rank_scope: str = "global",
        log_model: str | bool | None = None,
        config: Any = None,
        watch: str | None = None,
        watch_freq: int | None = None,
        **init_kwargs: Any,
    ) -> None:
        if log_model is None:
            log_model = os.environ.get("RANKWISE_LOG_MODEL", "false")
        if isinstance(log_model, bool):
            log_model = "end" if log_model else "false"
        if not isinstance(log_model, str) or log_model.lower() not in LOG_MODEL:
            raise UsageError(f"log_model={log_model!r}: pass one of {', '.join(LOG_MODEL)}")
        self._log_model = log_model.lower()
        watch = (watch or os.environ.get("RANKWISE_WATCH") or "false").lower()
        if watch not in WATCH:
            raise UsageError(f"watch={watch!r}: pass one of {', '.join(WATCH)}")
        self._watch = watch
        self._watch_freq = watch_freq
        self._init = _common.check_init_kwargs(
            dict(init_kwargs, name=name, id=id, run_mode=run_mode, rank_scope=rank_scope),
            "RankwiseCallback",
        )
        self._project = project
        self._config = _common.check_config(config)  # a bad config= fails here, not in training
        self._run: Run | None = None
        self._owned = False

    @property
    def run(self) -> Run | None:
        """The rankwise ``Run`` of this process, once training began."""
        return self._run

    def setup(self, args: TrainingArguments, state: TrainerState, model: Any = None) -> Run:
        """Start (or reuse) the run and record the configuration: called on the first
        event of training."""
        run, self._owned = _common.start_run(self._kwargs(args, state))
        self._run = run
        try:
            run.config.update(self._configuration(args, model))
            num_parameters = getattr(model, "num_parameters", None)
            if callable(num_parameters):
                run.config["model/num_parameters"] = num_parameters()
        except Exception as exc:  # tracking problems never stop training
            _common.warn_once("hf-config", f"RankwiseCallback: config not recorded: {exc!r}")
        if self._watch != "false" and model is not None:
            freq = self._watch_freq or max(100, int(args.logging_steps))  # WandbCallback's
            run.watch(model, log=self._watch, log_freq=freq, ranks="all")
        return run

    def _configuration(self, args: TrainingArguments, model: Any) -> dict[str, Any]:
        """The model's config, then the arguments (they win a clash), then ``config=``."""
        config: dict[str, Any] = {}
        model_config = getattr(model, "config", None)
        if model_config is not None:
            config.update(
                model_config if isinstance(model_config, dict) else _to_dict(model_config)
            )
        peft = getattr(model, "peft_config", None)
        if peft is not None:
            config["peft_config"] = {k: _to_dict(v) for k, v in dict(peft).items()}
        config.update(_to_dict(args))
        config.update(self._config)
        return config

    def _kwargs(self, args: TrainingArguments, state: TrainerState) -> dict[str, Any]:
        kwargs = dict(self._init)
        kwargs["project"] = default_project(self._project, fallback="huggingface")
        run_name = getattr(args, "run_name", None)
        trial = getattr(state, "trial_name", None)
        if trial is not None:  # a hyperparameter search: the trial, grouped as WandbCallback
            kwargs["name"] = kwargs["name"] or trial
            if kwargs.get("group") is None:
                kwargs["group"] = _common.as_id(run_name or args.output_dir or "trials")
        elif kwargs["name"] is None and run_name and run_name != args.output_dir:
            kwargs["name"] = run_name
        return kwargs

    def _ready(self, args: TrainingArguments, state: TrainerState, model: Any) -> Run:
        run = self._run
        if run is None:
            return self.setup(args, state, model)
        if self._owned and _common.ended(run):
            # Used again after train() (trainer.evaluate()): the same run goes on.
            run = self._run = _common.start_again(run, self._kwargs(args, state))
        return run

    def on_train_begin(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        model: Any = None,
        **kwargs: Any,
    ) -> None:
        run = self._run
        if state.is_hyper_param_search and run is not None and self._owned:
            # Each trial is a run of its own (WandbCallback finishes the run between them).
            if not _common.ended(run):
                run.finish()
            self._run = None
        self._ready(args, state, model)

    def on_log(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        model: Any = None,
        logs: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        run = self._ready(args, state, model)
        logs = dict(logs or {})
        single = {k: v for k, v in logs.items() if k in SINGLE_VALUES}
        if single:
            run.summary.update(single)
        rest = {k: v for k, v in logs.items() if k not in SINGLE_VALUES}
        if rest:
            run.log(rewrite_logs(rest), step=state.global_step)

    def on_predict(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        metrics: Mapping[str, Any],
        **kwargs: Any,
    ) -> None:
        run = self._ready(args, state, kwargs.get("model"))
        run.log(rewrite_logs(metrics), step=state.global_step)

    def on_save(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        run = self._run
        if self._log_model != "checkpoint" or run is None or not state.is_world_process_zero:
            return
        folder = Path(args.output_dir or ".") / f"checkpoint-{state.global_step}"
        metadata = self._numbers(run)
        metadata["model/num_parameters"] = run.config.get("model/num_parameters")
        aliases = [
            f"epoch_{round(state.epoch or 0, 2)}",
            f"checkpoint_global_step_{state.global_step}",
        ]
        _common.log_model(
            run, self._model_name(args, run), dirs=[str(folder)], metadata=metadata, aliases=aliases
        )

    def on_train_end(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        model: Any = None,
        processing_class: Any = None,
        **kwargs: Any,
    ) -> None:
        run = self._run
        if run is None:
            return
        if self._log_model == "end" and state.is_world_process_zero and model is not None:
            self._log_final_model(args, state, run, model, processing_class)
        if self._owned:
            run.finish()

    # -- the final model -------------------------------------------------------------------
    def _log_final_model(
        self, args: TrainingArguments, state: TrainerState, run: Run, model: Any, processing: Any
    ) -> None:
        metadata = self._numbers(run)
        if args.load_best_model_at_end and args.metric_for_best_model:
            metadata[f"eval/{args.metric_for_best_model}"] = state.best_metric
        metadata["final_model"] = True
        with tempfile.TemporaryDirectory(prefix="rankwise-model-") as folder:
            try:
                _save_model(model, processing, folder)
            except Exception as exc:  # tracking problems never stop training
                _common.warn_once(
                    "hf-save", f"the final model was not logged: saving it failed: {exc!r}"
                )
                return
            _common.log_model(
                run,
                self._model_name(args, run),
                dirs=[folder],
                metadata=metadata,
                aliases=["final_model"],
                wait=True,  # the folder goes away next
            )

    @staticmethod
    def _model_name(args: TrainingArguments, run: Run) -> str:
        run_name = getattr(args, "run_name", None)
        if run_name is None or run_name == args.output_dir:
            return f"model-{run.id}"
        return f"model-{run.name}"

    @staticmethod
    def _numbers(run: Run) -> dict[str, Any]:
        """The run's numeric summary values (this stream's), as W&B's model metadata."""
        return {
            k: v
            for k, v in dict(run.summary).items()
            if isinstance(v, numbers.Number) and not k.startswith("_")
        }


def _save_model(model: Any, processing: Any, folder: str) -> None:
    save = getattr(model, "save_pretrained", None)
    if callable(save):
        save(folder)
    else:
        import torch

        torch.save(model.state_dict(), os.path.join(folder, "pytorch_model.bin"))
    if processing is not None and callable(getattr(processing, "save_pretrained", None)):
        processing.save_pretrained(folder)
    Path(folder, "model_architecture.txt").write_text(str(model) + "\n", encoding="utf-8")


def _to_dict(value: Any) -> Any:
    to_dict = getattr(value, "to_dict", None)
    return to_dict() if callable(to_dict) else value
