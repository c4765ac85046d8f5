"""Process-level hooks that end every open run with the right state.

==============================  =========================================================
how the process ends            state recorded
==============================  =========================================================
returns / ``sys.exit(0)``       finished (at interpreter exit)
``sys.exit(n)``, n != 0         failed, exit code n
builtin ``exit(n)``/``quit(n)``  failed, exit code n (wrapped like ``sys.exit``)
``raise SystemExit(n)``         failed, exit code n on Python 3.12+ (``sys.monitoring``
                                sees it leave ``__main__``); finished, 0 before 3.12
uncaught exception              failed, with type, message and traceback
KeyboardInterrupt (SIGINT)      killed, signal 2
SIGTERM (torchrun, scancel)     killed, signal 15; then the previous handler runs. One
                                that lands while an uncaught exception is ending the runs
                                waits for their Finish records (failed, the exception's)
                                and for its traceback to be printed
SIGKILL, OOM killer, os._exit   nothing can run: readers see a dead pid or a stale
                                heartbeat and call the stream crashed
==============================  =========================================================

A ``SystemExit`` raised directly bypasses ``sys.exit`` and reaches no excepthook, and
CPython clears it before ``atexit`` runs. On 3.12+ a ``sys.monitoring`` tool watches for
``PY_UNWIND`` and keeps the code of a ``SystemExit`` leaving the ``__main__`` module's
frame (the only unwind that ends the program). The event fires only while an exception
propagates out of a Python frame, never on ``log()``'s path; until Python makes
``PY_UNWIND`` a per-code event it is enabled process-wide and filtered by code object.

Each hook chains to what was installed before it. A forked child drops the parent's runs
without touching their files.

This module is a leaf: it knows runs only as ``Ending`` (what a hook needs of one) and
imports nothing of the SDK. ``session`` registers each recording run here and the
after-fork reset of its own state (``after_fork``); console capture asks for uncaught
tracebacks (``on_uncaught``); a run is handed ``ending`` by its owner, so it never
registers itself.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any, Protocol


class Ending(Protocol):
    """What the process hooks need of an open run."""

    @property
    def finish_timeout(self) -> float:
        """Seconds its ``end()`` may wait for the writer (``settings.finish_timeout``)."""
        ...

    def end(
        self,
        state: str,
        exit_code: int = 0,
        signal: int | None = None,
        error: BaseException | None = None,
        timeout: float | None = None,
    ) -> None:
        """Write the Finish record with ``state`` and stop; a second call does nothing."""
        ...

    def forked(self) -> None:
        """In a forked child: drop the parent's stream without touching its file."""
        ...


_open: list[Ending] = []
_after_fork_callbacks: list[Callable[[], None]] = []
_uncaught_callbacks: list[Callable[[str], None]] = []
_installed = False
_exit_code: Any = None
_exception: BaseException | None = None
# Reentrant: the SIGTERM handler asks for the open runs on the main thread, between the
# bytecodes of whatever it interrupted there, which may hold this lock (forget, open_runs).
_lock = threading.RLock()
# Runs being ended right now (Ending.end) and a signal that arrived meanwhile: a SIGTERM
# handler runs on the main thread, between the bytecodes of whatever ``end`` it
# interrupted there, so it must not end the process before that ``end`` has written
# its Finish record (a launcher sends SIGTERM just as a failing rank is ending).
_ending = 0
_deferred: int | None = None
_deferred_previous: Any = None  # the handler that was installed before ours, for it


@contextlib.contextmanager
def ending(run: Ending) -> Iterator[None]:
    """Around a run's ending: forget ``run`` and hold a SIGTERM until it has ended."""
    global _ending
    _ending += 1
    try:
        forget(run)
        yield
    finally:
        _ending -= 1
        if _ending == 0 and _deferred is not None and not _in_hook:
            _redeliver()


_in_hook = False  # inside the excepthook: it re-delivers after printing the traceback


