"""The hang watchdog: notices when training stopped calling ``log()``, and says where.

One daemon thread per recording process polls two counters that already move when the
program logs: the run's ``step()`` (set by every ``log()`` on the training thread) and the
writer's ``metrics_records`` (one per ``log()`` call, counted on the writer thread). The
second catches programs that log the same step over and over. ``log()`` itself does
nothing for the watchdog, so it costs nothing there.

When neither counter has moved for ``stall_timeout`` seconds (5 min by default;
``stall_timeout=0`` turns the watchdog off) it records a ``Stall``: how long training
has been idle, the stack of every Python thread of the process, and ``where`` — the
innermost call of the thread that called ``init()`` as seen from the program's own code,
e.g. ``"all_reduce at train.py:88"`` — which of the stacks is that thread's, and the
process's last flight-recorder entries (``rankwise.sdk.flight``), from which readers
tell which collective the job waits in (``rankwise.hang``). This covers one rank stuck
while the others keep going as well as all ranks stuck at once, since each process
judges only itself. When logging resumes it records a ``Stall`` with ``cleared=True``; a
stall is reported once, and readers tell how long it has lasted from its time and the
stream's heartbeats.

Stacks come from ``sys._current_frames()``, so a thread blocked in C (a collective, a
CUDA sync) shows the Python line that called into it. A C call that holds the GIL
forever stops every Python thread, this one included: nothing can be recorded then.
"""

from __future__ import annotations

import linecache
import os
import re
import sys
import sysconfig
import threading
import time
import traceback
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING

from .. import _log
from ..stream import records as R
from . import flight

if TYPE_CHECKING:
    from ..settings import Settings
    from .handle import RunHandle

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_LIBRARY_DIRS = tuple(
    {
        os.path.realpath(p)
        for key in ("stdlib", "platstdlib", "purelib", "platlib")
        if (p := sysconfig.get_paths().get(key))
    }
)
_CALL = re.compile(r"([A-Za-z_][\w.]*)\s*\(")


def is_program_file(filename: str) -> bool:
    """True for the program's own code: not the standard library, installed packages,
    rankwise itself or frozen modules."""
    if not filename or filename.startswith("<"):
        return False
    path = os.path.realpath(filename)
    if path.startswith(_PACKAGE_DIR + os.sep):
        return False
    return not any(path.startswith(d + os.sep) for d in _LIBRARY_DIRS)


def where(frame: FrameType) -> str:
    """``"<call> at <file>:<line>"`` for the innermost frame of the program's own code.

    ``<call>`` is the innermost Python function below that frame (``all_reduce`` when the
    program waits in ``torch.distributed.all_reduce``); when the program's frame is the
    innermost one (blocked in a C function such as ``time.sleep``), it is the first call
    on that source line, else the frame's function.
    """
    frames: list[FrameType] = []
    f: FrameType | None = frame
    while f is not None:
        frames.append(f)  # innermost first
        f = f.f_back
    own = next((i for i, f in enumerate(frames) if is_program_file(f.f_code.co_filename)), None)
    if own is None:
        inner = frames[0]
        return f"{inner.f_code.co_name} at {_short(inner)}"
    program = frames[own]
    if own > 0:
        call = frames[0].f_code.co_name
    else:
        line = linecache.getline(program.f_code.co_filename, program.f_lineno)
        match = _CALL.search(line)
        call = match.group(1).rsplit(".", 1)[-1] if match else program.f_code.co_name
    return f"{call} at {_short(program)}"


def _short(frame: FrameType) -> str:
    return f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"


def thread_stacks(skip: int | None = None) -> dict[str, str]:
    """``{"<thread name> (<ident>)": formatted stack}`` for every Python thread."""
    names = {t.ident: t.name for t in threading.enumerate()}
    out = {}
    for ident, frame in sys._current_frames().items():
        if ident == skip:
            continue
        out[f"{names.get(ident, 'thread')} ({ident})"] = "".join(traceback.format_stack(frame))
    return out


class Watchdog:
    """The daemon thread. ``progress()`` returns something that changes on every ``log()``."""

    def __init__(
        self,
        progress: Callable[[], object],
        put: Callable[[float, str, dict[str, str], bool, str], None],
        timeout: float,
        thread_id: int,
        poll: float | None = None,
    ) -> None:
        self._progress = progress
        self._put = put
        self._timeout = timeout
        self._thread_id = thread_id  # whose stack says "where"
        self._poll = poll if poll is not None else max(0.05, min(timeout / 5.0, 10.0))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rankwise-watchdog", daemon=True)
        self.stalls = 0

    def start(self) -> None:
        self._thread.start()

    def stop(self, deadline: float) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(max(0.0, min(deadline - time.monotonic(), 2.0)))

    def _run(self) -> None:
        try:
            last = self._progress()
            since = time.monotonic()
            stalled_where: str | None = None
            while not self._stop.wait(self._poll):
                now = time.monotonic()
                current = self._progress()
                if current != last:
                    if stalled_where is not None:
                        self._put(now - since, stalled_where, {}, True, "")
                        stalled_where = None
                    last, since = current, now
                elif stalled_where is None and now - since >= self._timeout:
                    stalled_where = self._report(now - since)
        except Exception as exc:  # tracking never takes training down
            _log.warn(f"hang watchdog stopped: {exc!r}")

    def _report(self, idle: float) -> str:
        frames = sys._current_frames()
        ident: int | None = self._thread_id
        frame = frames.get(self._thread_id)
        if frame is None:  # the init() thread ended: the main thread is the next best
            ident = threading.main_thread().ident
            frame = frames.get(ident or -1)
        place = where(frame) if frame is not None else ""
        del frames, frame  # frames keep locals alive
        stacks = thread_stacks(skip=threading.get_ident())
        training = next((k for k in stacks if k.endswith(f" ({ident})")), "")
        self._put(idle, place, stacks, False, training)
        self.stalls += 1
        return place


def _tell(who: str, idle: float, place: str, cleared: bool) -> None:
    """One line on the terminal of the stalled process (and so among its stderr lines)."""
    from ..wire.health import duration_text

    took = f"{idle:.1f} s" if idle < 10 else duration_text(idle)
    if cleared:
        line = f"rankwise: {who} is logging again after {took}"
    else:
        at = f" (in {place})" if place else ""
        line = f"rankwise: {who} has not logged for {took}; stack saved{at}"
    try:
        stream = sys.stderr if sys.stderr is not None else sys.__stderr__
        if stream is not None:
            stream.write(line + "\n")
            stream.flush()
    except Exception:
        pass  # a closed terminal must not stop the watchdog


def attach(run: RunHandle, settings: Settings) -> Watchdog | None:
    """Watch a recording run; the thread calling this (``init()``'s) is the training one."""
    timeout = float(settings.stall_timeout)
    if timeout <= 0:
        return None
    step, records = run.step, run.metrics_records

    def progress() -> tuple[int, int]:
        return step(), records()

    who = run.who

    recorder = bool(settings.flight_recorder)

    def put(idle: float, place: str, stacks: dict[str, str], cleared: bool, thread: str) -> None:
        # The collectives this process entered, read on this thread, never training's.
        entries = [] if cleared else flight.entries(recorder)
        run.put_control(
            lambda seq, t: R.Stall(seq, t, idle, place, stacks, cleared, thread, entries)
        )
        run.urgent()  # a stall must reach the server now, not at the paced interval
        _tell(who, idle, place, cleared)

    dog = Watchdog(progress, put, timeout, threading.get_ident())
    run.add_component(dog)
    dog.start()
    return dog
