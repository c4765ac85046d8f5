"""Alerts in the store: destinations, events decided once, and the outbox (migration 10).

Invariants:

* **Decided once.** ``decide`` inserts ``alert_events`` with a unique ``(run, kind,
  key)`` (``INSERT ... ON CONFLICT DO NOTHING RETURNING id``), and in the same
  transaction one ``alert_outbox`` row per destination that wants the event. Any number
  of server processes (or the ingest of several ranks) may decide the same event: one
  row is made, the others find it there and do nothing. Events found at ingest (the
  first non-finite value, ``run.alert()``) are decided in the transaction of the records
  that carry them, so a replayed upload decides nothing new.
* **Delivered from the outbox.** A delivery is *claimed* by moving its ``next_at`` past
  a lease (``UPDATE ... WHERE id = ? AND next_at = <the value read>``: of two processes
  only one changes the row), then marked delivered, or rescheduled with back-off. A
  process killed between decision and delivery leaves a pending row that any process
  (or the same one restarted) delivers; one killed *during* a send leaves a claimed row
  that comes due again when the lease ends, so a receiver may, in that window only,
  see an event twice: every message carries the event's id for it to drop repeats.
* Secrets (webhook URLs, signing secrets, SMTP passwords) are in ``alert_destinations
  .spec`` only; the read methods used by the API return ``Destination.public()``.
"""

from __future__ import annotations

import json
import math
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from ..alerting import Destination, shown_target
from ..errors import UsageError
from ..wire.alerts import AlertEvent, Delivery
from .sqlbase import SQLBase
from .tx import Tx, marks

_dest_dec = msgspec.json.Decoder(Destination)


def _dest(spec: str | bytes) -> Destination:
    return _dest_dec.decode(spec)


def destinations_of(tx: Tx, project: str) -> list[Destination]:
    """The destinations of ``project`` (and those of every project, ``*``)."""
    rows = tx.all(
        "SELECT spec FROM alert_destinations WHERE project = ? OR project = '*' ORDER BY id",
        (project,),
    )
    return [_dest(r[0]) for r in rows]


def decide(
    tx: Tx,
    run: int,
    kind: str,
    key: str,
    title: str,
    text: str,
    level: str = "ERROR",
    details: dict[str, Any] | None = None,
    at: float | None = None,
) -> int | None:
    """Decide one event of the run whose row id is ``run`` (``at``: when it happened,
    default now): its id when this call made it (and queued its deliveries), None when
    it had been decided already."""
    now = time.time()
    at = now if at is None else at
    row = tx.one(
        "INSERT INTO alert_events (run, kind, key, title, text, level, time, details) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING id",
        (
            run,
            kind,
            key[:500],
            title[:300],
            text[:4000],
            level,
            at,
            json.dumps(details or {}, default=str, allow_nan=False),
        ),
    )
    if row is None:
        return None
    event = int(row[0])
    project = tx.one("SELECT project FROM runs WHERE id = ?", (run,))
    if project is not None:
        for dest in destinations_of(tx, project[0]):
            if dest.wants(kind, key):
                tx.run(
                    "INSERT INTO alert_outbox (event, destination, state, attempts, next_at, "
                    "created, last_error) VALUES (?, ?, 'pending', 0, ?, ?, '') "
                    "ON CONFLICT DO NOTHING",
                    (event, dest.id, now, now),
                )
    return event


@dataclass(frozen=True)
class Claimed:
    """A delivery this process holds until ``lease_until``: send it, then ``settle`` it."""

    outbox: int
    attempts: int  # including this one
    created: float  # when the event was decided
    destination: Destination | None  # None: removed since
    event: AlertEvent


