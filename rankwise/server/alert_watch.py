"""The server's two alert threads: the evaluator judges runs, the deliverer empties the outbox.

Every server process (each worker of ``rankwise server --workers N``, each replica on one
PostgreSQL, ``rankwise ui``) runs both. That is safe because nothing here holds state
that matters: an event is decided by its unique key in the store (``store.decide_event``,
one row however many processes judge the same run), and a delivery is claimed in the
store before it is sent (``store.claim_deliveries``), so each goes out from one process.
Neither thread touches ingest: a slow or failing receiver costs the deliverer's thread
its time and nothing else.

The **evaluator** looks every ``evaluate_every`` s at the runs with a record in the last
hour (plus the crash timeout) of the projects that have a destination, and decides the
events that need time to tell:

* ``failed``: the run's first failure (``rankwise.failures``), once per incarnation;
* ``hang``: a rank's open stall once it is ``hang_grace`` old, naming every stalled rank
  and where it waits (``hang_summary``: the run's hang report, ``rankwise.hang``);
* ``heartbeat``: running ranks silent for ``heartbeat_timeout``, once per incarnation;
* ``straggler``: a rank slower than the median over ``straggler_window``, at most once
  per ``straggler_every`` per rank;
* ``rule``: the destinations' metric rules (``rankwise.alerting.Rule``) on a logged
  metric's cross-rank line, or on any one line of a system chart (``gpu/util_percent``,
  or ``gpu_util`` for short: a GPU idle for ten minutes), once per run and rule.

The **deliverer** claims due deliveries, sends them (``alert_send``), and settles them:
delivered, or retried after ``retry_base * 2**(attempts-1)`` s (at most ``retry_max``)
until ``give_up`` s after the event, then marked failed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import Any

from ..alerting import Rule, message, parse_rule
from ..errors import DeliveryError, UsageError
from ..hang import RankPosition, hang_report
from ..health import StreamSteps, assess
from ..store.alerts import Claimed
from ..store.health import quantity
from ..wire.runs import RunInfo
from .alert_send import send
from .config import AlertSettings

log = logging.getLogger("rankwise.server")

_HORIZON = 3600.0
# Rule names for system charts (rankwise.sdk.gpu, system.py) as people say them.
SYSTEM_ALIASES = {
    "gpu_util": "gpu/util_percent",
    "gpu_mem_util": "gpu/mem_util_percent",
    "cpu_util": "node/cpu_percent",
}


def hang_summary(
    stalled: Sequence[StreamSteps], now: float, streams: Sequence[StreamSteps] = ()
) -> tuple[str, str, dict[str, Any]]:
    """(title, text, details) of a hang: the run's hang report (``rankwise.hang``, the
    same roll call the readers show: the odd ones out first, the collective they never
    joined), told from every stream of the run (``streams``; the stalled ones alone when
    not given)."""
    positions = [
        RankPosition(s.label, s.rank, s.state, s.stall, s.last_seen) for s in (streams or stalled)
    ]
    report = hang_report(positions)
    longest = max(
        (now if s.state == "running" else min(now, s.last_seen or now))
        - (s.stall.time - s.stall.idle_seconds)
        for s in stalled
        if s.stall
    )
    title = f"hang: {len(stalled)} rank{'s' if len(stalled) != 1 else ''} stalled"
    lines = report.lines if report is not None else []
    text = f"Stalled for {longest:.0f} s. " + "\n".join(lines)
    details: dict[str, Any] = {
        "ranks": [
            {"label": s.label, "rank": s.rank, "where": s.stall.where if s.stall else ""}
            for s in stalled
        ],
        "odd": report.odd if report is not None else [],
    }
    if report is not None and report.collective is not None:
        c = report.collective
        details["collective"] = {
            "pg": c.pg,
            "seq": c.seq,
            "op": c.op,
            "entered": c.entered,
            "missing": [r.label for r in c.missing],
        }
    return title, text, details


class Evaluator:
    """Judges runs for the events that need time to tell (module docstring)."""

    def __init__(self, store: Any, settings: AlertSettings, crash_timeout: float = 60.0) -> None:
        self.store = store
        self.settings = settings
        self.crash_timeout = crash_timeout
        self._bad_rules: set[str] = set()
        self._now = 0.0

    def evaluate(self, now: float | None = None) -> int:
        """One pass over the recent runs; returns how many events it decided."""
        now = time.time() if now is None else now
        self._now = now  # each event's time: the straggler rate limit compares with it
        made = 0
        # Only the projects someone is told about are judged: a pass reads every recent
        # run's streams, which a project nobody subscribed to need not pay for.
        wanted = {d.project for d in self.store.list_destinations()}
        if not wanted:
            return 0
        since = now - _HORIZON - self.crash_timeout
        for project, run_id in self.store.alert_candidates(since):
            if "*" not in wanted and project not in wanted:
                continue
            try:
                made += self._run(project, run_id, now)
            except Exception:  # one odd run must not stop the others being judged
                log.exception("alerts: judging run %s/%s failed", project, run_id)
        return made

    def _decide(
        self,
        run: RunInfo,
        kind: str,
        key: str,
        title: str,
        text: str,
        level: str,
        details: dict[str, Any],
    ) -> int:
        made = self.store.decide_event(
            run.project,
            run.id,
            kind,
            key,
            f"{run.name}: {title}",
            text,
            level,
            details,
            self._now,
        )
        return 1 if made is not None else 0

    def _run(self, project: str, run_id: str, now: float) -> int:
        s = self.settings
        got = self.store.health_streams(project, run_id, s.straggler_window, now)
        if got is None:
            return 0
        run, streams, at = got
        made = 0
        ff = run.first_failure
        if ff is not None:
            made += self._decide(
                run,
                "failed",
                f"i{ff.incarnation}",
                f"rank {ff.rank} {ff.state}",
                ff.describe(),
                "ERROR",
                ff.to_dict(),
            )
        inc = max((st.incarnation for st in run.streams), default=0)
        # An open stall, once the other ranks' reports had time to arrive; a stream that
        # ended while stalled (torchrun or a timeout stopped the hung job) counts too.
        stalled = [
            st
            for st in streams
            if st.stall is not None
            and (st.state != "running" or now - st.stall.time >= s.hang_grace)
        ]
        if stalled:
            title, text, details = hang_summary(stalled, now, streams)
            made += self._decide(run, "hang", f"i{inc}", title, text, "ERROR", details)
        silent = [
            st
            for st in streams
            if st.state in ("running", "crashed")
            and st.last_seen is not None
            and now - st.last_seen >= s.heartbeat_timeout
        ]
        if silent:
            who = ", ".join(str(st.rank) if st.rank >= 0 else st.label for st in silent)
            made += self._decide(
                run,
                "heartbeat",
                f"i{inc}",
                f"heartbeat stopped (rank {who})",
                f"No record from rank {who} for {s.heartbeat_timeout:.0f} s or more, while "
                "the run was not finished: the process may be dead or frozen.",
                "WARN",
                {"ranks": [st.label for st in silent]},
            )
        if run.state == "running":
            made += self._stragglers(run, streams, at)
            made += self._rules(run, now)
        return made

    def _stragglers(self, run: RunInfo, streams: list[StreamSteps], now: float) -> int:
        s = self.settings
        if len(streams) < 2:
            return 0
        made = 0
        for h in assess(streams, now, s.straggler_window):
            st = next(x for x in streams if x.label == h.label)
            old_enough = bool(st.points) and st.points[0][1] <= now - s.straggler_window
            alive = st.last_seen is not None and now - st.last_seen < s.heartbeat_timeout
            if not (h.slow and not h.stalled and h.state == "running" and old_enough and alive):
                continue  # a silent rank is the heartbeat event's business
            last = self.store.last_event_time(run.project, run.id, "straggler", f"{h.label}:")
            if last and now - last < s.straggler_every:
                continue  # a flapping rank: told once per straggler_every
            made += self._decide(
                run,
                "straggler",
                f"{h.label}:{int(now // s.straggler_every)}",
                f"rank {h.rank} is a straggler",
                h.describe() + f" over the last {s.straggler_window / 60:.0f} min.",
                "WARN",
                {
                    "label": h.label,
                    "rank": h.rank,
                    "step_rate": h.step_rate,
                    "median_rate": h.median_rate,
                },
            )
        return made

    def _rules(self, run: RunInfo, now: float) -> int:
        rules: dict[str, Rule] = {}
        for dest in self.store.list_destinations(run.project) + self.store.list_destinations("*"):
            if "rule" not in dest.events:
                continue
            for text in dest.rules:
                try:
                    rules[text] = parse_rule(text)
                except UsageError:
                    if text not in self._bad_rules:  # stored before a check existed
                        self._bad_rules.add(text)
                        log.warning("alerts: skipping the malformed rule %r", text)
        made = 0
        keys = self.store.system_keys(run.project, run.id) or ()
        charts = {quantity(k)[0] for k in keys}
        for text, rule in sorted(rules.items()):
            metric = SYSTEM_ALIASES.get(rule.metric, rule.metric)
            if metric in charts:
                found = self._system_rule(run, rule, metric, now)
            else:
                found = self._metric_rule(run, rule, now)
            if found is None:
                continue
            value, where = found
            made += self._decide(
                run,
                "rule",
                text,
                f"rule {text}",
                f"{rule.metric}{where} is {value:.6g}: the rule '{text}' holds.",
                "WARN",
                {"rule": text, "metric": rule.metric, "value": value, "where": where.strip(" ()")},
            )
        return made

    def _metric_rule(self, run: RunInfo, rule: Rule, now: float) -> tuple[float, str] | None:
        """A logged metric's rule, on its cross-rank line."""
        band = self.store.band(run.project, run.id, rule.metric, x="time", max_points=2000)
        line = getattr(band, run.reduce_of(rule.metric), band.mean) or band.mean
        value = rule.check([(t, v) for t, v in zip(band.x, line) if v is not None], now)
        return None if value is None else (value, "")

    def _system_rule(
        self, run: RunInfo, rule: Rule, chart: str, now: float
    ) -> tuple[float, str] | None:
        """A system chart's rule (``gpu/util_percent < 20 for 10m``): it holds when it
        holds on any one of the chart's lines (a node, a GPU, a process)."""
        lo = None if rule.of_median else now - rule.seconds - 60.0
        for line in self.store.system_series(run.project, run.id, chart, lo=lo) or []:
            value = rule.check([(t, v) for t, v in zip(line.x, line.y) if v is not None], now)
            if value is not None:
                return value, f" ({line.name})"
        return None


