"""Alerts over HTTP: a run's events (read), and the destinations (admin only).

A destination's secrets (webhook URL, signing secret, SMTP password) go in through
``POST`` and never come out: every reply carries ``Destination.public()``. A new
destination is checked as ``rankwise alert add`` checks it (events, rules, URL scheme,
the SSRF rule of this server).
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field
from starlette.responses import Response

from ...alerting import Destination, message
from ...errors import DeliveryError, UsageError
from ...store.alerts import check_destination_id
from ...wire.alerts import AlertEvent, AlertsReply, DeliveryTest, DestinationInfo, DestinationsReply
from ..alert_send import send
from ..config import ServerSettings
from ..encoding import ApiError, reply
from .deps import answers
from .deps import store as _store

router = APIRouter(tags=["alerts"])
admin_router = APIRouter(tags=["alerts"])
EventName = Literal["failed", "hang", "nonfinite", "heartbeat", "straggler", "rule", "alert"]


class NewDestination(BaseModel):
    """A destination as the admin page adds it."""

    project: str = Field(max_length=128, description="a project, or '*' for every project")
    kind: Literal["webhook", "slack", "email"]
    target: str = Field(max_length=2000, description="the URL, or the e-mail address")
    events: list[EventName] = Field(min_length=1, description="what it is told of")
    rules: list[str] = Field(default_factory=list, max_length=50, description="'loss > 10'")
    secret: str = Field("", max_length=500, description="a webhook's HMAC key (never shown)")
    smtp: dict[str, Any] = Field(default_factory=dict, description="host, port, user, ...")
    name: str = Field("", max_length=200)


def _settings(request: Request) -> ServerSettings:
    settings: ServerSettings = request.app.state.settings
    return settings


@router.get(
    "/projects/{project}/runs/{run}/alerts",
    response_model=None,
    responses=answers(AlertsReply, 404),
)
def run_alerts(request: Request, project: str, run: str) -> Response:
    """The alert events the run raised, each with its deliveries' state."""
    store = _store(request)
    if store.get_run(project, run) is None:
        raise ApiError(404, f"no run {run!r} in project {project!r}")
    events: list[AlertEvent] = store.run_alerts(project, run)
    return reply(request, AlertsReply(alerts=events))


@admin_router.get("/alerts/destinations", response_model=None, responses=answers(DestinationsReply))
def list_destinations(request: Request) -> Response:
    """Every alert destination, without its secrets."""
    dests: list[Destination] = _store(request).list_destinations()
    return reply(request, DestinationsReply(destinations=[d.public() for d in dests]))


@admin_router.post(
    "/alerts/destinations", response_model=None, responses=answers(DestinationInfo, 422)
)
def add_destination(request: Request, body: NewDestination) -> Response:
    """Add a destination (checked as ``rankwise alert add`` checks it)."""
    from ...alert_config import make_destination

    alerts = _settings(request).alerts
    try:
        dest = make_destination(
            project=body.project,
            kind=body.kind,
            target=body.target,
            events=body.events,
            rules=body.rules,
            secret=body.secret,
            smtp=body.smtp,
            name=body.name,
            origin="api",
            allow_private=alerts.allow_private_webhooks,
        )
    except UsageError as exc:
        raise ApiError(422, str(exc)) from None
    made = _store(request).add_destination(dest)
    return reply(request, made.public())


@admin_router.delete("/alerts/destinations/{dest}", status_code=204, responses=answers(None, 404))
def remove_destination(request: Request, dest: str) -> Response:
    """Remove a destination; its undelivered alerts are dropped."""
    try:
        check_destination_id(dest)
    except UsageError as exc:
        raise ApiError(404, str(exc)) from None
    if not _store(request).remove_destination(dest):
        raise ApiError(404, f"no alert destination {dest!r}")
    return Response(status_code=204)


@admin_router.post(
    "/alerts/destinations/{dest}/test", response_model=None, responses=answers(DeliveryTest, 404)
)
def test_destination(request: Request, dest: str) -> Response:
    """Send a test alert now; ``ok`` false with ``error`` (why, never a secret)."""
    try:
        check_destination_id(dest)
    except UsageError as exc:
        raise ApiError(404, str(exc)) from None
    found = _store(request).get_destination(dest)
    if found is None:
        raise ApiError(404, f"no alert destination {dest!r}")
    alerts = _settings(request).alerts
    try:
        send(
            found,
            test_message(found.project, alerts.public_url),
            timeout=alerts.send_timeout,
            allow_private=alerts.allow_private_webhooks,
        )
    except DeliveryError as exc:
        return reply(request, DeliveryTest(ok=False, error=str(exc)))
    return reply(request, DeliveryTest(ok=True, error=""))


def test_message(project: str, public_url: str) -> dict[str, Any]:
    event = AlertEvent(
        id=0,
        project=project,
        run_id="test",
        kind="test",
        key="",
        level="INFO",
        title="rankwise test alert",
        text="This destination receives rankwise alerts.",
        time=0.0,
    )
    import time

    body = message(event, public_url)
    body["time"] = time.time()
    body["url"] = public_url
    return body
