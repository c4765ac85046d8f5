"""Alerts: what events there are, where they go, and the metric rules (pure, no I/O).

An **event** is something worth telling people about one run. Each is decided once, by
a unique ``(run, kind, key)`` in the store (``rankwise.store.alerts``), whichever server
process or ingester sees it first; every process may try, only one row is ever made:

==========  ========================================================  ====================
kind        when                                                      key (one event per)
==========  ========================================================  ====================
failed      a stream of the run failed or crashed (its first failure)  incarnation
hang        a rank's watchdog reported a stall (``Stall``)             incarnation
nonfinite   the first NaN / ±Inf value of a metric                     metric
heartbeat   a running rank went silent (no record for a while)         incarnation
straggler   a rank slower than the median for N minutes                rank + hour (a rate
                                                                       limit: a flapping
                                                                       rank, once an hour)
rule        a metric rule held (``loss > 10``, ...)                    rule
alert       ``run.alert(title, text, level, wait_duration)``          stream record
==========  ========================================================  ====================

A **destination** (``rankwise alert add``) is a project's subscription: the event kinds
it wants, its rules, and where it sends them: a ``webhook`` (generic JSON signed with
HMAC-SHA256), ``slack`` (an incoming-webhook URL) or ``email`` (SMTP). Its secrets (the
URL of a webhook, the signing secret, the SMTP password) are kept in the store and are
never part of what the API or the CLI shows (``Destination.public``).

A **rule** is ``METRIC OP THRESHOLD [for DURATION]`` over the metric's cross-rank line:
``loss > 10``, ``gpu_util < 20 for 10m``, ``samples_per_s < 0.5*median`` (a fraction of
the line's own median so far). With ``for``, every value of the last DURATION holds
and the line is at least that old.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Iterable, Sequence
from typing import Any
from urllib.parse import quote, urlsplit

import msgspec

from .errors import UsageError
from .wire.alerts import AlertEvent, DestinationInfo

EVENTS = ("failed", "hang", "nonfinite", "heartbeat", "straggler", "rule", "alert")
KINDS = ("webhook", "slack", "email")
LEVELS = ("INFO", "WARN", "ERROR")
DEFAULT_EVENTS = ("failed", "hang", "nonfinite", "alert")


class Destination(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Where one project's alerts go. ``target`` is the URL (webhook, slack) or the
    e-mail address; ``secret`` the HMAC key of a webhook; ``smtp`` the SMTP settings of
    an e-mail destination (host, port, user, password, sender, tls)."""

    id: str
    project: str
    kind: str
    events: list[str]
    target: str
    rules: list[str] = []
    secret: str = ""
    smtp: dict[str, Any] = {}
    name: str = ""
    created: float = 0.0
    origin: str = "cli"  # cli | api | config (``rankwise ui --alerts``; replaced at start)

    def public(self) -> DestinationInfo:
        """What may be shown: never the URL's path or query, the secret or a password."""
        smtp_host = ""
        if self.kind == "email":
            smtp_host = f"{self.smtp.get('host', '')}:{self.smtp.get('port', 25)}"
        return DestinationInfo(
            id=self.id,
            project=self.project,
            kind=self.kind,
            events=list(self.events),
            rules=list(self.rules),
            target=shown_target(self.kind, self.target),
            name=self.name,
            created=self.created,
            origin=self.origin,
            smtp_host=smtp_host,
        )

    def wants(self, kind: str, key: str) -> bool:
        if kind == "rule":
            return "rule" in self.events and key in self.rules
        return kind in self.events


def shown_target(kind: str, target: str) -> str:
    """A webhook URL's scheme and host only (its path is the secret of a Slack hook)."""
    if kind == "email":
        return target
    parts = urlsplit(target)
    return f"{parts.scheme}://{parts.hostname or '?'}/…"


# -- checking what people type ---------------------------------------------------------


def parse_events(text: str | Iterable[str]) -> list[str]:
    """``"failed,hang"`` -> ["failed", "hang"]; an unknown name is a UsageError."""
    names = text.split(",") if isinstance(text, str) else list(text)
    out: list[str] = []
    for raw in names:
        name = raw.strip().lower()
        if not name:
            continue
        if name not in EVENTS:
            raise UsageError(
                f"unknown alert event {raw.strip()!r}: use one or more of {', '.join(EVENTS)} "
                "(comma-separated)"
            )
        if name not in out:
            out.append(name)
    if not out:
        raise UsageError(f"--on names no event: use one or more of {', '.join(EVENTS)}")
    return out


def check_url(url: str, what: str = "--webhook") -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(
            f"{what} must be an http:// or https:// URL with a host, not {_scheme_of(url)!r}: "
            "pass the receiver's full URL, e.g. https://hooks.example.com/rankwise"
        )
    return url


def _scheme_of(url: str) -> str:
    head, sep, _ = url.partition("://")
    return f"{head}://…" if sep else url[:20]


