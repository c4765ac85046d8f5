"""Alerts end to end: every event reaches a real webhook, Slack hook and SMTP server once.

A real torchrun job (``scripts/alert_job.py``, two CPU processes) uploads to real
``rankwise server`` processes and raises every event kind: failed (a SIGKILLed rank),
hang (a stall), nonfinite (a NaN), heartbeat (the killed rank's silence), straggler (a
rank ten times slower), rule (``loss > 10``) and ``run.alert()``. While the events are
decided the receivers fail: the webhook answers 500, the SMTP server is down. Then the
server is SIGKILLed (its deliveries decided, not delivered), the receivers come back and
the server is started again. Each event must then reach each receiver exactly once.

``sqlite``: one server, killed and restarted. ``postgres``: two server processes on one
database, both judging and delivering; one is killed and restarted.
"""

from __future__ import annotations

import hashlib
import hmac
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import redirect_stdout
from io import StringIO
from pathlib import Path
from typing import Any

import pytest

from rankwise.cli import main
from rankwise.store import open_store
from rankwise.store.base import RunQuery
from tests.helpers.receivers import SmtpReceiver, WebhookReceiver
from tests.helpers.runs import FAST_ENV
from tests.helpers.servers import ServerProcess, postgres_dsn, subprocess_env
from tests.helpers.wait import wait_until

SCRIPT = Path(__file__).parents[1] / "scripts" / "alert_job.py"
KINDS = {"failed", "hang", "nonfinite", "heartbeat", "straggler", "rule", "alert"}
PUBLIC = "http://dash.example.com"
TUNED = {
    "retry_base": 0.2,
    "retry_max": 1,
    "evaluate_every": 0.3,
    "poll": 0.1,
    "hang_grace": 0.5,
    "heartbeat_timeout": 5,
    "straggler_window": 2,
}
FLAGS = [
    "--allow-private-webhooks",
    "--crash-timeout",
    "3",
    "--public-url",
    PUBLIC,
    *[a for k, v in TUNED.items() for a in ("--alert-setting", f"{k}={v}")],
]

pytestmark = pytest.mark.torchrun


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'store.db'}"
    else:
        yield from postgres_dsn()


def cli(*args: str) -> str:
    out = StringIO()
    with redirect_stdout(out):
        assert main(list(args)) == 0
    return out.getvalue()


def deliveries(url: str) -> tuple[str, list[Any]]:
    with open_store(url) as store:
        runs, _ = store.list_runs(RunQuery(project="alerts"))
        if not runs:
            return "", []
        return runs[0].id, store.run_alerts("alerts", runs[0].id)