class Deliverer:
    """Sends the outbox's due deliveries (module docstring)."""

    def __init__(self, store: Any, settings: AlertSettings) -> None:
        self.store = store
        self.settings = settings

    def deliver_due(self, now: float | None = None) -> int:
        """Claim and send what is due; returns how many were claimed."""
        s = self.settings
        now = time.time() if now is None else now
        # One at a time: a claim's lease need only outlast one send (a killed process's
        # claim comes due again after it), and each send is claimed as late as possible.
        claimed = self.store.claim_deliveries(now, s.send_timeout + 10.0, limit=1)
        for c in claimed:
            self._one(c)
        return len(claimed)

    def _one(self, c: Claimed) -> None:
        s = self.settings
        if c.destination is None:
            self.store.settle_delivery(c.outbox, delivered=False, error="destination removed")
            return
        body = message(c.event, s.public_url)
        try:
            send(
                c.destination, body, timeout=s.send_timeout, allow_private=s.allow_private_webhooks
            )
        except DeliveryError as exc:
            now = time.time()
            delay = min(s.retry_max, s.retry_base * 2 ** max(0, c.attempts - 1))
            give_up = now + delay - c.created > s.give_up
            log.warning(
                "alerts: event %d to destination %s (%s) failed (attempt %d): %s%s",
                c.event.id,
                c.destination.id,
                c.destination.kind,
                c.attempts,
                exc,
                "; giving up" if give_up else f"; retry in {delay:.0f} s",
            )
            self.store.settle_delivery(
                c.outbox, delivered=False, error=str(exc), retry_at=None if give_up else now + delay
            )
            return
        self.store.settle_delivery(c.outbox, delivered=True)


