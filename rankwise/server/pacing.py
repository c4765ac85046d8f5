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
* above ``target``, the interval grows in proportion (at most doubling, up to
  ``max_interval``); after ``CALM_WINDOWS`` seconds in a row below a third of it, it
  shrinks, and under ``FLOOR`` (the SDK's default ``upload_interval``) the advice stops.
* It changes at most once per interval: not before one interval has passed since it
  last changed, when every uploader has posted and heard it. Until then the seconds
  only show uploaders still on the interval they were told before. Shrinking on them
  (it used to shrink a fifth every calm second) brought 1,000 ranks back together, the
  next seconds were slow, the interval doubled, and the data lag followed the peaks of
  that sawtooth; growing on them (it used to double every slow second) took one start's
  flood of first uploads, which create every stream, from 2 s to 10 s in three seconds,
  and the ranks waited it out for half a minute after the flood had passed.
* How far it shrinks follows how busy the group commit was since the last change (its
  store time over the wall time, ``busy``): the same records in twice as many uploads
  cost the committer at most twice as much, so a committer busy under half of
  ``BUSY_TARGET`` halves the interval at once (``MIN_SHRINK``), a busier one shrinks it
  to what would make it ``BUSY_TARGET`` busy, and never by less than a fifth
  (``SHRINK``) while calm. An idle server is back to no advice within two or three
  intervals, not thirty seconds.

Uploaders spread their waits (0.8-1.2 times the advice), so ranks that were refused or
paced together do not stay in step.

Nothing is refused or dropped by pacing: it only spaces requests. An uploader that
ignores it is still bounded by ``Admission``: overload is answered, not queued. An upload
is admitted only while this process expects to answer it within ``ADMIT_WAIT`` pace
targets (by the group commit's backlog, and by Little's law over the whole process,
``Pacer.admits``) and while fewer than ``--max-inflight`` are in progress; otherwise 429
with ``Retry-After`` at once, rather than a wait that grows. ``create_app`` builds one
``Pacer`` and one ``Admission`` per app; the ingest route asks it before reading a body.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

FLOOR = 1.0  # the SDK's default upload_interval: advice below it means none
WINDOW = 1.0  # seconds of observations per adjustment
LAG_EVERY = 0.25  # the event-loop probe's period
CALM_WINDOWS = 3  # calm windows in a row before the interval shrinks
SHRINK = 0.8  # the interval's largest factor when it shrinks
MIN_SHRINK = 0.5  # and its smallest: at most halved at once
BUSY_TARGET = 0.5  # the group commit's busy share a shrink aims for
REFUSED_FLOOR = 2.0  # the interval asked for, at least, once uploads are being refused
FIRST_CAPACITY = 64.0  # uploads/s this process is assumed to finish before it has shown more
MIN_ADMITTED = 8  # uploads always admitted at once, whatever the estimate
# An upload is admitted only while this process expects to answer it within this many
# pace targets (1 s by default).
ADMIT_WAIT = 2.0
# Receiving slots in all per admission slot (``max_inflight``).
RECEIVING_PER_INFLIGHT = 4


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
        self._changed = clock()  # when the interval last changed
        self._busy = 0.0  # the group commit's store seconds since then (``busy``)

    @property
    def enabled(self) -> bool:
        return self.max_interval > 0

    def observe(self, seconds: float) -> None:
        """One ingest request took ``seconds`` in this process."""
        with self._lock:
            self._times.append(seconds)
        self._adjust()

    def busy(self, seconds: float) -> None:
        """The group commit spent ``seconds`` applying a batch (``GroupCommit(on_busy=)``)."""
        with self._lock:
            self._busy += seconds

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
            self._changed_at(self._clock())

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
        if not self._heard(now):
            return
        before = self.interval
        if pressure > self.target:
            grown = max(FLOOR, self.interval) * min(2.0, pressure / self.target)
            self.interval = min(self.max_interval, grown)
        elif self._calm >= CALM_WINDOWS and self.interval > 0:
            self.interval *= self._shrink(now)
            if self.interval < FLOOR:
                self.interval = 0.0
        if self.interval != before:
            self._changed_at(now)

    def _shrink(self, now: float) -> float:
        """The factor a calm interval shrinks by: what would make the group commit
        ``BUSY_TARGET`` busy at the new interval, from how busy it was since the last
        change, within ``MIN_SHRINK``..``SHRINK``."""
        with self._lock:
            busy = self._busy / max(now - self._changed, 1e-9)
        return min(SHRINK, max(MIN_SHRINK, busy / BUSY_TARGET))

    def _changed_at(self, now: float) -> None:
        self._changed = now
        with self._lock:
            self._busy = 0.0

    def _heard(self, now: float) -> bool:
        """Whether every uploader has posted since the interval last changed: until then
        a calm second may only be ranks still waiting out the longer interval they were
        told (shrinking again would bring them back together: the sawtooth), and a slow
        one only ranks that have not heard of the longer interval yet."""
        return now - self._changed >= self.interval

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


@dataclass(frozen=True)
class Refusal:
    """An upload not admitted now: answered ``status`` (429) with ``Retry-After``."""

    status: int
    message: str
    retry_after: int


class Admission:
    """Which uploads this process takes now (the event loop's thread only: no lock).

    ``inflight`` counts the uploads being checked and applied; ``receiving`` the bodies
    still arriving, by sender. A body still arriving holds no admission slot
    (``max_inflight``): slow senders would otherwise lock every project out. It holds a
    receiving slot instead, at most ``max_inflight`` per sender and
    ``RECEIVING_PER_INFLIGHT`` times that in all (and the route's body deadline).
    ``max_inflight`` 0: no cap.
    """

    def __init__(self, pacer: Pacer, max_inflight: int, retry_after: int) -> None:
        self.pacer = pacer
        self.max_inflight = max_inflight
        self.retry_after = retry_after
        self.inflight = 0
        self.receiving: dict[str, int] = {}

    def admit(self, inflight: int, backlog: float) -> Refusal | None:
        """None to take an upload arriving with ``inflight`` others in progress and
        ``backlog`` seconds of group-commit work queued; else the 429 to answer. A
        refused uploader comes back no sooner than the pace asked of every uploader."""
        pacer, cap = self.pacer, self.max_inflight
        budget = ADMIT_WAIT * pacer.target
        if not (
            0 < cap <= inflight
            or (pacer.enabled and (backlog > budget or not pacer.admits(inflight, budget)))
        ):
            return None
        pacer.refused()
        why = (
            f"the server is handling {inflight} uploads (--max-inflight {cap})"
            if inflight >= cap > 0
            else f"the server is behind ({inflight} uploads in progress)"
        )
        wait = max(self.retry_after, math.ceil(pacer.interval))
        return Refusal(429, f"{why}: retry after the Retry-After seconds", wait)

    def receive(self, sender: str) -> Refusal | None:
        """Take a receiving slot for ``sender``'s body (give it back with ``received``),
        or the 429 to answer when its or everyone's slots are taken."""
        mine, everyone = self.receiving.get(sender, 0), sum(self.receiving.values())
        cap = self.max_inflight
        if cap > 0 and (mine >= cap or everyone >= RECEIVING_PER_INFLIGHT * cap):
            return Refusal(
                429,
                f"{mine if mine >= cap else everyone} upload bodies are still arriving: "
                "retry after the Retry-After seconds",
                self.retry_after,
            )
        self.receiving[sender] = mine + 1
        return None

    def unavailable(self) -> Refusal:
        """The 503 to answer while the store cannot write (disk full, database down)."""
        return Refusal(
            503,
            "the store cannot write now; nothing of this upload was applied: retry after "
            "the Retry-After seconds",
            self.retry_after,
        )

    def received(self, sender: str) -> None:
        self.receiving[sender] -= 1
        if not self.receiving[sender]:
            del self.receiving[sender]


def _p90(values: list[float]) -> float:
    if not values:
        return 0.0
    values.sort()
    return values[min(len(values) - 1, int(0.9 * len(values)))]