def test_each_event_reaches_each_receiver_once_through_a_kill(db: str, tmp_path: Path) -> None:
    hook = WebhookReceiver(status=500).start()  # failing until the server was killed
    smtp = SmtpReceiver().start()  # up for `alert add`'s check, then down
    all_kinds = ",".join(sorted(KINDS))
    added = cli(
        "alert",
        "add",
        "--db",
        db,
        "--project",
        "alerts",
        "--on",
        all_kinds,
        "--webhook",
        hook.url + "/generic",
        "--rule",
        "loss > 10",
        "--allow-private-webhooks",
    )
    secret = added.strip().splitlines()[-1]
    cli(
        "alert",
        "add",
        "--db",
        db,
        "--project",
        "*",
        "--on",
        all_kinds,
        "--slack",
        hook.url + "/slack",
        "--rule",
        "loss > 10",
        "--allow-private-webhooks",
    )
    cli(
        "alert",
        "add",
        "--db",
        db,
        "--project",
        "alerts",
        "--on",
        all_kinds,
        "--email",
        "oncall@example.com",
        "--smtp-host",
        "127.0.0.1",
        "--smtp-port",
        str(smtp.port),
        "--rule",
        "loss > 10",
    )
    smtp.stop()
    listed = cli("alert", "list", "--db", db)
    assert secret not in listed and "/generic" not in listed and "/slack" not in listed

    n = 2 if db.startswith("postgres") else 1
    servers = [ServerProcess.db(db, tmp_path / "server0.log", *FLAGS)]
    servers += [
        ServerProcess(
            ["server", "--db", db, *FLAGS], tmp_path / f"server{i}.log", token=servers[0].token
        )
        for i in range(1, n)
    ]
    try:
        for s in servers:
            s.start()
        env = subprocess_env(**FAST_ENV, RANKWISE_SERVER=servers[0].url, OMP_NUM_THREADS="1")
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "torch.distributed.run",
                "--standalone",
                "--nproc-per-node=2",
                str(SCRIPT),
                str(tmp_path / "data"),
            ],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode != 0, "rank 0 SIGKILLed itself: the job must fail"

        seen: dict[str, Any] = {}

        def decided() -> Any:
            run_id, events = deliveries(db)
            kinds = {e.kind for e in events}
            tried = all(d.attempts >= 1 for e in events for d in e.deliveries)
            seen.update(missing=sorted(KINDS - kinds), untried=sorted(
                e.kind for e in events if any(d.attempts < 1 for d in e.deliveries)
            ))  # fmt: skip
            return (run_id, events) if kinds >= KINDS and tried else None

        try:
            run_id, events = wait_until(decided, timeout=120, every=0.3)  # loaded: minutes
        except BaseException:  # say which kinds never came, and the job's and servers' logs
            print(f"events: {seen}\njob stderr: {proc.stderr[-3000:]}")
            for s in servers:
                print(f"{s.log}: {s.log.read_text()[-3000:]}")
            raise
        # Decided, tried, and delivered nowhere: the receivers were failing.
        assert all(len(e.deliveries) == 3 for e in events)
        assert all(d.state == "pending" for e in events for d in e.deliveries)
        assert hook.got and not hook.accepted()
        runs = servers[-1].get("/api/v1/projects/alerts/runs", timeout=10).json()
        assert runs["open_alerts"][run_id] >= len(KINDS)

        servers[0].kill()  # between decision and delivery
        hook.status = 200
        smtp.start()
        servers[0].start()

        def delivered() -> Any:
            _, evs = deliveries(db)
            return evs if all(d.state == "delivered" for e in evs for d in e.deliveries) else None

        events = wait_until(delivered, timeout=120, every=0.3)
        time.sleep(3 * TUNED["evaluate_every"] + 1)  # more passes: nothing is sent again
        events = deliveries(db)[1]
        ids = {e.id for e in events}
        # Each event once per receiver; each kind and key once.
        assert len({(e.kind, e.key) for e in events}) == len(events)
        for path in ("/generic", "/slack"):
            got = Counter(int(r.headers["X-Rankwise-Event"]) for r in hook.accepted(path))
            assert set(got) == ids and set(got.values()) == {1}, (path, got)
        mailed = Counter(_event_id(m) for m in smtp.messages)
        assert set(mailed) == ids and set(mailed.values()) == {1}, mailed

        by_kind = {r.body["kind"]: r for r in hook.accepted("/generic")}
        assert set(by_kind) >= KINDS
        page = f"{PUBLIC}/#/p/alerts/r/{run_id}"
        for r in hook.accepted("/generic"):
            body = r.body
            assert body["url"] == page and body["run"] == run_id
            mac = hmac.new(
                secret.encode(),
                r.headers["X-Rankwise-Timestamp"].encode() + b"." + r.raw,
                hashlib.sha256,
            ).hexdigest()
            assert r.headers["X-Rankwise-Signature"] == "sha256=" + mac
        nan = by_kind["nonfinite"].body
        assert nan["details"]["rank"] == 1 and nan["details"]["value"] == "NaN"
        assert nan["details"]["metric"] == "loss"
        assert by_kind["alert"].body["title"].endswith("checkpoint written")
        assert by_kind["alert"].body["level"] == "WARN"
        assert sum(e.kind == "alert" for e in events) == 1  # the second call was dropped
        assert "rank 0 crashed" in by_kind["failed"].body["text"]
        assert "rank 1" in by_kind["hang"].body["text"]
        # rank 1 stepped ten times slower than rank 0; rank 0, once SIGKILLed and before
        # it is declared crashed, may be named slow as well (its steps stopped)
        slow = {
            r.body["details"]["rank"]
            for r in hook.accepted("/generic")
            if r.body["kind"] == "straggler"
        }
        assert 1 in slow, slow
        assert by_kind["rule"].body["details"]["rule"] == "loss > 10"
        assert "rank-0" in by_kind["heartbeat"].body["details"]["ranks"]
        for r in hook.accepted("/slack"):
            assert f"<{page}|open run>" in r.body["text"]
        assert any(page in m.get_payload() for m in smtp.messages)

        # The run page's alerts: all delivered, no secret; the runs table: none open.
        reply = servers[-1].get(f"/api/v1/projects/alerts/runs/{run_id}/alerts", timeout=10)
        assert reply.status_code == 200
        assert secret not in reply.text and "/generic" not in reply.text
        states = {d["state"] for a in reply.json()["alerts"] for d in a["deliveries"]}
        assert states == {"delivered"}
        runs = servers[-1].get("/api/v1/projects/alerts/runs", timeout=10).json()
        assert runs["open_alerts"] == {}
        logs = "".join((tmp_path / f"server{i}.log").read_text() for i in range(n))
        assert secret not in logs and "/generic" not in logs and "/slack" not in logs
    finally:
        for s in servers:
            s.stop()
        hook.stop()
        smtp.stop()


def _event_id(message: Any) -> int:
    """The event id an alert e-mail names ("... event KIND #ID")."""
    text = message.get_payload()
    return int(text.rsplit("#", 1)[1].split()[0])
