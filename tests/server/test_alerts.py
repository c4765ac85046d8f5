"""Alerts: rules, checks, decided once, the outbox, SSRF, and what bad input is told.

The store tests run on SQLite and PostgreSQL; deliveries go to real local receivers
(``helpers.receivers``). The end-to-end story (a torchrun job, server SIGKILL, two
servers on one PostgreSQL) is tests/e2e/test_alerts_e2e.py.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from io import StringIO
from pathlib import Path
from typing import Any

import pytest

from rankwise.alert_config import load_alerts_file, make_destination
from rankwise.alerting import Destination, parse_events, parse_rule
from rankwise.cli import main
from rankwise.errors import DeliveryError, UsageError
from rankwise.server.alert_send import post_json, resolve
from rankwise.server.alert_watch import AlertThreads, Deliverer
from rankwise.server.config import AlertSettings
from rankwise.store.sql import SQLStore
from rankwise.stream import records as R
from rankwise.stream.identity import StreamId
from tests.helpers.receivers import SmtpReceiver, WebhookReceiver
from tests.helpers.stores import open_sql_store
from tests.helpers.wait import wait_until

FAST = AlertSettings(
    allow_private_webhooks=True,
    retry_base=0.05,
    retry_max=0.2,
    poll=0.02,
    evaluate_every=0.05,
    send_timeout=5,
)


@pytest.fixture
def hook() -> Iterator[WebhookReceiver]:
    r = WebhookReceiver().start()
    yield r
    r.stop()


def start(rank: int = 0, run: str = "r1") -> R.StreamStart:
    return R.StreamStart(0, 100.0, "p", run, f"rank-{rank}", 0, rank=rank, world_size=2)


def key(rank: int = 0, run: str = "r1") -> StreamId:
    return StreamId("p", run, f"rank-{rank}", 0)


def webhook(url: str, events: str = "nonfinite,alert", project: str = "p") -> Destination:
    return make_destination(
        project=project,
        kind="webhook",
        target=url,
        events=events,
        secret="s3cret",
        allow_private=True,
    )


# -- rules and checks ------------------------------------------------------------------


def test_rules_parse_and_hold() -> None:
    r = parse_rule("loss > 10")
    assert (r.metric, r.op, r.value, r.seconds) == ("loss", ">", 10.0, 0.0)
    assert r.check([(1.0, 5.0), (2.0, 11.0)], now=2.0) == 11.0
    assert r.check([(1.0, 11.0), (2.0, 5.0)], now=2.0) is None
    slow = parse_rule("gpu_util < 20 for 10m")
    assert slow.seconds == 600
    low = [(t, 5.0) for t in range(0, 700, 10)]
    assert slow.check(low, now=690) == 5.0
    assert slow.check(low[:30], now=290) is None  # not ten minutes old yet
    assert slow.check([*low[:-2], (680.0, 50.0), (690.0, 5.0)], now=690) is None
    frac = parse_rule("samples_per_s < 0.5*median")
    assert frac.of_median and frac.value == 0.5
    assert frac.check([(t, 100.0) for t in range(10)] + [(10.0, 40.0)], now=10) == 40.0
    assert frac.check([(t, 100.0) for t in range(10)] + [(10.0, 60.0)], now=10) is None
    assert parse_rule("x >= median").of_median


@pytest.mark.parametrize("bad", ["loss >", "loss = 3", "> 3", "loss > 3 for ever", "loss > ten"])
def test_a_malformed_rule_names_the_grammar(bad: str) -> None:
    with pytest.raises(UsageError, match=r"METRIC OP THRESHOLD \[for DURATION\]"):
        parse_rule(bad)


def test_bad_events_and_urls_name_the_fix() -> None:
    with pytest.raises(UsageError, match="unknown alert event 'crashd': use one or more of"):
        parse_events("failed,crashd")
    assert parse_events("Failed, hang,failed") == ["failed", "hang"]
    for url in ("ftp://example.com/x", "file:///etc/passwd", "hooks.example.com/x"):
        with pytest.raises(UsageError, match="must be an http:// or https:// URL"):
            make_destination(project="p", kind="webhook", target=url, events="failed")
    with pytest.raises(UsageError, match="--on rule needs at least one --rule"):
        make_destination(
            project="p", kind="slack", target="https://x.example", events="rule", resolve=False
        )


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1",
        "10.1.2.3",
        "192.168.0.1",
        "169.254.169.254",
        "::1",
        "::ffff:127.0.0.1",
        "100.64.0.1",
        "0.0.0.0",
        "localhost",
        "2130706433",
    ],
)
def test_webhooks_inside_the_network_are_refused(host: str) -> None:
    with pytest.raises(DeliveryError, match="--allow-private-webhooks"):
        resolve(host, 80, allow_private=False)
    assert resolve(host, 80, allow_private=True)
    with pytest.raises(UsageError, match="--allow-private-webhooks"):
        make_destination(
            project="p",
            kind="webhook",
            target=f"http://{host}:9/x" if ":" not in host else f"http://[{host}]:9/x",
            events="failed",
        )


def test_a_redirect_is_not_followed_nor_its_body_shown() -> None:
    target = WebhookReceiver().start()
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Redirect(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(302)
            self.send_header("Location", target.url + "/stolen")
            self.send_header("Content-Length", "11")
            self.end_headers()
            self.wfile.write(b"secret-body")

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Redirect)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/hook"
        with pytest.raises(DeliveryError, match="redirect \\(302\\), which is not followed") as e:
            post_json(url, b"{}", {}, allow_private=True)
        assert "secret-body" not in str(e.value) and "/hook" not in str(e.value)
        assert target.got == []
    finally:
        server.shutdown()
        server.server_close()
        target.stop()


def test_public_view_of_a_destination_hides_its_secrets() -> None:
    d = Destination(
        id="d1",
        project="p",
        kind="slack",
        events=["failed"],
        target="https://hooks.slack.com/services/T0/B0/XYZ",
        secret="k",
        smtp={"password": "pw"},
    )
    shown = str(d.public())
    assert "XYZ" not in shown and "services" not in shown and "pw" not in shown
    assert "https://hooks.slack.com/" in shown


def test_alerts_file(tmp_path: Path) -> None:
    f = tmp_path / "alerts.toml"
    f.write_text(
        '[[destination]]\nproject = "p"\non = ["failed", "rule"]\nrules = ["loss > 10"]\n'
        'webhook = "http://127.0.0.1:9/h"\n\n[[destination]]\nemail = "a@example.com"\n'
        'smtp = { host = "127.0.0.1", port = 2525 }\n'
    )
    a, b = load_alerts_file(f, allow_private=True)
    assert (a.id, a.kind, a.events, a.rules) == (
        "cfg-1",
        "webhook",
        ["failed", "rule"],
        ["loss > 10"],
    )
    assert (b.id, b.project, b.kind, b.smtp["port"]) == ("cfg-2", "*", "email", 2525)
    f.write_text('[[destination]]\nwebhook = "http://127.0.0.1:9/h"\non = ["oops"]\n')
    with pytest.raises(UsageError, match=r"destination #1: unknown alert event 'oops'"):
        load_alerts_file(f, allow_private=True)


# -- decided once, at ingest and by the evaluator -----------------------------------------


def test_first_nonfinite_and_run_alert_are_decided_once_at_ingest(
    store: SQLStore, hook: WebhookReceiver
) -> None:
    store.add_destination(webhook(hook.url + "/a"))
    store.add_destination(webhook(hook.url + "/b", events="failed", project="*"))  # not these
    nan = float("nan")
    r1 = [
        start(1),
        R.Metrics(1, 101.0, 0, {"loss": 1.0, "acc": 1}),
        R.Metrics(2, 102.0, 1, {"loss": nan, "acc": 2}),
        R.Alert(3, 103.0, "look", "at this", "SHOUT", 0.0),
    ]
    r0 = [start(0), R.Metrics(1, 101.5, 1, {"loss": float("inf"), "acc": 3})]
    store.ingest([(key(1), r1)])
    store.ingest([(key(1), r1), (key(0), r0)])  # a replay, and a second rank's Inf
    store.ingest([(key(0), [*r0, R.Metrics(2, 104.0, 2, {"loss": nan, "acc": 4})])])
    events = store.run_alerts("p", "r1")
    assert sorted((e.kind, e.key) for e in events) == [
        ("alert", "rank-1#0:3"),
        ("nonfinite", "loss"),
    ]
    nonfinite = next(e for e in events if e.kind == "nonfinite")
    assert nonfinite.details == {
        "metric": "loss",
        "label": "rank-1",
        "rank": 1,
        "step": 1,
        "value": "NaN",
    }
    alert = next(e for e in events if e.kind == "alert")
    assert (alert.title, alert.text, alert.level) == ("look", "at this", "INFO")
    assert [len(e.deliveries) for e in events] == [1, 1]
    # Deciding again (another process, the evaluator) makes nothing.
    assert store.decide_event("p", "r1", "nonfinite", "loss", "t", "x") is None
    assert store.decide_event("p", "nope", "failed", "", "t", "x") is None


def test_a_delivery_is_claimed_by_one_process_and_retried_with_back_off(
    store: SQLStore, hook: WebhookReceiver
) -> None:
    store.add_destination(webhook(hook.url + "/a", events="failed"))
    store.ingest([(key(), [start()])])
    assert store.decide_event("p", "r1", "failed", "i0", "boom", "rank 0 failed") is not None
    now = time.time()
    (claim,) = store.claim_deliveries(now, lease=60)
    assert store.claim_deliveries(now, lease=60) == []  # another process: nothing
    assert store.claim_deliveries(now + 61, lease=60) != []  # the lease ended: due again
    hook.status = 500
    deliverer = Deliverer(store, FAST)
    assert deliverer.deliver_due(now + 200) == 1
    (event,) = store.run_alerts("p", "r1")
    (d,) = event.deliveries
    assert d.state == "pending" and d.attempts == 3 and "HTTP 500" in d.last_error
    hook.status = 200
    wait_until(lambda: deliverer.deliver_due(), timeout=10)
    (event,) = store.run_alerts("p", "r1")
    assert event.deliveries[0].state == "delivered"
    assert [r.status for r in hook.got] == [500, 200]
    assert claim.event.title == "boom"


def test_delivery_gives_up_after_give_up_seconds(store: SQLStore) -> None:
    dead = WebhookReceiver()  # never started: connection refused
    store.add_destination(webhook(dead.url, events="failed"))
    store.ingest([(key(), [start()])])
    store.decide_event("p", "r1", "failed", "i0", "boom", "x")
    settings = AlertSettings(allow_private_webhooks=True, retry_base=0.01, give_up=0.05)
    deliverer = Deliverer(store, settings)
    wait_until(lambda: (deliverer.deliver_due() and False) or _state(store) == "failed", timeout=10)
    (event,) = store.run_alerts("p", "r1")
    assert "ConnectionRefusedError" in event.deliveries[0].last_error
    assert store.open_alert_runs("p") == {("p", "r1"): 1}


def _state(store: SQLStore) -> str:
    (event,) = store.run_alerts("p", "r1")
    return event.deliveries[0].state


def test_a_slow_receiver_never_slows_ingest(store: SQLStore) -> None:
    release = threading.Event()
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Slow(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            release.wait(30)
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    store.add_destination(webhook(f"http://127.0.0.1:{server.server_address[1]}/", "nonfinite"))
    threads = AlertThreads(store, FAST).start()
    try:
        nan = float("nan")
        store.ingest([(key(0, "a"), [start(0, "a"), R.Metrics(1, 1.0, 0, {"x": nan})])])
        wait_until(lambda: store.run_alerts("p", "a")[0].deliveries[0].attempts == 1)
        # The deliverer is stuck in the receiver; ingest (and its decisions) goes on.
        for i in range(5):
            run = f"b{i}"
            store.ingest([(key(0, run), [start(0, run), R.Metrics(1, 1.0, 0, {"x": nan})])])
            assert [e.kind for e in store.run_alerts("p", run)] == ["nonfinite"]
        assert not release.is_set()
    finally:
        release.set()
        threads.stop()
        server.shutdown()
        server.server_close()


# -- the CLI -------------------------------------------------------------------------------


def run_cli(*args: str) -> tuple[int, str, str]:
    out, err = StringIO(), StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


def test_cli_add_list_test_remove(tmp_path: Path, hook: WebhookReceiver) -> None:
    db = f"sqlite:///{tmp_path / 's.db'}"
    smtp = SmtpReceiver().start()
    try:
        code, out, _ = run_cli(
            "alert",
            "add",
            "--db",
            db,
            "--project",
            "p",
            "--webhook",
            hook.url + "/secret-path",
            "--allow-private-webhooks",
        )
        assert code == 0 and "for failed, hang, nonfinite, alert in project p" in out
        secret = out.strip().splitlines()[-1]
        dest = out.split("destination ")[1].split(":")[0]
        code, out, _ = run_cli(
            "alert",
            "add",
            "--db",
            db,
            "--project",
            "p",
            "--email",
            "ops@example.com",
            "--smtp-port",
            str(smtp.port),
            "--smtp-host",
            "127.0.0.1",
            "--on",
            "failed",
        )
        assert code == 0
        mail = out.split("destination ")[1].split(":")[0]
        code, out, _ = run_cli("alert", "list", "--db", db)
        assert dest in out and mail in out and "ops@example.com" in out
        assert secret not in out and "secret-path" not in out
        code, out, _ = run_cli("alert", "test", "--db", db, dest, "--allow-private-webhooks")
        assert code == 0 and "test alert delivered" in out
        assert [r.path for r in hook.accepted()] == ["/secret-path"]
        assert hook.got[0].headers["X-Rankwise-Signature"].startswith("sha256=")
        code, out, _ = run_cli("alert", "test", "--db", db, mail)
        assert code == 0 and smtp.messages[0]["To"] == "ops@example.com"
        smtp.stop()
        code, _, err = run_cli("alert", "test", "--db", db, mail)
        assert code == 1 and f"cannot send e-mail through 127.0.0.1:{smtp.port}" in err
        assert "--smtp-host/--smtp-port" in err
        hook.status = 500
        code, _, err = run_cli("alert", "test", "--db", db, dest, "--allow-private-webhooks")
        assert code == 1 and "answered HTTP 500" in err and "secret-path" not in err
        code, _, err = run_cli("alert", "test", "--db", db, dest)  # without the flag
        assert code == 1 and "--allow-private-webhooks" in err
        assert run_cli("alert", "remove", "--db", db, dest)[0] == 0
        code, _, err = run_cli("alert", "remove", "--db", db, dest)
        assert code == 2 and "no alert destination" in err and "rankwise alert list" in err
    finally:
        smtp.stop()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--on", "failed,crashd", "--webhook", "https://x.example/h"], "unknown alert event"),
        (["--rule", "loss >> 3", "--slack", "https://x.example/h"], "malformed alert rule"),
        (["--webhook", "ftp://x.example/h"], "must be an http:// or https:// URL"),
        (["--webhook", "http://127.0.0.1:9/h"], "--allow-private-webhooks"),
        (
            ["--email", "ops@example.com", "--smtp-host", "127.0.0.1", "--smtp-port", "1"],
            "cannot reach the SMTP server 127.0.0.1:1",
        ),
        (["--email", "not-an-address"], "is not an e-mail address"),
    ],
)
def test_cli_add_refuses_bad_input_naming_the_fix(
    tmp_path: Path, args: list[str], says: str
) -> None:
    db = f"sqlite:///{tmp_path / 's.db'}"
    code, _, err = run_cli("alert", "add", "--db", db, "--project", "p", *args)
    assert code == 2 and says in err, err


# -- run.alert() ---------------------------------------------------------------------------


def test_run_alert_records_and_never_raises(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import datetime

    import rankwise
    from rankwise.stream.frames import scan

    run = rankwise.init(project="p", settings={"flush_interval": 0.02})
    run.alert("saved", "step 3", "WARN", datetime.timedelta(seconds=0))
    run.alert("saved", "again at once", "WARN", 0)  # wait 0: recorded too
    run.alert("saved", "inside the default 60 s", "WARN")  # dropped
    run.alert("odd", 42, level="LOUD", wait_duration="soon")
    run.alert("odd2", "x", level="LOUDER", wait_duration=-1)  # warned once already
    run.alert(None, "no title")
    run.alert("", "empty title")
    run.finish()
    run.alert("late", "after finish")
    (stream,) = Path(run.dir, "streams").glob("*.rwlog")
    alerts = [r for r in scan(stream.read_bytes()).records if type(r) is R.Alert]
    assert [(a.title, a.text, a.level) for a in alerts] == [
        ("saved", "step 3", "WARN"),
        ("saved", "again at once", "WARN"),
        ("odd", "42", "INFO"),
        ("odd2", "x", "INFO"),
    ]
    assert alerts[2].wait_duration == 60.0
    warned = capsys.readouterr().err.splitlines()
    assert sum("level=" in w for w in warned) == 1
    assert sum("wait_duration=" in w for w in warned) == 1
    assert sum("non-empty string title" in w for w in warned) == 1
    assert sum("after the run ended" in w for w in warned) == 1


# -- the HTTP API -------------------------------------------------------------------------


def test_destination_routes_are_admin_only_and_never_show_secrets(
    tmp_path: Path, hook: WebhookReceiver
) -> None:
    import dataclasses

    from rankwise.server import ServerSettings, create_app
    from rankwise.store import open_store
    from tests.helpers.servers import bearer, call

    store = open_store(f"sqlite:///{tmp_path / 's.db'}")
    store.migrate()
    settings = ServerSettings(static_dir=tmp_path / "none")
    strict = create_app(store, settings)
    body = {
        "project": "p",
        "kind": "webhook",
        "target": hook.url + "/s3cret-path",
        "events": ["failed"],
        "secret": "hmac-key",
    }
    r = call(strict, "POST", "/api/v1/alerts/destinations", json=body)
    assert r.status_code == 422 and "--allow-private-webhooks" in r.json()["error"]["message"]
    for bad, says in [
        ({"events": ["nope"]}, "Input should be 'failed', 'hang'"),
        ({"target": "gopher://x/"}, "http:// or https://"),
        ({"events": ["rule"], "rules": ["loss >"]}, "malformed alert rule"),
    ]:
        r = call(strict, "POST", "/api/v1/alerts/destinations", json={**body, **bad})
        assert r.status_code == 422 and says in r.json()["error"]["message"], r.text
    app = create_app(
        store,
        dataclasses.replace(settings, alerts=AlertSettings(allow_private_webhooks=True)),
    )
    r = call(app, "POST", "/api/v1/alerts/destinations", json=body)
    assert r.status_code == 200, r.text
    dest = r.json()["id"]
    listed = call(app, "GET", "/api/v1/alerts/destinations")
    assert listed.json()["destinations"][0]["target"] == "http://127.0.0.1/…"
    for reply in (r, listed):
        assert "s3cret-path" not in reply.text and "hmac-key" not in reply.text
    r = call(app, "POST", f"/api/v1/alerts/destinations/{dest}/test")
    assert r.json() == {"ok": True, "error": ""}
    assert [g.path for g in hook.accepted()] == ["/s3cret-path"]
    hook.status = 503
    r = call(app, "POST", f"/api/v1/alerts/destinations/{dest}/test")
    assert r.json()["ok"] is False and "HTTP 503" in r.json()["error"]
    assert "s3cret-path" not in r.text
    reader = bearer(store.create_token("read", None, "r").value)
    for method, url in [
        ("GET", "/api/v1/alerts/destinations"),
        ("POST", f"/api/v1/alerts/destinations/{dest}/test"),
        ("DELETE", f"/api/v1/alerts/destinations/{dest}"),
    ]:
        assert call(app, method, url, headers=reader).status_code == 403
    assert call(app, "DELETE", f"/api/v1/alerts/destinations/{dest}").status_code == 204
    assert call(app, "DELETE", f"/api/v1/alerts/destinations/{dest}").status_code == 404
    assert call(app, "GET", "/api/v1/projects/p/runs/none/alerts").status_code == 404
    store.close()


# -- the evaluator -------------------------------------------------------------------------


def test_evaluator_decides_each_event_once_and_rate_limits_a_straggler(store: SQLStore) -> None:
    from rankwise.server.alert_watch import Evaluator

    store.add_destination(webhook("http://127.0.0.1:9/", "failed,hang,heartbeat,straggler"))
    store.add_destination(
        make_destination(
            project="p",
            kind="slack",
            target="http://127.0.0.1:9/",
            resolve=False,
            events="rule",
            rules=["loss > 10", "loss < 0.5*median"],
        )
    )
    settings = AlertSettings(
        straggler_window=5, straggler_every=4, heartbeat_timeout=3, hang_grace=1
    )
    judge = Evaluator(store, settings)
    # Well inside the store's crash timeout (60 s); aligned so that the second look
    # (base + 12.6) falls in a new straggler_every bucket: only the rate limit holds it.
    base = (time.time() - 30) // 4 * 4 + 1
    seqs = {0: 1, 1: 1}

    def steps(rank: int, t0: float, t1: float, every: float, first: int) -> int:
        recs: list[R.AnyRecord] = [start(rank)] if seqs[rank] == 1 else []
        t, step = t0, first
        while t <= t1:
            recs.append(R.Metrics(seqs[rank], t, step, {"loss": 20.0}))
            seqs[rank] += 1
            t, step = t + every, step + 1
        store.ingest([(key(rank), recs)])
        return step

    def kinds() -> list[tuple[str, str]]:
        return sorted((e.kind, e.key) for e in store.run_alerts("p", "r1"))

    s0 = steps(0, base, base + 10, 0.1, 0)
    s1 = steps(1, base, base + 10, 1.0, 0)
    now = base + 10.5
    assert judge.evaluate(now) == 2
    assert kinds() == [("rule", "loss > 10"), ("straggler", f"rank-1:{int(now // 4)}")]
    assert judge.evaluate(now + 0.1) == 0  # decided already
    # Still slow two seconds later (a new time bucket, maybe): not told again yet.
    s0 = steps(0, base + 10.1, base + 12.5, 0.1, s0)
    s1 = steps(1, base + 11, base + 12.5, 1.0, s1)
    assert judge.evaluate(base + 12.6) == 0
    # Past straggler_every: told again.
    s0 = steps(0, base + 12.6, base + 15, 0.1, s0)
    s1 = steps(1, base + 13, base + 15, 1.0, s1)
    assert judge.evaluate(base + 15.1) == 1
    assert [k for k in kinds() if k[0] == "straggler"][1] == (
        "straggler",
        f"rank-1:{int((base + 15.1) // 4)}",
    )
    # Both silent past the heartbeat timeout: one heartbeat event naming both.
    assert judge.evaluate(base + 18.5) == 1
    (beat,) = [e for e in store.run_alerts("p", "r1") if e.kind == "heartbeat"]
    assert beat.details == {"ranks": ["rank-0", "rank-1"]}
    # A stall, once hang_grace old: the hang names the rank and where it waits.
    stall = R.Stall(seqs[0], base + 19, 2.0, "all_reduce at train.py:88")
    store.ingest([(key(0), [stall])])
    assert judge.evaluate(base + 19.5) == 0  # not hang_grace old yet
    assert judge.evaluate(base + 20.5) == 1
    (hang,) = [e for e in store.run_alerts("p", "r1") if e.kind == "hang"]
    assert "rank 0 waits in all_reduce at train.py:88" in hang.text
    # A rank fails: the failed event carries the first failure.
    store.ingest(
        [(key(1), [R.Finish(seqs[1], base + 21, "failed", 1, None, "RuntimeError", "boom")])]
    )
    assert judge.evaluate(base + 21.5) == 1
    (failed,) = [e for e in store.run_alerts("p", "r1") if e.kind == "failed"]
    assert failed.text == "rank 1 failed: RuntimeError: boom" and failed.key == "i0"
    assert failed.details["label"] == "rank-1"
    # Only the destinations that want an event get it; each rule its own destination's.
    by_kind = {e.kind: len(e.deliveries) for e in store.run_alerts("p", "r1")}
    assert by_kind == {"rule": 1, "straggler": 1, "heartbeat": 1, "hang": 1, "failed": 1}


def test_rankwise_ui_delivers_to_destinations_from_flags_and_a_file(
    tmp_path: Path, hook: WebhookReceiver
) -> None:
    import json
    import subprocess
    import sys

    from tests.helpers.servers import ServerProcess, subprocess_env

    data = tmp_path / "data"
    script = (
        "import rankwise\n"
        "run = rankwise.init(project='local', settings={'flush_interval': 0.02})\n"
        "run.log({'loss': 1.0}, step=0)\n"
        "run.log({'loss': float('nan')}, step=1)\n"
        "run.alert('done', 'all steps logged', 'INFO')\n"
        "run.finish()\n"
    )
    env = subprocess_env(RANKWISE_DIR=str(data))
    subprocess.run([sys.executable, "-c", script], env=env, check=True, timeout=60)
    (tmp_path / "alerts.json").write_text(
        json.dumps({"destinations": [{"slack": hook.url + "/slack", "on": ["nonfinite"]}]})
    )
    ui = ServerProcess(
        [
            "ui",
            "--dir",
            str(data),
            "--alerts",
            str(tmp_path / "alerts.json"),
            "--alert-webhook",
            hook.url + "/hook",
            "--alert-on",
            "nonfinite,alert",
            "--allow-private-webhooks",
            "--public-url",
            "http://me.example:8585",
        ],
        tmp_path / "ui.log",
    )
    with ui:
        wait_until(lambda: len(hook.accepted()) == 3, timeout=30)
    got = sorted((r.path, r.body.get("kind", "slack")) for r in hook.accepted())
    assert got == [("/hook", "alert"), ("/hook", "nonfinite"), ("/slack", "slack")]
    slack = hook.accepted("/slack")[0].body["text"]
    assert "loss is NaN" in slack and "<http://me.example:8585/#/p/local/r/" in slack


def test_two_processes_claiming_at_once_send_each_delivery_once(
    store: SQLStore, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Process A reads the due rows, process B claims them meanwhile, then A tries: the
    compare-and-set on ``next_at`` leaves A nothing (the window every race falls in)."""
    other = open_sql_store(request.node.callspec.params["kind"], tmp_path, request)
    try:
        store.add_destination(webhook("http://127.0.0.1:9/", "failed"))
        for i in range(5):
            store.ingest([(key(0, f"r{i}"), [start(0, f"r{i}")])])
            store.decide_event("p", f"r{i}", "failed", "i0", "boom", "x")
        now = time.time()
        taken: list[int] = []
        real_read = store._read

        def read_then_b_claims(fn: Any) -> Any:
            got = real_read(fn)
            if not taken:
                taken.extend(c.outbox for c in other.claim_deliveries(now, 60, limit=10))
            return got

        store._read = read_then_b_claims  # type: ignore[method-assign]
        assert len(taken) == 0
        assert store.claim_deliveries(now, 60, limit=10) == []
        assert len(taken) == 5
    finally:
        other.close()


