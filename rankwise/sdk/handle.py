"""What a helper that records into a run may use of it: ``RunHandle`` and ``Component``.

The uploader, the system sampler, the hang watchdog and console capture (and any later
encoder) each run beside the training loop for as long as the run's stream is open. They
attach through ``Run.handle()``, a narrow public view of one recording run, instead of
reaching into ``Run`` or its writer: a component puts records on the writer's queue
(``put_control``), reads how far training got (``step()``, ``metrics_records()``), asks
whether the writer is behind (``behind()``), and registers itself to be stopped when the
run ends (``add_component``).

Calls that act on a run from its user's thread (``run.log_artifact``/``use_artifact``,
``run.watch``, ``run.define_metric``) take a handle too: ``Run.handle(any_rank=True)``
is also given on a rank that records nothing (``recording()`` False, ``path`` None, its
``put_control`` drops records), so such a call can still resolve an artifact. What a
helper keeps across calls (the artifact worker, the model watcher, the metric
definitions so far) lives in ``slots``, one dict per run shared by all its handles.

A component is anything with ``stop(deadline)``, ``deadline`` a ``time.monotonic()``
value it must return by.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..settings import Settings
from ..stream import records as R

# Called on the writer thread with the frame's sequence number and time; returns the record.
BuildRecord = Callable[[int, float], R.Record]


class Component(Protocol):
    """Something that lives as long as a run's stream and is stopped when it ends."""

    def stop(self, deadline: float) -> None:
        """Stop, flushing what it holds, and return by ``deadline`` (``time.monotonic()``)."""
        ...


@dataclass(frozen=True, eq=False)
class RunHandle:
    """A component's view of one recording run (see the module docstring).

    Built by ``Run.handle()``; every callable is cheap and safe from any thread.
    """

    project: str
    run_id: str
    label: str
    rank: int
    world_size: int
    local_rank: int
    dir: Path  # <root>/<project>/<run id>
    path: Path | None  # this process's stream file (None: handle(any_rank=True) only)
    settings: Settings
    # Queue a record the writer builds (``build(seq, time)``) in order with log() calls.
    put_control: Callable[[BuildRecord], None]
    # The last step logged by the training thread.
    step: Callable[[], int]
    # Metrics records the writer has made so far: it moves as log() calls are written.
    metrics_records: Callable[[], int]
    # True while the writer is behind by more than ``max_queue_bytes``: log() values
    # come first, so optional records (console lines) are skipped meanwhile.
    behind: Callable[[], bool]
    _add_component: Callable[[Component, bool], None]
    # Ask this process's uploader to send what is new now, past any pacing the server
    # asked for (a stall record: the job's story is in it). A no-op in local mode.
    urgent: Callable[[], None] = lambda: None
    # Remote mode: the server's URL (artifacts go there); None in local mode.
    server: str | None = None
    is_primary: bool = True
    # The run's state now ("running", "finished", ...).
    state: Callable[[], str] = lambda: "running"
    # Does this process record into the run now? (False on a rank that records nothing,
    # and in a forked child.)
    recording: Callable[[], bool] = lambda: True
    # Per-run state helpers keep across calls, by name ("artifacts": the artifact
    # worker, "watch": the model watcher, "metric_defs": the definitions so far).
    slots: dict[str, Any] = field(default_factory=dict)

    def add_component(self, component: Component, after_writer: bool = False) -> None:
        """Stop ``component`` when the run ends: before the finish record is written
        (``after_writer=False``: what it flushes lands in the stream) or after it."""
        self._add_component(component, after_writer)

    @property
    def who(self) -> str:
        """How messages name this process: ``rank 3``, or ``this process`` alone."""
        return f"rank {self.rank}" if self.world_size > 1 or self.rank > 0 else "this process"