class Alerts(SQLBase):
    """The store's alert methods (mixed into ``SQLStore``)."""

    # -- destinations -------------------------------------------------------------------

    def add_destination(self, dest: Destination) -> Destination:
        """Store a new destination (an id is made when it has none); returns it."""
        if not dest.id:
            dest = msgspec.structs.replace(dest, id="d" + secrets.token_hex(5))
        if not dest.created:
            dest = msgspec.structs.replace(dest, created=time.time())
        spec = msgspec.json.encode(dest).decode()
        self._write(
            lambda tx: tx.run(
                "INSERT INTO alert_destinations (id, project, origin, spec, created) "
                "VALUES (?, ?, ?, ?, ?)",
                (dest.id, dest.project, dest.origin, spec, dest.created),
            )
        )
        return dest

    def list_destinations(self, project: str | None = None) -> list[Destination]:
        """Every destination (with its secrets: for delivery and the CLI's own use; the
        API shows ``public()`` only)."""

        def read(tx: Tx) -> list[Destination]:
            if project is None:
                rows = tx.all("SELECT spec FROM alert_destinations ORDER BY created, id")
            else:
                rows = tx.all(
                    "SELECT spec FROM alert_destinations WHERE project = ? ORDER BY created, id",
                    (project,),
                )
            return [_dest(r[0]) for r in rows]

        return self._read(read)

    def get_destination(self, dest_id: str) -> Destination | None:
        row = self._read(
            lambda tx: tx.one("SELECT spec FROM alert_destinations WHERE id = ?", (dest_id,))
        )
        return None if row is None else _dest(row[0])

    def remove_destination(self, dest_id: str) -> bool:
        """Delete a destination; its pending deliveries are dropped when next claimed."""
        n = self._write(
            lambda tx: tx.run("DELETE FROM alert_destinations WHERE id = ?", (dest_id,))
        )
        return n > 0

    def replace_config_destinations(self, dests: Sequence[Destination]) -> None:
        """``rankwise ui --alerts``: the destinations given at start replace those of
        the previous start (``origin='config'``); those added otherwise stay."""

        def swap(tx: Tx) -> None:
            tx.run("DELETE FROM alert_destinations WHERE origin = 'config'")
            for d in dests:
                d = msgspec.structs.replace(d, origin="config", created=d.created or time.time())
                tx.run(
                    "INSERT INTO alert_destinations (id, project, origin, spec, created) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (d.id, d.project, d.origin, msgspec.json.encode(d).decode(), d.created),
                )

        self._write(swap)

    # -- events ---------------------------------------------------------------------------

    def decide_event(
        self,
        project: str,
        run_id: str,
        kind: str,
        key: str,
        title: str,
        text: str,
        level: str = "ERROR",
        details: dict[str, Any] | None = None,
        at: float | None = None,
    ) -> int | None:
        """``decide`` in a transaction of its own: the hook through which the periodic
        evaluator (``rankwise.server.alert_watch``), and any other judge of a run, raises
        an event."""

        def go(tx: Tx) -> int | None:
            run = tx.one("SELECT id FROM runs WHERE project = ? AND run_id = ?", (project, run_id))
            if run is None:
                return None
            return decide(tx, int(run[0]), kind, key, title, text, level, details, at)

        return self._write(go)

    def alert_candidates(self, since: float) -> list[tuple[str, str]]:
        """(project, run_id) of the runs with a record at or after ``since``."""
        rows = self._read(
            lambda tx: tx.all(
                "SELECT DISTINCT r.project, r.run_id FROM streams s JOIN runs r ON r.id = s.run "
                f"WHERE s.acked_seq >= 0 AND s.last_time >= ?{self.live_runs_sql(tx)} "
                "ORDER BY r.project, r.run_id",
                (since,),
            )
        )
        return [(p, r) for p, r in rows]

    def has_event(self, project: str, run_id: str, kind: str, key: str) -> bool:
        row = self._read(
            lambda tx: tx.one(
                "SELECT 1 FROM alert_events e JOIN runs r ON r.id = e.run "
                "WHERE r.project = ? AND r.run_id = ? AND e.kind = ? AND e.key = ?",
                (project, run_id, kind, key),
            )
        )
        return row is not None

    def last_event_time(self, project: str, run_id: str, kind: str, key_prefix: str) -> float:
        """The time of the run's latest ``kind`` event whose key starts with
        ``key_prefix`` (0: none), for rate limits."""
        row = self._read(
            lambda tx: tx.one(
                "SELECT MAX(e.time) FROM alert_events e JOIN runs r ON r.id = e.run "
                "WHERE r.project = ? AND r.run_id = ? AND e.kind = ? AND e.key LIKE ?",
                (project, run_id, kind, key_prefix.replace("%", "") + "%"),
            )
        )
        return float(row[0]) if row and row[0] is not None else 0.0

    def run_alerts(self, project: str, run_id: str) -> list[AlertEvent]:
        """The run's events, newest first, each with its deliveries."""

        def read(tx: Tx) -> list[AlertEvent]:
            rows = tx.all(
                f"SELECT {_EVENT_COLS} FROM alert_events e JOIN runs r ON r.id = e.run "
                "WHERE r.project = ? AND r.run_id = ? ORDER BY e.time DESC, e.id DESC",
                (project, run_id),
            )
            return _with_deliveries(tx, [_event(r) for r in rows])

        return self._read(read)

    def open_alert_runs(self, project: str | None = None) -> dict[tuple[str, str], int]:
        """Per (project, run_id), how many of its events are not delivered everywhere
        yet, or were given up on (the runs table marks those runs)."""

        def read(tx: Tx) -> dict[tuple[str, str], int]:
            sql = (
                "SELECT r.project, r.run_id, COUNT(DISTINCT e.id) FROM alert_events e "
                "JOIN runs r ON r.id = e.run JOIN alert_outbox o ON o.event = e.id "
                "WHERE o.state <> 'delivered'"
            )
            params: list[Any] = []
            if project is not None:
                sql += " AND r.project = ?"
                params.append(project)
            sql += " GROUP BY r.project, r.run_id"
            return {(p, r): int(n) for p, r, n in tx.all(sql, params)}

        return self._read(read)

    # -- the outbox ---------------------------------------------------------------------

    def claim_deliveries(self, now: float, lease: float, limit: int = 16) -> list[Claimed]:
        """Take up to ``limit`` due deliveries for ``lease`` seconds (see the module
        docstring); each is this process's alone until it settles it or the lease ends."""
        due = self._read(
            lambda tx: tx.all(
                "SELECT id, next_at FROM alert_outbox WHERE state = 'pending' AND next_at <= ? "
                "ORDER BY next_at LIMIT ?",
                (now, limit),
            )
        )
        if not due:
            return []

        def claim(tx: Tx) -> list[Claimed]:
            got = []
            for oid, next_at in due:
                n = tx.run(
                    "UPDATE alert_outbox SET next_at = ?, attempts = attempts + 1 "
                    "WHERE id = ? AND next_at = ? AND state = 'pending'",
                    (now + lease, oid, next_at),
                )
                if n:
                    got.append(int(oid))
            if not got:
                return []
            rows = tx.all(
                f"SELECT o.id, o.attempts, o.created, o.destination, {_EVENT_COLS} "
                "FROM alert_outbox o JOIN alert_events e ON e.id = o.event "
                f"JOIN runs r ON r.id = e.run WHERE o.id IN ({marks(len(got))})",
                got,
            )
            specs = {
                d: _dest(s)
                for d, s in tx.all(
                    f"SELECT id, spec FROM alert_destinations WHERE id IN ({marks(len(rows))})",
                    [r[3] for r in rows],
                )
            }
            return [
                Claimed(int(r[0]), int(r[1]), float(r[2]), specs.get(r[3]), _event(r[4:]))
                for r in rows
            ]

        return self._write(claim)

    def settle_delivery(
        self, outbox: int, *, delivered: bool, error: str = "", retry_at: float | None = None
    ) -> None:
        """After a send: delivered, or failed with ``error`` and retried at ``retry_at``
        (None: given up)."""
        now = time.time()
        params: tuple[Any, ...]
        if delivered:
            sql, params = (
                "UPDATE alert_outbox SET state = 'delivered', delivered = ?, last_error = '' "
                "WHERE id = ?",
                (now, outbox),
            )
        elif retry_at is not None and math.isfinite(retry_at):
            sql, params = (
                "UPDATE alert_outbox SET next_at = ?, last_error = ? WHERE id = ?",
                (retry_at, error[:300], outbox),
            )
        else:
            sql, params = (
                "UPDATE alert_outbox SET state = 'failed', last_error = ? WHERE id = ?",
                (error[:300], outbox),
            )
        self._write(lambda tx: tx.run(sql, params))


