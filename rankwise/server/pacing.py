"""Upload pacing: how often this server process asks uploaders to post, from its load.

A thousand ranks posting once a second cost a thousand requests a second, each paying the
same fixed price (HTTP, the stream's row, one write per metric series) for one second of
records. When this process falls behind, it asks its uploaders to post less often: every
ingest reply carries ``X-Rankwise-Upload-Interval: <seconds>``, and the SDK's uploader
waits at least that long between posts while training runs (its records stay in its
stream file meanwhile, as always). Fewer, larger uploads carry the same records for a
fraction of the cost, so the process catches up instead of queueing until clients time
out; the price is that the dashboard sees a rank's newest points a few seconds later.

The controller, once a second:

* ``pressure`` is the larger of the 90th percentile of the ingest requests' time in this
  process (from the body read to the reply: decoding, checks, the group commit's wait
  and apply) and the event loop's lag (how late a timer fires), over the last second;
* above ``target``, the interval grows in proportion (at most doubling each second, up to
  ``max_interval``); after ``CALM_WINDOWS`` seconds in a row below a third of it, it
  shrinks by a tenth a second, and under ``FLOOR`` (the SDK's default
  ``upload_interval``) the advice stops. Growing fast and shrinking slowly keeps it from
  oscillating: uploaders hear of a new interval only at their next post.

Uploaders spread their waits (0.8-1.2 times the advice), so ranks that were refused or
paced together do not stay in step.

Nothing is refused or dropped by pacing: it only spaces requests. An uploader that
ignores it is still bounded by ``--max-inflight`` (429 with ``Retry-After``).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

FLOOR = 1.0  # the SDK's default upload_interval: advice below it means none
WINDOW = 1.0  # seconds of observations per adjustment
LAG_EVERY = 0.25  # the event-loop probe's period
CALM_WINDOWS = 5  # calm windows in a row before the interval shrinks
REFUSED_FLOOR = 2.0  # the interval asked for, at least, once uploads are being refused
FIRST_CAPACITY = 64.0  # uploads/s this process is assumed to finish before it has shown more
MIN_ADMITTED = 8  # uploads always admitted at once, whatever the estimate


class Pacer:
    """The advised upload interval of one server process (0: no advice)."""

    def __init__(
        self,
        max_interval: float = 10.0,
        target: float = 0.5,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_interval = max_interval  # 0: never advise
        self.target = target
        self.interval = 0.0
        self._clock = clock
        self._lock = threading.Lock()
        self._times: list[float] = []
        self._lag = 0.0
        self._since = clock()
        self._calm = 0  # windows in a row with pressure under a third of the target
        # Uploads finished per second at the busiest recent window (decaying 1 % a
        # window, never under FIRST_CAPACITY): what this process has shown it can do.
        self.capacity = FIRST_CAPACITY
        self._probe: asyncio.Task[None] | None = None

    @property
    def enabled(self) -> bool:
        return self.max_interval > 0

    def observe(self, seconds: float) -> None:
        """One ingest request took ``seconds`` in this process."""
        with self._lock:
            self._times.append(seconds)
        self._adjust()

    def admits(self, inflight: int, budget: float) -> bool:
        """Would an upload arriving now, with ``inflight`` others in this process, be
        answered within ``budget`` seconds? By Little's law the time in the process is
        ``inflight / throughput``; the throughput is ``capacity``. It counts every stage
        (the event loop, the checks, the group commit), not only the store."""
        return inflight < max(MIN_ADMITTED, self.capacity * budget)

    def observe_lag(self, seconds: float) -> None:
        """The event loop ran a timer ``seconds`` late."""
        with self._lock:
            self._lag = max(self._lag, seconds)
        self._adjust()

    def refused(self) -> None:
        """This process just answered 429: it is behind now, whatever the last window
        said. Ask for at least ``REFUSED_FLOOR`` at once (a flood of ranks starting
        together is refused and retried within a second or two, before any window
        closes)."""
        if self.enabled and self.interval < REFUSED_FLOOR:
            self.interval = min(self.max_interval, REFUSED_FLOOR)

    def header(self) -> str | None:
        """The reply header's value, or None while there is no advice."""
        self._adjust()
        return f"{self.interval:.1f}" if self.interval > 0 else None

    def _adjust(self) -> None:
        now = self._clock()
        with self._lock:
            if now - self._since < WINDOW:
                return
            times, lag, since = self._times, self._lag, self._since
            self._times, self._lag, self._since = [], 0.0, now
        # Never under the first guess: a quiet hour must not make a burst look like
        # overload (the group commit's backlog still guards a slow store).
        self.capacity = max(FIRST_CAPACITY, len(times) / (now - since), self.capacity * 0.99)
        if not self.enabled:
            return
        pressure = max(_p90(times), lag)
        self._calm = self._calm + 1 if pressure < self.target / 3 else 0
        if pressure > self.target:
            grown = max(FLOOR, self.interval) * min(2.0, pressure / self.target)
            self.interval = min(self.max_interval, grown)
        elif self._calm >= CALM_WINDOWS and self.interval > 0:
            # Slowly: uploaders hear of a shorter interval only at their next post, so the
            # load it brings shows an interval later; shrinking fast would oscillate.
            self.interval *= 0.9
            if self.interval < FLOOR:
                self.interval = 0.0

    def start_probe(self) -> None:
        """Measure the running event loop's lag (once per process; call from the loop)."""
        if self._probe is None and self.enabled:
            self._probe = asyncio.get_running_loop().create_task(self._measure_lag())

    async def _measure_lag(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            t0 = loop.time()
            await asyncio.sleep(LAG_EVERY)
            self.observe_lag(max(0.0, loop.time() - t0 - LAG_EVERY))


def _p90(values: list[float]) -> float:
    if not values:
        return 0.0
    values.sort()
    return values[min(len(values) - 1, int(0.9 * len(values)))]