def test_the_api_declares_the_event_names_the_store_knows() -> None:
    from typing import get_args

    from rankwise.alerting import EVENTS
    from rankwise.server.routes.alerts import EventName

    assert get_args(EventName) == EVENTS


def test_the_evaluator_judges_only_projects_someone_is_told_about(store: SQLStore) -> None:
    from rankwise.server.alert_watch import Evaluator

    now = time.time()
    store.ingest([(key(), [start(), R.Finish(1, now - 5, "failed", 1, None, "E", "x")])])
    judge = Evaluator(store, AlertSettings())
    assert judge.evaluate(now) == 0 and store.run_alerts("p", "r1") == []
    store.add_destination(webhook("http://127.0.0.1:9/", "failed", project="other"))
    assert judge.evaluate(now) == 0
    store.add_destination(webhook("http://127.0.0.1:9/", "failed", project="*"))
    assert judge.evaluate(now) == 1
    assert [e.kind for e in store.run_alerts("p", "r1")] == ["failed"]


def test_a_failed_send_never_quotes_the_url() -> None:
    for url in ("http://127.0.0.1:9/hooks/T0KEN x", "http://127.0.0.1:9/hooks/T0KEN"):
        with pytest.raises(DeliveryError) as got:
            post_json(url, b"{}", {}, allow_private=True, timeout=5)
        assert "T0KEN" not in str(got.value) and "127.0.0.1" in str(got.value)


def test_a_rule_on_a_system_chart_holds_on_any_one_gpu(store: SQLStore) -> None:
    from rankwise.server.alert_watch import Evaluator

    store.add_destination(
        make_destination(
            project="p",
            kind="slack",
            target="http://127.0.0.1:9/",
            resolve=False,
            events="rule",
            rules=["gpu_util < 20 for 10s"],
        )
    )
    now = time.time()
    recs: list[R.AnyRecord] = [start()]
    for i in range(20):  # GPU 0 busy, GPU 1 idle, one sample a second
        values = {"gpu/0/util_percent": 90, "gpu/1/util_percent": 5, "node/cpu_percent": 50.0}
        recs.append(R.System(len(recs), now - 20 + i, values))
    store.ingest([(key(), recs)])
    judge = Evaluator(store, AlertSettings())
    assert judge.evaluate(now) == 1
    (event,) = store.run_alerts("p", "r1")
    assert event.details["value"] == 5 and "gpu 1" in event.details["where"]
    assert "gpu_util (" in event.text and "gpu 1" in event.text