_EVENT_COLS = (
    "e.id, r.project, r.run_id, e.kind, e.key, e.title, e.text, e.level, e.time, e.details"
)


def _event(row: Sequence[Any]) -> AlertEvent:
    eid, project, run_id, kind, key, title, text, level, t, details = row
    return AlertEvent(
        id=int(eid),
        project=project,
        run_id=run_id,
        kind=kind,
        key=key,
        title=title,
        text=text,
        level=level,
        time=float(t),
        details=json.loads(details) if details else {},
    )


def _with_deliveries(tx: Tx, events: list[AlertEvent]) -> list[AlertEvent]:
    if not events:
        return events
    by_id = {e.id: e for e in events}
    ids = list(by_id)
    for a in range(0, len(ids), 500):
        part = ids[a : a + 500]
        for eid, dest, state, attempts, err, delivered, spec in tx.all(
            "SELECT o.event, o.destination, o.state, o.attempts, o.last_error, o.delivered, "
            "d.spec FROM alert_outbox o LEFT JOIN alert_destinations d ON d.id = o.destination "
            f"WHERE o.event IN ({marks(len(part))}) ORDER BY o.id",
            part,
        ):
            d = _dest(spec) if spec else None
            by_id[int(eid)].deliveries.append(
                Delivery(
                    destination=dest,
                    kind=d.kind if d else "removed",
                    target=shown_target(d.kind, d.target) if d else "",
                    state=state,
                    attempts=int(attempts),
                    last_error=err or "",
                    delivered=None if delivered is None else float(delivered),
                )
            )
    return events


def check_destination_id(dest_id: str) -> str:
    if not dest_id or len(dest_id) > 40 or not dest_id.replace("-", "").isalnum():
        raise UsageError(f"{dest_id!r} is not a destination id: see `rankwise alert list`")
    return dest_id
