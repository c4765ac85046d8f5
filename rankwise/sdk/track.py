"""``@rankwise.track``: a function as a run, with the Flyte W&B plugin's rules.

::

    @rankwise.track(project="digits", run_mode="shared")
    def train(cfg):
        run = rankwise.get_run()      # None on a rank that does not record
        if run:
            run.log({"loss": 0.1})
        return model

Each call of the decorated function starts a run on every rank (``rankwise.init`` with
the decorator's arguments), so the ranks that record, the run ids and the groups are the
run modes' (``rankwise.sdk.modes``, the plugin's table): ``run_mode="auto"`` records
global rank 0 alone (``rank_scope="global"``) or local rank 0 of each node
(``"worker"``: a run ``{base}-worker-{node}`` per node, grouped under ``{base}``);
``"shared"`` records every rank into one run (per node under ``"worker"``); ``"new"``
gives each rank its own run ``{base}-rank-{rank}`` (``{base}-worker-{node}-rank-
{local_rank}`` under ``"worker"``) grouped under ``{base}`` (``{base}-worker-{node}``).

When the function returns, each recording rank's stream is finished and the value is
returned; when it raises, the stream ends *failed* (exit code 1, the exception's type,
message and traceback in its Finish record and among its stderr lines; ``killed`` for a
KeyboardInterrupt) and the exception propagates. A decorated function called inside
another (on the same thread or task) reuses the outer run and leaves finishing it to the
outer call. ``get_run()`` answers the run of the innermost tracked call, else
``rankwise.run``; None on a rank that does not record and after the run ended. An
outermost tracked call starts its own run even when ``rankwise.init()`` made one in this
process (ending that one, as a second ``init()`` does): every rank must start it, so the
ranks agree on its id.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, overload

from ..errors import UsageError
from . import session
from .modes import RANK_SCOPES, RUN_MODES

if TYPE_CHECKING:
    from .run import Run

F = TypeVar("F", bound=Callable[..., Any])

# The runs of the tracked calls this thread or task is inside, innermost last.
_active: contextvars.ContextVar[tuple[Run, ...]] = contextvars.ContextVar(
    "rankwise_tracked", default=()
)


def get_run() -> Run | None:
    """The run of the innermost ``@track``-ed call (else ``rankwise.run``); None where
    this rank does not record, or once the run has ended."""
    stack = _active.get()
    run = stack[-1] if stack else session.current
    if run is None or not run or run.state != "running":
        return None
    return run


@overload
def track(_func: F, /) -> F: ...


@overload
def track(
    _func: None = None,
    /,
    *,
    project: str | None = None,
    run_mode: str = "auto",
    rank_scope: str = "global",
    config: Any = None,
    **init_kwargs: Any,
) -> Callable[[F], F]: ...


def track(
    _func: Callable[..., Any] | None = None,
    /,
    *,
    project: str | None = None,
    run_mode: str = "auto",
    rank_scope: str = "global",
    config: Any = None,
    **init_kwargs: Any,
) -> Any:
    """Record each call of the decorated function as a run (see the module docstring).

    ``project``, ``run_mode``, ``rank_scope``, ``config`` and ``init_kwargs`` (``name``,
    ``id``, ``group``, ``tags``, ``dir``, ``server``, ...) go to ``rankwise.init()``.
    Works as ``@track`` and ``@track(...)``, on plain and ``async`` functions.
    """
    if run_mode not in RUN_MODES:
        raise UsageError(f"track(run_mode={run_mode!r}): give one of {', '.join(RUN_MODES)}")
    if rank_scope not in RANK_SCOPES:
        raise UsageError(f"track(rank_scope={rank_scope!r}): give one of {', '.join(RANK_SCOPES)}")
    if "run_mode" in init_kwargs or "rank_scope" in init_kwargs:  # pragma: no cover
        raise UsageError("track(): give run_mode and rank_scope once")
    kwargs = dict(init_kwargs, project=project, run_mode=run_mode, rank_scope=rank_scope)
    kwargs["config"] = config

    def decorate(func: F) -> F:
        if not callable(func):
            raise UsageError(f"@rankwise.track decorates a function, not {func!r}")
        if inspect.iscoroutinefunction(func):

            @functools.wraps(func)
            async def run_async(*args: Any, **kw: Any) -> Any:
                run, token = _enter(kwargs)
                try:
                    result = await func(*args, **kw)
                except BaseException as exc:
                    _leave(run, token, exc)
                    raise
                _leave(run, token, None)
                return result

            return run_async  # type: ignore[return-value]

        @functools.wraps(func)
        def run_sync(*args: Any, **kw: Any) -> Any:
            run, token = _enter(kwargs)
            try:
                result = func(*args, **kw)
            except BaseException as exc:
                _leave(run, token, exc)
                raise
            _leave(run, token, None)
            return result

        return run_sync  # type: ignore[return-value]

    if _func is not None:
        return decorate(_func)
    return decorate


def _enter(kwargs: dict[str, Any]) -> tuple[Run | None, contextvars.Token[tuple[Run, ...]]]:
    """Start this call's run, or reuse the enclosing tracked call's (returns None then)."""
    stack = _active.get()
    if stack:
        return None, _active.set(stack)
    run = session.init(**kwargs)
    return run, _active.set((*stack, run))


def _leave(run: Run | None, token: contextvars.Token[tuple[Run, ...]], exc: Any) -> None:
    """End the run this call started (finished, or failed with ``exc``'s traceback)."""
    _active.reset(token)
    if run is None:
        return  # an inner call: the outer one finishes the run
    try:
        if exc is None:
            run.__exit__(None, None, None)
        else:
            if run and not isinstance(exc, KeyboardInterrupt):
                # Among the rank's stderr lines too, as an uncaught exception's (hooks).
                from .console import note

                note("stderr", "".join(traceback.format_exception(exc)))
            run.__exit__(type(exc), exc, exc.__traceback__)
    finally:
        if session.current is run:
            session.current = None
