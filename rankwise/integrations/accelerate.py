"""Hugging Face Accelerate: ``RankwiseTracker``, a ``GeneralTracker`` for every rank.

``Accelerator(log_with=[RankwiseTracker(project="p")])``. The tracker's own methods run on
whichever process calls them (``main_process_only = False``), but Accelerate's
``Accelerator.init_trackers`` and ``Accelerator.log`` are ``@on_main_process``: on the
other ranks they return without calling any tracker (``accelerator.trackers`` stays
empty there). So, as given to ``Accelerator`` alone, the tracker records what
``accelerator.log`` logs on the main process only, like Accelerate's ``WandBTracker``.
To record every rank, either call the tracker itself on every rank
(``tracker.log(values, step=)``: it starts its run on first use), or let the accelerator
do it::

    accelerator = every_rank(Accelerator(log_with=[RankwiseTracker(project="p")]))
    accelerator.init_trackers("p", config=cfg)   # the rankwise trackers start on every rank
    accelerator.log({"loss": loss}, step=step)   # every rank records its own values
    accelerator.end_training()                   # and ends its stream

``every_rank`` changes that one ``Accelerator`` object (its ``init_trackers`` and ``log``):
on the main process they are Accelerate's, unchanged; on the other ranks they reach the
rankwise trackers only, so other trackers stay on the main process.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from accelerate.tracking import GeneralTracker

from ..errors import UsageError
from ..sdk.run import Run
from ..settings import default_project
from . import _common

__all__ = ["RankwiseTracker", "every_rank"]


class RankwiseTracker(GeneralTracker):  # type: ignore[misc]
    """Record an Accelerate run with rankwise, on every rank that uses the tracker.

    ``project`` (else the ``project_name`` given to ``init_trackers`` through
    ``every_rank``, ``RANKWISE_PROJECT``, or ``"accelerate"``), ``name``, ``id``,
    ``run_mode`` (``"shared"``: one run, a stream per rank) and ``rank_scope`` are
    ``rankwise.init()``'s; other keywords go to it too. ``tracker`` is the ``Run``.
    """

    name = "rankwise"
    requires_logging_directory = False
    main_process_only = False

    def __init__(
        self,
        project: str | None = None,
        name: str | None = None,
        id: str | None = None,
        run_mode: str = "shared",
        rank_scope: str = "global",
        config: Any = None,
        **init_kwargs: Any,
    ) -> None:
        super().__init__()
        self._init = _common.check_init_kwargs(
            dict(init_kwargs, name=name, id=id, run_mode=run_mode, rank_scope=rank_scope),
            "RankwiseTracker",
        )
        self._project = project
        self._config = None if config is None else _common.check_config(config)
        self._run: Run | None = None
        self._owned = False

    def _defaults(self, project_name: str | None, init_kwargs: Mapping[str, Any] | None) -> None:
        """What ``init_trackers`` was given, for a run that has not started yet."""
        if self._project is None and project_name:
            self._project = project_name
        if init_kwargs:
            self._init.update(_common.check_init_kwargs(init_kwargs, "init_kwargs['rankwise']"))

    def start(self) -> None:
        """Start (or reuse) this process's run; Accelerate calls it in ``init_trackers``."""
        kwargs = dict(self._init)
        kwargs["project"] = default_project(self._project, fallback="accelerate")
        if self._config is not None:
            kwargs["config"] = self._config
        run = self._run
        if run is None:
            self._run, self._owned = _common.start_run(kwargs)
        elif self._owned and _common.ended(run):  # used again after finish()
            self._run = _common.start_again(run, kwargs)

    @property
    def tracker(self) -> Run:
        """The rankwise ``Run`` of this process (``get_tracker("rankwise", unwrap=True)``)."""
        self.start()
        assert self._run is not None
        return self._run

    def store_init_configuration(self, values: dict[str, Any]) -> None:
        self.tracker.config.update(values)

    def log(self, values: dict[str, Any], step: int | None = None, **kwargs: Any) -> None:
        """``run.log(values, step=step)``; W&B's other keywords (``commit``, ...) are left
        out, with a warning."""
        if kwargs:
            _common.warn_once(
                "accelerate-log:" + ",".join(sorted(kwargs)),
                f"RankwiseTracker.log: {', '.join(sorted(kwargs))} left out (run.log takes step)",
            )
        self.tracker.log(values, step=step)

    def log_images(self, values: dict[str, Any], step: int | None = None, **kwargs: Any) -> None:
        """Each key's list of images (arrays, tensors or PIL images) as one gallery."""
        for key, images in values.items():
            self.log({key: _common.images(images, {}, "log_images")}, step=step, **kwargs)

    def log_table(
        self,
        table_name: str,
        columns: list[str] | None = None,
        data: list[list[Any]] | None = None,
        dataframe: Any = None,
        step: int | None = None,
        **kwargs: Any,
    ) -> None:
        """A ``rankwise.Table`` from ``columns`` and ``data``, or from a DataFrame."""
        self.log({table_name: _common.table(columns, data, dataframe)}, step=step, **kwargs)

    def finish(self) -> None:
        """End this process's stream (if the tracker started the run)."""
        if self._run is not None and self._owned:
            self._run.finish()


def every_rank(accelerator: Any) -> Any:
    """Make ``accelerator.init_trackers`` and ``accelerator.log`` reach its
    ``RankwiseTracker``s on every rank (see the module docstring). Returns ``accelerator``."""
    mine = [t for t in accelerator.log_with if isinstance(t, RankwiseTracker)]
    if not mine:
        raise UsageError(
            "every_rank(accelerator): the accelerator has no RankwiseTracker; pass "
            "Accelerator(log_with=[RankwiseTracker(...)])"
        )
    main_init = accelerator.init_trackers
    main_log = accelerator.log

    def init_trackers(
        project_name: str,
        config: dict[str, Any] | None = None,
        init_kwargs: dict[str, Any] | None = None,
    ) -> None:
        for tracker in mine:
            tracker._defaults(project_name, (init_kwargs or {}).get(tracker.name))
        main_init(project_name, config=config, init_kwargs=init_kwargs)
        if accelerator.is_main_process:
            return
        for tracker in mine:  # Accelerate did nothing here: start the rankwise trackers
            if tracker not in accelerator.trackers:
                accelerator.trackers.append(tracker)  # so end_training() finishes them
            tracker.start()
            if config is not None:
                tracker.store_init_configuration(config)

    def log(
        values: dict[str, Any], step: int | None = None, log_kwargs: dict[str, Any] | None = None
    ) -> None:
        if accelerator.is_main_process:
            main_log(values, step=step, log_kwargs=log_kwargs)
            return
        for tracker in accelerator.trackers:
            if isinstance(tracker, RankwiseTracker):
                tracker.log(values, step=step, **(log_kwargs or {}).get(tracker.name, {}))

    accelerator.init_trackers = init_trackers
    accelerator.log = log
    return accelerator
