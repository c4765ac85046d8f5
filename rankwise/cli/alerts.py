"""``rankwise alert add|list|remove|test --db URL``: who is told of which run events.

Like ``rankwise token``, these open the server's database directly (no server needs to
run; running servers pick a new destination up at their next event). A webhook's
signing secret, when rankwise makes one, is printed once at ``add``; URLs' paths and
passwords are never printed again (``list`` shows the scheme and host).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import smtplib
import sys
from typing import Any

import msgspec

from ..alerting import EVENTS, Destination
from ..errors import DeliveryError, UsageError
from ._format import table
from .tokens import open_db


def add_alert_commands(sub: Any) -> None:
    p = sub.add_parser("alert", help="tell people of failed, hung or diverging runs")
    asub = p.add_subparsers(dest="alert_command", required=True)
    a = asub.add_parser("add", help="send a project's alert events to a webhook, Slack or e-mail")
    _db(a)
    a.add_argument("--project", required=True, help="the project ('*': every project)")
    a.add_argument(
        "--on",
        default="failed,hang,nonfinite,alert",
        help=f"comma-separated events: {', '.join(EVENTS)} (default failed,hang,nonfinite,alert)",
    )
    where = a.add_mutually_exclusive_group(required=True)
    where.add_argument("--webhook", metavar="URL", help="POST signed JSON to this URL")
    where.add_argument("--slack", metavar="URL", help="a Slack incoming-webhook URL")
    where.add_argument("--email", metavar="ADDRESS", help="e-mail this address (SMTP)")
    a.add_argument(
        "--rule",
        action="append",
        default=[],
        metavar="RULE",
        help="a metric rule, e.g. 'loss > 10', 'gpu_util < 20 for 10m', "
        "'samples_per_s < 0.5*median' (repeatable; implies --on rule)",
    )
    a.add_argument(
        "--secret", default="", help="the webhook's HMAC key (default: made, shown once)"
    )
    a.add_argument("--name", default="", help="what it is for, shown by list")
    a.add_argument("--smtp-host", default="localhost", help="SMTP server (default localhost)")
    a.add_argument("--smtp-port", type=int, default=25, help="SMTP port (default 25)")
    a.add_argument("--smtp-tls", default="none", choices=("none", "starttls", "ssl"))
    a.add_argument("--smtp-user", default="", help="SMTP login name")
    a.add_argument(
        "--smtp-password-env",
        default="",
        metavar="VAR",
        help="the environment variable holding the SMTP password",
    )
    a.add_argument("--smtp-from", default="", metavar="ADDRESS", help="the sender address")
    _private(a)
    a.set_defaults(func=cmd_alert_add)
    ls = asub.add_parser("list", help="list alert destinations (never their secrets)")
    _db(ls)
    ls.add_argument("--project", default=None, help="only this project's")
    ls.add_argument("--json", action="store_true", help="JSON lines instead of a table")
    ls.set_defaults(func=cmd_alert_list)
    r = asub.add_parser("remove", help="remove a destination")
    _db(r)
    r.add_argument("id", help="the destination's id (see list)")
    r.set_defaults(func=cmd_alert_remove)
    t = asub.add_parser("test", help="send a test alert to a destination now")
    _db(t)
    t.add_argument("id", help="the destination's id (see list)")
    t.add_argument("--public-url", default="", help="the dashboard's address, for the link")
    _private(t)
    t.set_defaults(func=cmd_alert_test)


def _db(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", required=True, help="sqlite:///PATH or postgresql://USER@HOST/DB")


def _private(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--allow-private-webhooks",
        action="store_true",
        help="allow webhooks to loopback, link-local and private addresses",
    )


def check_smtp(smtp: dict[str, Any], timeout: float = 10.0) -> None:
    """Connect to the SMTP server and say hello: an unreachable one is refused at add."""
    host, port = smtp["host"], smtp["port"]
    try:
        cls = smtplib.SMTP_SSL if smtp.get("tls") == "ssl" else smtplib.SMTP
        with cls(host, port, timeout=timeout) as client:
            client.ehlo_or_helo_if_needed()
    except (OSError, smtplib.SMTPException) as exc:
        raise UsageError(
            f"cannot reach the SMTP server {host}:{port} ({type(exc).__name__}: "
            f"{str(exc)[:120]}): give the right --smtp-host/--smtp-port, or start it first"
        ) from None


def cmd_alert_add(args: argparse.Namespace) -> int:
    from ..alert_config import make_destination

    kind = "webhook" if args.webhook else "slack" if args.slack else "email"
    smtp = {}
    if kind == "email":
        smtp = {
            "host": args.smtp_host,
            "port": args.smtp_port,
            "tls": args.smtp_tls,
            "user": args.smtp_user,
            "sender": args.smtp_from,
            "password_env": args.smtp_password_env,
        }
    made_secret = kind == "webhook" and not args.secret
    dest = make_destination(
        project=args.project,
        kind=kind,
        target=args.webhook or args.slack or args.email,
        events=args.on,
        rules=args.rule,
        secret=args.secret,
        smtp=smtp,
        name=args.name,
        allow_private=args.allow_private_webhooks,
    )
    if kind == "email":
        check_smtp(dest.smtp)
    with open_db(args.db) as store:
        dest = store.add_destination(dest)
    shown = dest.public()
    print(
        f"rankwise: added alert destination {dest.id}: {kind} {shown.target} for "
        f"{', '.join(dest.events)} in project {dest.project}"
    )
    if made_secret:
        print("the webhook's signing secret (X-Rankwise-Signature); it is shown only now:")
        print(dest.secret)
    return 0


def cmd_alert_list(args: argparse.Namespace) -> int:
    with open_db(args.db) as store:
        dests: list[Destination] = store.list_destinations(args.project)
    if args.json:
        for d in dests:
            print(json.dumps(msgspec.to_builtins(d.public())))
        return 0
    rows = [
        [
            d.id,
            d.project,
            d.kind,
            d.public().target,
            ",".join(d.events),
            "; ".join(d.rules) or "-",
            d.name or "-",
        ]
        for d in dests
    ]
    print(table(rows, ["id", "project", "kind", "target", "on", "rules", "name"]))
    return 0


def cmd_alert_remove(args: argparse.Namespace) -> int:
    from ..store.alerts import check_destination_id

    with open_db(args.db) as store:
        if not store.remove_destination(check_destination_id(args.id)):
            raise UsageError(f"no alert destination {args.id!r}: see rankwise alert list")
    print(f"rankwise: removed alert destination {args.id}")
    return 0


def cmd_alert_test(args: argparse.Namespace) -> int:
    from ..server.alert_send import send
    from ..server.routes.alerts import test_message
    from ..store.alerts import check_destination_id

    with open_db(args.db) as store:
        dest = store.get_destination(check_destination_id(args.id))
    if dest is None:
        raise UsageError(f"no alert destination {args.id!r}: see rankwise alert list")
    try:
        send(
            dest,
            test_message(dest.project, args.public_url),
            allow_private=args.allow_private_webhooks,
        )
    except DeliveryError as exc:
        print(f"rankwise: error: the test alert was not delivered: {exc}", file=sys.stderr)
        return 1
    print(f"rankwise: test alert delivered to {dest.id} ({dest.kind} {dest.public().target})")
    return 0


# -- the alert flags of `rankwise ui` and `rankwise server` -------------------------------


def add_serve_flags(p: argparse.ArgumentParser, ui: bool) -> None:
    p.add_argument(
        "--public-url",
        default="",
        metavar="URL",
        help="the dashboard's address as people reach it: alerts link to runs there",
    )
    _private(p)
    p.add_argument(
        "--alert-setting",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="tune alert timing (repeatable), e.g. retry_base=5, retry_max=600, "
        "give_up=3600, heartbeat_timeout=45, straggler_window=300, "
        "hang_grace=10, evaluate_every=10 (seconds; see docs/alerts.md)",
    )
    if ui:
        p.add_argument(
            "--alerts",
            default=None,
            metavar="FILE",
            help="alert destinations from a JSON or TOML file (see docs/alerts.md)",
        )
        p.add_argument(
            "--alert-webhook",
            action="append",
            default=[],
            metavar="URL",
            help="send alert events to this webhook (repeatable)",
        )
        p.add_argument(
            "--alert-slack",
            action="append",
            default=[],
            metavar="URL",
            help="send alert events to this Slack incoming webhook (repeatable)",
        )
        p.add_argument(
            "--alert-on",
            default="failed,hang,nonfinite,alert",
            metavar="EVENTS",
            help="the events --alert-webhook/--alert-slack get (comma-separated)",
        )


def alert_settings(args: argparse.Namespace) -> Any:
    from ..alerting import check_url
    from ..server.config import AlertSettings

    if args.public_url:
        check_url(args.public_url, "--public-url")
    tuned: dict[str, float] = {}
    known = [f.name for f in dataclasses.fields(AlertSettings) if f.type in ("float", float)]
    for item in args.alert_setting:
        name, sep, value = item.partition("=")
        name = name.strip().replace("-", "_")
        if not sep or name not in known:
            raise UsageError(
                f"--alert-setting {item!r}: write NAME=SECONDS with NAME one of {', '.join(known)}"
            )
        try:
            tuned[name] = float(value)
        except ValueError:
            tuned[name] = -1.0
        if not 0 < tuned[name] < float("inf"):
            raise UsageError(f"--alert-setting {item!r}: the value must be a number of seconds > 0")
    return AlertSettings(
        public_url=args.public_url,
        allow_private_webhooks=args.allow_private_webhooks,
        **tuned,  # type: ignore[arg-type]
    )


def ui_destinations(args: argparse.Namespace) -> list[Destination]:
    """`rankwise ui --alerts FILE --alert-webhook URL ...`: the destinations to install."""
    from pathlib import Path

    from ..alert_config import load_alerts_file, make_destination

    allow = args.allow_private_webhooks
    out = load_alerts_file(Path(args.alerts), allow) if args.alerts else []
    flags = [("webhook", u) for u in args.alert_webhook] + [("slack", u) for u in args.alert_slack]
    for i, (kind, url) in enumerate(flags):
        d = make_destination(
            project="*",
            kind=kind,
            target=url,
            events=args.alert_on,
            origin="config",
            allow_private=allow,
        )
        out.append(
            Destination(**{f: getattr(d, f) for f in d.__struct_fields__} | {"id": f"flag-{i + 1}"})
        )
    return out