def _redeliver() -> None:
    global _deferred, _deferred_previous
    sig, _deferred = _deferred, None
    previous, _deferred_previous = _deferred_previous, None
    if sig is None:
        return
    if callable(previous):  # the program's own handler, as when the signal is not held
        previous(sig, sys._getframe())
        return
    signal.signal(sig, signal.SIG_DFL)
    os.kill(os.getpid(), sig)


def register(run: Ending) -> None:
    """End ``run`` with the right state however the process ends (installs the hooks)."""
    global _installed
    with _lock:
        _open.append(run)
        if _installed:
            return
        _installed = True
    atexit.register(_at_exit)
    _wrap_excepthook()
    _wrap_sys_exit()
    _wrap_builtin_exit()
    _watch_main_unwind()
    _install_signal(signal.SIGTERM)
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_after_fork)


def after_fork(callback: Callable[[], None]) -> None:
    """Call ``callback`` in a forked child of a process that has registered a run."""
    _after_fork_callbacks.append(callback)


def on_uncaught(callback: Callable[[str], None]) -> None:
    """Call ``callback`` with an uncaught exception's traceback before the runs end (and
    before it is printed): console capture records it among the rank's stderr lines."""
    _uncaught_callbacks.append(callback)


def forget(run: Ending) -> None:
    with _lock:
        if run in _open:
            _open.remove(run)


def open_runs() -> list[Ending]:
    with _lock:
        return list(_open)


def _end_all(state: str, **kwargs: Any) -> None:
    for run in open_runs():
        try:
            run.end(state, **kwargs)
        except Exception:
            pass


def _at_exit() -> None:
    if _exception is not None:
        return  # the excepthook has ended the runs already
    code = exit_code_of(_exit_code)
    _end_all("finished" if code == 0 else "failed", exit_code=code)


def _wrap_excepthook() -> None:
    previous = sys.excepthook

    def excepthook(exc_type: Any, exc: BaseException, tb: Any) -> None:
        global _exception, _in_hook
        _exception = exc
        _in_hook = True
        # The traceback goes among the rank's stderr lines (Logs), not only into its
        # Finish record; it reaches the terminal after the runs ended, as before, so
        # the Finish record is written at once (a launcher's SIGTERM follows quickly).
        _note_traceback(exc_type, exc, tb)
        _end_uncaught(exc)
        try:
            previous(exc_type, exc, tb)
        finally:
            _in_hook = False
            if _deferred is not None:
                _redeliver()  # the SIGTERM that came while the runs were ending

    sys.excepthook = excepthook


def _end_uncaught(exc: BaseException, timeout: float | None = None) -> None:
    if isinstance(exc, KeyboardInterrupt):
        _end_all("killed", exit_code=130, signal=2, error=exc, timeout=timeout)
    else:
        _end_all("failed", exit_code=1, error=exc, timeout=timeout)


def _note_traceback(exc_type: Any, exc: BaseException, tb: Any) -> None:
    if not _uncaught_callbacks:
        return
    try:
        import traceback

        text = "".join(traceback.format_exception(exc_type, exc, tb))
    except Exception:
        return  # the Finish record still holds the traceback
    for callback in _uncaught_callbacks:
        try:
            callback(text)
        except Exception:
            pass


def _wrap_sys_exit() -> None:
    previous = sys.exit

    def exit(code: Any = None) -> None:
        global _exit_code
        _exit_code = code
        previous(code)

    exit.__doc__ = previous.__doc__
    sys.exit = exit  # type: ignore[assignment]


class _BuiltinExit:
    """``site``'s ``exit``/``quit``, noting the code as ``sys.exit``'s wrapper does."""

    def __init__(self, previous: Any) -> None:
        self._previous = previous

    def __repr__(self) -> str:
        return repr(self._previous)

    def __call__(self, code: Any = None) -> None:
        global _exit_code
        _exit_code = code
        self._previous(code)


