"""Alerts as the server sends them: a run's decided events with their deliveries, the
destinations (never a secret: ``rankwise.alerting.Destination.public``) and a test
delivery's outcome (``/api/v1/.../alerts``, ``/api/v1/alerts/destinations``).

``rankwise.alerting`` decides and formats events; the store keeps them
(``rankwise.store.alerts``); these are what its reads return and the routes encode.
"""

from __future__ import annotations

from typing import Any

import msgspec


class DestinationInfo(msgspec.Struct, kw_only=True):
    """A destination as the API and the CLI show it (``Destination.public``)."""

    id: str
    project: str
    kind: str
    events: list[str]
    rules: list[str]
    target: str  # a webhook as scheme://host/… (shown_target)
    name: str
    created: float
    origin: str
    smtp_host: str  # host:port of an e-mail destination's SMTP server ("" otherwise)


class Delivery(msgspec.Struct, kw_only=True):
    """One event's delivery to one destination, as the run page shows it."""

    destination: str  # the destination's id
    kind: str
    target: str  # shown_target()
    state: str  # pending | delivered | failed (gave up)
    attempts: int
    last_error: str = ""
    delivered: float | None = None


class AlertEvent(msgspec.Struct, kw_only=True):
    """One decided event of a run and its deliveries."""

    id: int
    project: str
    run_id: str
    kind: str
    key: str
    title: str
    text: str
    level: str
    time: float
    details: dict[str, Any] = {}
    deliveries: list[Delivery] = []

    @property
    def open(self) -> bool:
        """Still being delivered somewhere, or given up on: worth a look."""
        return any(d.state != "delivered" for d in self.deliveries)


class AlertsReply(msgspec.Struct, kw_only=True):
    alerts: list[AlertEvent]  # the run's events, newest first, with their deliveries


class DestinationsReply(msgspec.Struct, kw_only=True):
    destinations: list[DestinationInfo]  # never a secret (Destination.public)


class DeliveryTest(msgspec.Struct, kw_only=True):
    ok: bool
    error: str  # why it failed (the host and the status or error; never a secret)