_EMAIL = re.compile(r"^[^@\s,;<>]+@[^@\s,;<>]+\.[^@\s,;<>]+$")


def check_email(address: str) -> str:
    if not _EMAIL.match(address):
        raise UsageError(f"--email {address!r} is not an e-mail address: use name@example.com")
    return address


# -- rules -------------------------------------------------------------------------------

_NUM = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
_RULE = re.compile(
    rf"^\s*(?P<metric>[A-Za-z0-9_./:\-]+)\s*(?P<op>>=|<=|>|<)\s*"
    rf"(?:(?P<factor>{_NUM})\s*\*\s*median|(?P<median>median)|(?P<value>{_NUM}))"
    rf"(?:\s+for\s+(?P<dur>{_NUM})\s*(?P<unit>s|sec|m|min|h)?)?\s*$"
)
_UNITS = {None: 1.0, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}


class Rule(msgspec.Struct, frozen=True):
    text: str
    metric: str
    op: str
    value: float  # the threshold, or the fraction of the median
    of_median: bool
    seconds: float  # 0: the last value alone

    def threshold(self, values: Sequence[float]) -> float | None:
        if not self.of_median:
            return self.value
        finite = [v for v in values if math.isfinite(v)]
        return self.value * statistics.median(finite) if finite else None

    def holds(self, value: float, threshold: float) -> bool:
        if not math.isfinite(value):
            return False  # a NaN is the nonfinite event's business
        return {
            ">": value > threshold,
            ">=": value >= threshold,
            "<": value < threshold,
            "<=": value <= threshold,
        }[self.op]

    def check(self, points: Sequence[tuple[float, float]], now: float) -> float | None:
        """The value that makes the rule hold over ``points`` ((time, value) of the
        metric's cross-rank line, in time order) at ``now``; None when it does not."""
        if not points:
            return None
        threshold = self.threshold([v for _, v in points])
        if threshold is None:
            return None
        if self.seconds <= 0:
            last = points[-1][1]
            return last if self.holds(last, threshold) else None
        start = now - self.seconds
        if points[0][0] > start:
            return None  # not that old yet
        recent = [v for t, v in points if t >= start]
        if not recent:
            return None  # nothing logged in the window: the heartbeat event's business
        if all(self.holds(v, threshold) for v in recent):
            return recent[-1]
        return None


def parse_rule(text: str) -> Rule:
    m = _RULE.match(text)
    if m is None:
        raise UsageError(
            f"malformed alert rule {text!r}: write METRIC OP THRESHOLD [for DURATION], "
            "e.g. 'loss > 10', 'gpu_util < 20 for 10m', 'samples_per_s < 0.5*median' "
            "(OP is one of > >= < <=; DURATION in s, m or h)"
        )
    if m["factor"] is not None or m["median"]:
        value, of_median = float(m["factor"] or 1.0), True
    else:
        value, of_median = float(m["value"]), False
    seconds = float(m["dur"]) * _UNITS[m["unit"]] if m["dur"] else 0.0
    if not math.isfinite(value) or seconds < 0:
        raise UsageError(f"alert rule {text!r}: the threshold and duration must be finite")
    return Rule(" ".join(text.split()), m["metric"], m["op"], value, of_median, seconds)


# -- what is sent --------------------------------------------------------------------------


def run_url(public_url: str, project: str, run_id: str) -> str:
    """The run page of the dashboard (``--public-url``; empty: no link)."""
    if not public_url:
        return ""
    return f"{public_url.rstrip('/')}/#/p/{quote(project, safe='')}/r/{quote(run_id, safe='')}"


def message(event: AlertEvent, public_url: str) -> dict[str, Any]:
    """The generic JSON body of a webhook (also what Slack and e-mail are made from)."""
    return {
        "id": event.id,
        "kind": event.kind,
        "level": event.level,
        "project": event.project,
        "run": event.run_id,
        "title": event.title,
        "text": event.text,
        "time": event.time,
        "url": run_url(public_url, event.project, event.run_id),
        "details": event.details,
    }


def slack_body(body: dict[str, Any]) -> dict[str, Any]:
    """Slack's incoming-webhook format: ``text`` (mrkdwn), the link as ``<url|label>``."""
    icon = {"ERROR": ":red_circle:", "WARN": ":warning:"}.get(body["level"], ":information_source:")
    link = f" <{body['url']}|open run>" if body["url"] else ""
    return {
        "text": f"{icon} *{_slack(body['title'])}*{link}\n{_slack(body['text'])}",
        "unrestricted_links": False,
    }


def _slack(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def email_text(body: dict[str, Any]) -> tuple[str, str]:
    """(subject, plain-text body) of an e-mail alert."""
    subject = f"[rankwise {body['level']}] {body['title']}"
    lines = [body["text"], ""]
    if body["url"]:
        lines.append(f"Run: {body['url']}")
    lines.append(
        f"Project {body['project']}, run {body['run']}, event {body['kind']} #{body['id']}"
    )
    return " ".join(subject.split())[:200], "\n".join(lines)
