"""``Run``: what ``rankwise.init()`` returns on every rank.

A recording run owns one stream (one file, one writer thread). A run on a rank that does
not record under its run mode is falsy and every call on it is a cheap no-op, so
``if run:`` guards rank-specific work and unguarded ``run.log()`` is harmless.

Helpers that record beside the training loop (uploader, system sampler, watchdog,
console capture) attach through ``run.handle()`` (``rankwise.sdk.handle``). The run's
owner (``session``) tells it how to end under the process hooks by passing ``ending``:
the run never registers itself with the hooks.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import traceback as tb_module
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from .. import _log
from ..errors import UsageError
from ..media import base as media_base
from ..settings import Settings
from ..stream import records as R
from .alerts import Alerts
from .handle import Component, RunHandle
from .hooks import exit_code_of
from .mappings import Config, Summary
from .writer import CALL_UNITS, UNIT, StreamWriter

_now = time.time
_CLOSED = -(2**62)  # Run._room of a run that takes no more values
# Taken from Run._room when a rich value (rankwise.Image, ...) is made, so that the next
# log() takes the slow path and looks for rich values: a log() of numbers alone pays
# nothing for them. A room below -_ARMED (and above _CLOSED) means "armed".
_RICH = 2**50
_ARMED = 2**49
END_STATES = R.END_STATES
_MAX_STEP = 2**63 - 1  # a step the stream format holds (``stream.records.Int``)


def _not_hooked(run: Run) -> AbstractContextManager[None]:
    return contextlib.nullcontext()


def _set(field: str) -> Callable[[Run, Any], None]:
    def setter(run: Run, value: Any) -> None:
        from .live_edits import checked, edited_start

        ok, clean = checked(field, value)
        if not ok:
            return
        run._start = edited_start(run._start, field, clean)
        writer = run._writer
        if writer is None or run._closed:
            if run._recording:
                _log.warn(f"run.{field} was set after run {run.id!r} ended: not recorded")
            return
        writer.put_control(lambda seq, t: R.RunEdit(seq, t, field, clean))

    return setter


class Run:
    """One process's handle on a run. See ``rankwise.init``."""

    def __init__(
        self,
        *,
        start: R.StreamStart,
        root: Path,
        settings: Settings,
        writer: StreamWriter | None,
        path: Path | None,
        first_step: int = -1,
        ending: Callable[[Run], AbstractContextManager[None]] = _not_hooked,
    ) -> None:
        """Made by ``rankwise.init()``. ``ending(run)`` is entered while the run ends:
        the process hooks' (``hooks.ending``), which forget the run and hold a SIGTERM
        until its Finish record is written."""
        self._start = start
        self._ending = ending
        self._settings = settings
        self._writer = writer
        self._recording = writer is not None
        self._closed = writer is None
        self._state = "running" if writer is not None else "disabled"
        self._step = first_step
        # log(commit=False): (step, values, weight) held for the next call's row.
        self._held: tuple[int, dict[str, Any], Any] | None = None
        self._warned_closed = False
        self._warned_step = False
        self._warned_drop = False
        self._warned_after: set[str] = set()
        self._alerts = Alerts()
        self._queue = writer.queue if writer is not None else None
        # Backpressure (see sdk/writer.py), in units: log() may queue ``_room`` more
        # before it must look at the writer's ``taken_units``; what it has queued in all
        # is ``_limit - _room``. Only the slow path (_refill) reads the writer's counter.
        # A closed run has no room at all, so log()'s one check covers closing too.
        self._max_units = max(1, int(settings.max_queue_bytes) // UNIT)
        self._limit = self._room = self._max_units if writer is not None else _CLOSED
        self._stall_timeout = float(settings.writer_stall_timeout)
        self._stalled_at = -1  # the writer's taken_units when it was found stalled
        self.dir = root / start.project / start.run_id
        self.path = path  # this process's stream file, None when not recording
        # The run's dashboard page, when a server or a `rankwise ui` of this directory
        # is known at init() (see rankwise.sdk.announce); None otherwise.
        self.url: str | None = None
        # Remote mode: the server's URL (set by init()); artifacts go there.
        self.server: str | None = None
        # What helpers keep across calls on this run (RunHandle.slots): the artifact
        # worker, the model watcher, the metric definitions so far.
        self._slots: dict[str, Any] = {}
        # Helpers that live as long as the stream (uploader, samplers, console capture):
        # each has stop(deadline) and is stopped by end(), before or after the writer.
        self._components: list[tuple[Component, bool]] = []
        self.config = Config(start.config, self._record_config)
        self.summary = Summary(self._last_values, self._record_summary)
        # Rich values: the encoder thread (rankwise.sdk.encoder), made on the first one.
        self._media: Any = None
        self._media_done = False  # set by end(): no encoder is made after this
        self._media_lock = threading.Lock()
        if writer is not None:
            media_base.set_max_media_bytes(settings.max_media_bytes)
            media_base.ARMS.add(self._arm_rich)
            writer.on_rich = self._rich_from_writer
            if media_base.made():  # values made before init() may be in the first log()
                self._arm_rich()

    # -- identity -----------------------------------------------------------------
    id = property(lambda self: self._start.run_id, doc="The run id (after the run mode).")
    # name, tags and notes may be set on the live run (rankwise.sdk.live_edits)
    name = property(lambda self: self._start.name or self._start.run_id, _set("name"))
    project = property(lambda self: self._start.project)
    group = property(lambda self: self._start.group)
    job_type = property(lambda self: self._start.job_type)
    tags = property(lambda self: tuple(self._start.tags), _set("tags"))
    notes = property(lambda self: self._start.notes, _set("notes"))
    label = property(lambda self: self._start.label, doc="This process's stream label.")
    incarnation = property(lambda self: self._start.incarnation)
    rank = property(lambda self: self._start.rank)
    world_size = property(lambda self: self._start.world_size)
    local_rank = property(lambda self: self._start.local_rank)
    local_world_size = property(lambda self: self._start.local_world_size)
    node_rank = property(lambda self: self._start.node_rank)
    num_nodes = property(lambda self: self._start.num_nodes)
    is_primary = property(lambda self: self._start.is_primary)
    run_mode = property(lambda self: self._start.run_mode)
    rank_scope = property(lambda self: self._start.rank_scope)
    step = property(lambda self: self._step, doc="The last step logged by this process.")
    state = property(lambda self: self._state)

    def __bool__(self) -> bool:
        return self._recording

    def __repr__(self) -> str:
        what = self.label if self._recording else "not recording"
        return f"<rankwise.Run {self.project}/{self.id} {what} {self._state}>"

    # -- logging --------------------------------------------------------------------
    def log(
        self,
        data: Mapping[str, Any],
        step: int | None = None,
        weight: Any = None,
        commit: bool | None = None,
    ) -> None:
        """Record ``data`` (metric name → number) at ``step`` (default: the next step).

        Costs a dict copy and a queue append; values are checked and written by the
        writer thread. Never raises because of the data. Waits only while the writer is
        behind by more than ``max_queue_bytes``; drops (and counts) values only when the
        writer made no progress for ``writer_stall_timeout`` seconds.

        ``commit=False`` (W&B's): hold ``data`` and add it to the next call's row instead
        of recording it now — that call's step, when it gives none or the same one; a
        call with another step records the held row first, at its own step, as does
        ``finish()``. ``commit=None`` or ``True`` records now, as before.
        """
        try:
            values = dict(data)
        except (TypeError, ValueError):
            return self._not_a_mapping(data)
        if commit is not None or self._held is not None:
            return self._log_commit(values, step, weight, commit)
        room = self._room - (len(values) + 3)  # the call's units: CALL_UNITS + one a value
        if room < 0:
            return self._log_slow(values, step, weight, room)
        if step is None:
            step = self._step + 1
        elif step.__class__ is not int or step < self._step or step > _MAX_STEP:
            step = self._odd_step(step)
        self._step = step
        self._room = room
        self._queue.append((_now(), step, weight, values))  # type: ignore[union-attr]

    def _log_one(self, key: Any, value: Any, step: int) -> None:
        """``log({key: value}, step)`` for the TensorBoard capture's ``add_scalar``
        (``rankwise.sdk.tensorboard``): the same guarantees, less work on the training
        thread. No dict is made or copied: ``(time, step, None, key, value)`` is queued
        and the writer thread makes the dict (``sdk/writer.py``). Whatever log() would
        not queue at once (a step not an int or going back, no room left, a rich value
        armed, a closed run, a row held by ``commit=False``) goes through ``log()``. The
        ``add_scalar`` that the capture makes inlines these checks and the append (its
        ``_SCALAR_SOURCE``) and calls this for the rest: keep the two in step."""
        room = self._room - 4  # the call's units: CALL_UNITS + one value
        if (
            room < 0
            or step.__class__ is not int
            or step < self._step
            or step > _MAX_STEP
            or self._held is not None
        ):
            return self.log({key: value}, step)
        self._step = step
        self._room = room
        self._queue.append((_now(), step, None, key, value))  # type: ignore[union-attr]

    def _log_commit(self, values: dict[str, Any], step: Any, weight: Any, commit: Any) -> None:
        """``log(commit=False)`` and the call after it (``log``'s docstring)."""
        held, self._held = self._held, None
        if held is not None:
            held_step, held_values, held_weight = held
            if step is None or step == held_step:
                values = {**held_values, **values}
                step = held_step
                weight = held_weight if weight is None else weight
            else:
                self.log(held_values, step=held_step, weight=held_weight)
        if commit is False and not self._closed:
            if step is None:
                step = self._step + 1
            elif step.__class__ is not int or step < self._step:
                step = self._odd_step(step)
            self._held = (step, values, weight)
            return None
        return self.log(values, step=step, weight=weight)

    def _log_slow(self, values: dict[str, Any], step: Any, weight: Any, room: int) -> None:
        """log() of a closed run, one that used up its room, or one armed by a rich
        value: look for rich values, then at the writer."""
        if self._closed:
            return self._log_closed()
        if step is None:
            step = self._step + 1
        elif step.__class__ is not int or step < self._step or step > _MAX_STEP:
            step = self._odd_step(step)
        self._step = step  # a dropped call still takes its step
        if self._room < -_ARMED:
            while self._room < -_ARMED:
                self._room += _RICH
            values = self._log_rich(values, step)
            if not values:
                return
            room = self._room - (CALL_UNITS + len(values))
            if room >= 0:
                self._room = room
                self._queue.append((_now(), step, weight, values))  # type: ignore[union-attr]
                return
        if (room := self._refill(room, CALL_UNITS + len(values))) < 0:
            return self._drop(values)
        self._room = room
        self._queue.append((_now(), step, weight, values))  # type: ignore[union-attr]

    def queued_units(self) -> int:
        """What waits for the writer, in ``UNIT``s (an estimate; see sdk/writer.py)."""
        writer = self._writer
        if writer is None or self._closed:
            return 0  # log() adds nothing more: what a closing run flushes is let in
        room = self._room
        while room < -_ARMED:
            room += _RICH
        return self._limit - room - writer.taken_units

    # -- rich values (rankwise.media) ----------------------------------------------------
    def _arm_rich(self) -> None:
        """A rich value was made (on any thread): the next log() looks for rich values.
        Lost to a race with a log() on another thread, a value is still recorded, by the
        writer's fallback (``_rich_from_writer``), only outside the byte bound."""
        if self._room >= -_ARMED and not self._closed:
            self._room -= _RICH

    def _log_rich(self, values: dict[str, Any], step: int) -> dict[str, Any]:
        """Hand the call's rich values to the encoder thread (waiting while it holds more
        than ``max_media_queue_bytes``); returns the rest of the call."""
        from .encoder import split_rich

        rest, found = split_rich(values)
        if not found:
            return values
        encoder = self._media_encoder()
        if encoder is None:
            return values
        t = _now()
        for key, value in found:
            if not encoder.log(t, step, key, value):
                self._writer.dropped += 1  # type: ignore[union-attr]
        return rest

    def _rich_from_writer(self, t: float, step: int, found: list[tuple[str, Any]]) -> None:
        """The writer thread found rich values that log() did not (a race with another
        thread's constructor): queued without waiting, outside the byte bound."""
        encoder = self._media_encoder()
        if encoder is None:
            _log.warn(f"{len(found)} rich value(s) reached the writer after finish(): skipped")
            return
        for key, value in found:
            encoder.submit(t, step, key, value, 0)

    def _media_encoder(self) -> Any:
        encoder = self._media
        if encoder is None:
            with self._media_lock:
                handle = self.handle()
                if self._media is None and not self._media_done and handle is not None:
                    from .encoder import MediaEncoder

                    self._media = MediaEncoder(handle)
                    self.add_component(self._media, after_writer=False)
                encoder = self._media
        return encoder

    def _refill(self, room: int, cost: int) -> int:
        """The room left once this call (``cost``, already taken from ``room``) is
        queued, after waiting for the writer if it is behind by more than the bound;
        < 0: drop it. A call larger than the bound waits for an empty queue."""
        writer = self._writer
        assert writer is not None
        put = self._limit - room  # queued in all, this call included
        before = max(0, self._max_units - cost)  # what may wait ahead of this call
        if put - cost - writer.taken_units > before and not self._wait(put - cost, before):
            return -1
        self._limit = writer.taken_units + self._max_units
        return max(0, self._limit - put)

    def _wait(self, put: int, limit: int) -> bool:
        """Wait until at most ``limit`` of the ``put`` units queued is still waiting;
        False: the writer is stalled, drop this call.

        A writer that takes nothing off the queue for ``writer_stall_timeout`` is
        stalled (a hung or failing disk): calls are dropped at once from then on, until
        it moves again, so a dead filesystem costs training one wait, not one per call.
        """
        writer = self._writer
        assert writer is not None
        if self._stalled_at >= 0:
            if writer.taken_units == self._stalled_at and writer.alive:
                return False
            self._stalled_at = -1
        while put - writer.taken_units > limit:
            if not writer.alive:
                return False
            seen = writer.taken_units
            writer.progress.clear()
            writer._wake.set()
            if put - writer.taken_units <= limit:
                break
            if not writer.progress.wait(self._stall_timeout) and writer.taken_units == seen:
                self._stalled_at = seen
                return False
        return True

    def _not_a_mapping(self, data: Any) -> None:
        _log.warn(f"log() takes a mapping of metric name to number, not {type(data).__name__}")

    def _odd_step(self, step: Any) -> int:
        try:
            value = int(step)
            if value != step or not -_MAX_STEP <= value <= _MAX_STEP:
                raise ValueError
        except (TypeError, ValueError, OverflowError):
            _log.warn(f"log() step={step!r} is not a 64-bit integer: using step {self._step + 1}")
            return self._step + 1
        if value < self._step and not self._warned_step:
            self._warned_step = True
            _log.warn(
                f"log() step {value} is lower than the last step {self._step} of stream "
                f"{self.label!r}: the values are kept, and charts by step will fold back "
                "(shown once per run)"
            )
        return value

    def _drop(self, data: Mapping[str, Any]) -> None:
        writer = self._writer
        assert writer is not None
        try:
            writer.dropped += len(data)
        except TypeError:
            writer.dropped += 1
        if not self._warned_drop:
            self._warned_drop = True
            _log.warn(
                f"the stream writer made no progress for {self._stall_timeout:g}s with "
                f"{self._max_units * UNIT / 2**20:g} MiB waiting (a hung or failing disk?): "
                "dropping values (counted in the stream's 'dropped') instead of hanging "
                f"training. Check the filesystem of {self.path}, or raise settings "
                "writer_stall_timeout."
            )

    def _log_closed(self) -> None:
        if self._recording and not self._warned_closed:
            self._warned_closed = True
            _log.warn(
                f"run {self.id!r} is {self._state}: log() ignored. Call rankwise.init() "
                "to start a new run."
            )

    # -- metric definitions -------------------------------------------------------------
    def define_metric(
        self,
        name: str,
        *,
        reduce: str | None = None,
        step_metric: str | None = None,
        summary: str | None = None,
        goal: str | None = None,
        hidden: bool | None = None,
    ) -> None:
        """Define how ``name`` (a metric key, or a glob ending in ``*``) is shown: its
        cross-rank line ``reduce`` ("mean" by default, "wmean", "sum", "min", "max"),
        kept with the run (the latest definition wins). See ``rankwise.metric_defs``."""
        from .definitions import define_metric

        define_metric(self._any_handle(), self._writer, self._closed, name, reduce=reduce,
                      step_metric=step_metric, summary=summary, goal=goal,
                      hidden=hidden)  # fmt: skip

    # -- alerts -----------------------------------------------------------------------
    def alert(
        self, title: str, text: str = "", level: Any = None, wait_duration: Any = None
    ) -> None:
        """Tell people: an alert event the server delivers to the project's alert
        destinations (webhook, Slack, e-mail; ``rankwise alert add``). W&B's signature:
        ``level`` is "INFO", "WARN" or "ERROR"; ``wait_duration`` (seconds or a
        timedelta, default 60 s) is the least time between two alerts of one title.
        Never raises: bad arguments are warned about once (``rankwise.sdk.alerts``)."""
        try:
            self._alerts.alert(self._writer, self._closed, title, text, level, wait_duration)
        except Exception as exc:  # tracking never stops training
            _log.warn(f"run.alert() failed and was skipped: {exc!r}")

    def _record_config(self, items: dict[str, Any]) -> None:
        if self._writer is not None and not self._closed:
            self._writer.put_control(lambda seq, t: R.ConfigUpdate(seq, t, items))
        else:
            self._after_end("config", items)

    def _record_summary(self, items: dict[str, Any]) -> None:
        if self._writer is not None and not self._closed:
            self._writer.put_control(lambda seq, t: R.SummaryUpdate(seq, t, items))
        else:
            self._after_end("summary", items)

    def _after_end(self, what: str, items: dict[str, Any]) -> None:
        if self._recording and self._closed and what not in self._warned_after:
            self._warned_after.add(what)
            _log.warn(
                f"run.{what}[{next(iter(items))!r}] was set after run {self.id!r} is "
                f"{self._state}: not recorded (shown once). Set it before finish()."
            )

    def _last_values(self) -> Mapping[str, Any]:
        writer = self._writer
        if writer is None:
            return {}
        if not self._closed:
            writer.sync(timeout=2.0)
        return writer.last_values

    # -- watching a model ---------------------------------------------------------------
    def watch(
        self,
        models: Any,
        log: str | None = "gradients",
        log_freq: int = 100,
        ranks: str = "primary",
    ) -> None:
        """Record 64-bin histograms of ``models``' gradients (``log="gradients"``),
        parameters (``"parameters"``) or both (``"all"``), and each parameter's and the
        total gradient norm, every ``log_freq``-th backward pass, on the primary rank
        (``ranks="primary"``) or on every recording rank (``"all"``). A second call on
        the same model updates it instead of adding hooks. See ``rankwise.sdk.watch``."""
        from .watch import watch

        watch(self._any_handle(), models, log=log, log_freq=log_freq, ranks=ranks)

    def unwatch(self, models: Any = None) -> None:
        """Remove ``watch``'s hooks from ``models`` (a module or a list), or from all."""
        from .watch import unwatch

        unwatch(self._any_handle(), models)

    # -- artifacts: see rankwise.artifacts ----------------------------------------------
    def log_artifact(
        self,
        artifact_or_path: Any,
        name: str | None = None,
        type: str | None = None,
        aliases: Any = None,
        tags: Any = None,
    ) -> Any:
        """Log a ``rankwise.Artifact`` (or a file or directory path) as a new version;
        returns at once (the files are hashed and stored in the background: the
        artifact's ``wait()`` blocks until then). On a rank that does not record: a no-op
        returning the artifact."""
        from ..artifacts.run_calls import log_artifact

        return log_artifact(
            self._any_handle(), artifact_or_path, name=name, type=type, aliases=aliases, tags=tags
        )

    def log_code(
        self,
        root: str | os.PathLike[str] | None = ".",
        name: str | None = None,
        include_fn: Callable[..., bool] | None = None,
        exclude_fn: Callable[..., bool] | None = None,
    ) -> Any:
        """Save the source files under ``root`` (``*.py`` by default) as an artifact of
        type ``code`` (``rankwise.sdk.code``); returns it (None when nothing matched)."""
        from . import code

        return code.log_code(self, root, name, include_fn or code.include_py,
                             exclude_fn or code.exclude_default)  # fmt: skip

    def use_artifact(
        self,
        artifact_or_name: Any,
        type: str | None = None,
        aliases: Any = None,
        use_as: str | None = None,
    ) -> Any:
        """The artifact ``name``, ``name:latest``, ``name:v3``, ``name:alias`` or
        ``project/name:alias``, recorded as used by this run; ``download()`` its files."""
        from ..artifacts.run_calls import use_artifact

        return use_artifact(
            self._any_handle(), artifact_or_name, type=type, aliases=aliases, use_as=use_as
        )

    def log_model(self, path: Any, name: str | None = None, aliases: Any = None) -> Any:
        """Log a model file or directory as an artifact of type ``model``."""
        from ..artifacts.run_calls import log_model

        return log_model(self._any_handle(), path, name=name, aliases=aliases)

    def use_model(self, name: str) -> str:
        """Download model artifact ``name`` (recorded as used); returns its local path."""
        from ..artifacts.run_calls import use_model

        return use_model(self._any_handle(), name)

    # -- ending -------------------------------------------------------------------
    def finish(self, exit_code: int = 0) -> None:
        """End this process's stream: ``finished`` for 0, ``failed`` otherwise.

        Waits at most ``settings.finish_timeout`` seconds for the writer.
        """
        state = "finished" if exit_code == 0 else "failed"
        self.end(state, exit_code=int(exit_code))

    def end(
        self,
        state: str,
        exit_code: int = 0,
        signal: int | None = None,
        error: BaseException | None = None,
        timeout: float | None = None,
    ) -> None:
        """End this process's stream as ``state`` (``finished``, ``failed`` or
        ``killed``), with the exit code, signal and exception that ended it; the
        process hooks call it. ``finish()`` is this for a plain exit code. Waits at most
        ``timeout`` (default ``settings.finish_timeout``) seconds; a second call does
        nothing."""
        if state not in END_STATES:
            raise UsageError(f"state={state!r} is not one of {', '.join(END_STATES)}")
        if self._closed:
            return
        # From here a SIGTERM (a launcher's, just as a failing rank is ending) waits for
        # the Finish record: were it to land once the run is closed but before the hold,
        # its own end() would find the run ended and the process would die without one.
        with self._ending(self):
            if not self._closed:  # unless a SIGTERM's end() came first and did it all
                self._end(state, exit_code, signal, error, timeout)

    def _end(
        self,
        state: str,
        exit_code: int,
        signal: int | None,
        error: BaseException | None,
        timeout: float | None,
    ) -> None:
        if self._held is not None:  # log(commit=False) with no call after it
            held_step, values, weight = self._held
            self._held = None
            self.log(values, step=held_step, weight=weight)
        self._closed = True
        self._room = _CLOSED
        media_base.ARMS.discard(self._arm_rich)
        media_base.set_max_media_bytes(media_base.DEFAULT_MAX_BYTES)
        self._state = state
        writer = self._writer
        assert writer is not None
        record = R.Finish(0, time.time(), state, exit_code=exit_code, signal=signal)
        if error is not None:
            record.error_type = type(error).__qualname__
            record.error_message = str(error)
            record.traceback = "".join(tb_module.format_exception(error))
        if state != "finished" and self.path is not None:
            # Within the SIGTERM hold: it may take half a second (``dead_peers``).
            record.peers_gone = dead_peers(self.path, self._start, error)
        limit = self._settings.finish_timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        if self._media is not None or media_base.made():
            # rich values the writer finds late reach the encoder before it stops
            writer.sync(timeout=max(0.0, deadline - time.monotonic()))
        self._media_done = True
        self._stop_components(after_writer=False, deadline=deadline)
        if not writer.close(record, max(0.0, deadline - time.monotonic())):
            left = len(writer.queue)
            _log.warn(
                f"stream {self.label!r} of run {self.id!r} was not fully written within "
                f"{limit:.0f}s ({left} log calls still queued); what reached "
                f"{self.path} is kept"
            )
        self._stop_components(after_writer=True, deadline=deadline)

    @property
    def finish_timeout(self) -> float:
        """Seconds ``finish()`` waits for the writer at most (``settings.finish_timeout``)."""
        return float(self._settings.finish_timeout)

    def handle(self, any_rank: bool = False) -> RunHandle | None:
        """The view of this run that helpers recording beside training attach through
        (see ``rankwise.sdk.handle``); None when this process does not record, unless
        ``any_rank``: then a view on every rank (``recording()`` tells them apart)."""
        writer = self._writer
        if writer is None or self.path is None:
            return self._any_handle() if any_rank else None
        max_units = self._max_units
        return RunHandle(
            project=self.project,
            run_id=self.id,
            label=self.label,
            rank=self.rank,
            world_size=self.world_size,
            local_rank=self.local_rank,
            dir=self.dir,
            path=self.path,
            settings=self._settings,
            put_control=writer.put_control,
            step=lambda: self._step,
            metrics_records=lambda: writer.metrics_records,
            behind=lambda: self.queued_units() > max_units,
            _add_component=self.add_component,
            urgent=self._urgent,
            **self._handle_common(),
        )

    def _any_handle(self) -> RunHandle:
        handle = self.handle()
        if handle is not None:
            return handle
        return RunHandle(  # a rank that records nothing: records put here are dropped
            project=self.project,
            run_id=self.id,
            label=self.label,
            rank=self.rank,
            world_size=self.world_size,
            local_rank=self.local_rank,
            dir=self.dir,
            path=None,
            settings=self._settings,
            put_control=lambda build: None,
            step=lambda: self._step,
            metrics_records=lambda: 0,
            behind=lambda: False,
            _add_component=self.add_component,
            **self._handle_common(),
        )

    def _handle_common(self) -> dict[str, Any]:
        return {
            "server": self.server,
            "is_primary": self.is_primary,
            "state": lambda: self._state,
            "recording": lambda: bool(self),
            "slots": self._slots,
        }

    def _urgent(self) -> None:
        for component, _ in list(self._components):
            hurry = getattr(component, "urgent", None)
            if hurry is not None:
                hurry()

    def add_component(self, component: Component, after_writer: bool = False) -> None:
        """Attach something with ``stop(deadline)`` to this run's lifetime.

        ``after_writer=False`` components are stopped before the finish record is
        written (so what they flush lands in the stream); ``True`` ones after it (the
        uploader, which must see the finish record). ``deadline`` is a
        ``time.monotonic()`` value.
        """
        self._components.append((component, after_writer))

    def _stop_components(self, after_writer: bool, deadline: float) -> None:
        for component, after in self._components:
            if after is after_writer:
                try:
                    component.stop(deadline)
                except Exception as exc:
                    _log.warn(f"could not stop {type(component).__name__}: {exc!r}")

    def forked(self) -> None:
        """Called in a forked child (by the process hooks): the child must never write
        its parent's stream, so this run stops recording without touching it."""
        self._closed = True
        self._room = _CLOSED
        media_base.ARMS.discard(self._arm_rich)
        self._recording = False
        self._writer = None
        self._queue = None

    def __enter__(self) -> Run:
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        if exc is None:
            self.finish()
        elif isinstance(exc, KeyboardInterrupt):
            self.end("killed", exit_code=130, signal=2, error=exc)
        elif isinstance(exc, SystemExit):
            code = exit_code_of(exc.code)
            self.end("finished" if code == 0 else "failed", exit_code=code)
        else:
            self.end("failed", exit_code=1, error=exc)


def dead_peers(
    own: Path, start: R.StreamStart, error: BaseException | None = None, budget: float = 0.5
) -> list[str]:
    """Labels of the sibling streams (same run) whose writer this process can see dead:
    same host and pid namespace, pid gone or reused (``process_alive``). Asked when the
    job goes down: the files are read within ``budget`` seconds. When this process ends
    by a peer-connection ``error`` and no peer is seen dead yet, they are looked at again
    for up to half a second: a killed peer's sockets close before its process is gone.
    Never raises."""
    from ..failures import is_peer_symptom
    from ..stream.files import SUFFIX, read_stream_start
    from ..stream.fold import process_alive

    try:
        latest: dict[str, R.StreamStart] = {}  # each label's latest incarnation
        deadline = time.monotonic() + budget
        for path in sorted(own.parent.glob(f"*{SUFFIX}")):
            if path == own or time.monotonic() > deadline:
                continue
            peer = read_stream_start(path)
            if peer is None or peer.label == start.label:
                continue
            held = latest.get(peer.label)
            if held is None or peer.incarnation > held.incarnation:
                latest[peer.label] = peer
        # another pid namespace (a container): its pid means nothing here
        mine = {k: p for k, p in latest.items() if p.pid_ns and p.pid_ns == start.pid_ns}
        symptom = error is not None and is_peer_symptom(None, str(error))
        until = time.monotonic() + (0.5 if symptom else 0.0)
        while True:
            dead = [
                label
                for label, p in sorted(mine.items())
                if process_alive(p.host, p.pid, p.pid_start_time) is False
            ]
            if dead or time.monotonic() >= until:
                return dead
            time.sleep(0.05)
    except Exception:  # tracking problems never stop the job from ending
        return []


def process_start_time() -> float:
    try:
        import psutil

        return float(psutil.Process(os.getpid()).create_time())
    except Exception:
        return 0.0