def _wrap_builtin_exit() -> None:
    import builtins

    for name in ("exit", "quit"):
        previous = getattr(builtins, name, None)
        if callable(previous) and not isinstance(previous, _BuiltinExit):
            setattr(builtins, name, _BuiltinExit(previous))


def _main_module_code() -> Any:
    """The code object of the ``__main__`` module's frame when it is on the main
    thread's stack (``python script.py``, ``python -m mod``, ``python -c``), else None."""
    main = sys.modules.get("__main__")
    if main is None:
        return None
    frame: Any = (
        sys._getframe()
        if threading.current_thread() is threading.main_thread()
        else sys._current_frames().get(threading.main_thread().ident or -1)
    )
    found = None
    while frame is not None:
        if frame.f_globals is vars(main) and frame.f_code.co_name == "<module>":
            found = frame.f_code  # the outermost one: the module's own frame
        frame = frame.f_back
    return found


def _watch_main_unwind() -> None:
    """Python 3.12+: note the code of a ``SystemExit`` unwinding ``__main__``'s frame."""
    mon: Any = getattr(sys, "monitoring", None)
    code = _main_module_code() if mon is not None else None
    if code is None:
        return
    # Tool ids 0-2 and 5 are the debugger's, coverage's, profiler's and optimizer's.
    tool = next((t for t in (4, 3) if mon.get_tool(t) is None), None)
    if tool is None:
        return
    event = mon.events.PY_UNWIND

    def unwind(where: Any, offset: int, exc: BaseException) -> None:
        global _exit_code
        if where is code and isinstance(exc, SystemExit):
            _exit_code = exc.code

    try:
        mon.use_tool_id(tool, "rankwise")
        mon.register_callback(tool, event, unwind)
        try:
            mon.set_local_events(tool, code, event)  # a per-code event (newer Pythons)
        except ValueError:
            mon.set_events(tool, mon.get_events(tool) | event)
    except (ValueError, RuntimeError):
        pass  # another tool took the id meanwhile: the end is seen as before 3.12


def _install_signal(signum: int) -> None:
    if threading.current_thread() is not threading.main_thread():
        return
    try:
        previous = signal.getsignal(signum)
    except (ValueError, OSError):
        return
    if previous is signal.SIG_IGN:
        return  # the program chose to ignore it: so do we

    def handler(sig: int, frame: Any) -> None:
        global _deferred, _deferred_previous
        if _ending and not open_runs():  # an end() it interrupted finishes first
            _deferred, _deferred_previous = sig, previous
            return
        if _in_hook and _exception is not None:
            # An uncaught exception came first (a launcher's SIGTERM follows a rank's
            # error at once): it is the cause, and the runs end as it would end them;
            # the excepthook then prints its traceback and re-delivers the signal.
            _end_uncaught(_exception, timeout=_signal_timeout())
            _deferred, _deferred_previous = sig, previous
            return
        _end_all("killed", exit_code=128 + sig, signal=sig, timeout=_signal_timeout())
        if callable(previous):
            previous(sig, frame)
            return
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)

    try:
        signal.signal(signum, handler)
    except (ValueError, OSError):
        pass


def _signal_timeout() -> float:
    # torchrun and SLURM follow SIGTERM with SIGKILL after a grace period (30 s by
    # default for torchrun); leave most of it to the program's own handlers.
    runs = open_runs()
    limit = min((r.finish_timeout for r in runs), default=5.0)
    return min(limit, 5.0)


def _after_fork() -> None:
    global _open, _lock
    _lock = threading.RLock()
    for run in _open:
        run.forked()
    _open = []
    for callback in _after_fork_callbacks:
        try:
            callback()
        except Exception:
            pass  # a forked child (a DataLoader worker) must start whatever happens here


def exit_code_of(code: Any) -> int:
    """What the interpreter's exit status will be for ``sys.exit(code)``."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    return 1