class AlertThreads:
    """The evaluator and the deliverer on their own daemon threads; ``stop()`` ends them."""

    def __init__(self, store: Any, settings: AlertSettings, crash_timeout: float = 60.0) -> None:
        self.evaluator = Evaluator(store, settings, crash_timeout)
        self.deliverer = Deliverer(store, settings)
        self.settings = settings
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(
                target=self._loop,
                args=(self.evaluator.evaluate, settings.evaluate_every),
                name="rankwise-alert-judge",
                daemon=True,
            ),
            threading.Thread(
                target=self._loop,
                args=(self.deliverer.deliver_due, settings.poll),
                name="rankwise-alert-send",
                daemon=True,
            ),
        ]
        self._failing: dict[str, float] = {}

    def start(self) -> AlertThreads:
        for t in self._threads:
            t.start()
        return self

    def _loop(self, fn: Any, every: float) -> None:
        name = threading.current_thread().name
        while not self._stop.is_set():
            busy = 0
            try:
                busy = int(fn())
            except Exception as exc:  # the database down: say so once a minute, go on
                now = time.monotonic()
                if now - self._failing.get(name, -1e9) > 60:
                    self._failing[name] = now
                    log.warning("alerts: %s: %r (retrying)", name, exc)
            if not busy:
                self._stop.wait(every)

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        for t in self._threads:
            if t.is_alive():
                t.join(timeout)


def start_alerts(
    store: Any, settings: AlertSettings, crash_timeout: float = 60.0
) -> AlertThreads | None:
    """The alert threads of one server process (None when alerts are off)."""
    if not settings.enabled:
        return None
    return AlertThreads(store, settings, crash_timeout).start()
