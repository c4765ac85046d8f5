"""Making alert destinations from what people type: ``rankwise alert add``, the admin
API, and ``rankwise ui --alerts FILE`` / ``--alert-*`` flags.

Every way in goes through ``make_destination``, so each refuses the same things with the
same words: an unknown event, a malformed rule, a URL that is not http(s), a webhook
host that resolves inside the network (unless private webhooks are allowed), an e-mail
address that is not one. An alerts file is JSON or TOML (by its suffix)::

    [[destination]]
    project = "vision"            # or "*" for every project
    on = ["failed", "hang", "nonfinite"]
    webhook = "https://hooks.example.com/rankwise"   # or slack = "...", email = "..."
    secret = "..."                # a webhook's HMAC key (optional)
    rules = ["loss > 10"]
    smtp = { host = "mail.example.com", port = 587, tls = "starttls", user = "...",
             password_env = "SMTP_PASSWORD", sender = "rankwise@example.com" }
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from . import names
from .alerting import KINDS, Destination, check_email, check_url, parse_events, parse_rule
from .errors import DeliveryError, UsageError

_SMTP_KEYS = ("host", "port", "user", "password", "password_env", "sender", "tls")


def make_destination(
    *,
    project: str,
    kind: str,
    target: str,
    events: Sequence[str] | str,
    rules: Sequence[str] = (),
    secret: str = "",
    smtp: dict[str, Any] | None = None,
    name: str = "",
    origin: str = "cli",
    allow_private: bool = False,
    resolve: bool = True,
) -> Destination:
    """A checked ``Destination`` (see the module docstring); ``resolve=False`` skips the
    DNS look-up of a webhook host (the server checks again before every send)."""
    if project != "*":
        names.check_id(project, "project")
    if kind not in KINDS:
        raise UsageError(f"alert destination kind {kind!r}: use webhook, slack or email")
    wanted = parse_events(events)
    checked_rules = [parse_rule(r).text for r in rules]
    if checked_rules and "rule" not in wanted:
        wanted.append("rule")
    if "rule" in wanted and not checked_rules:
        raise UsageError("--on rule needs at least one --rule 'METRIC OP THRESHOLD'")
    conf: dict[str, Any] = {}
    if kind == "email":
        check_email(target)
        conf = _smtp(smtp or {})
    else:
        check_url(target, f"--{kind}")
        if resolve:
            from .server.alert_send import resolve as resolve_host

            parts = urlsplit(target)
            port = parts.port or (443 if parts.scheme == "https" else 80)
            try:
                resolve_host(parts.hostname or "", port, allow_private)
            except DeliveryError as exc:
                raise UsageError(str(exc)) from None
        if kind == "webhook" and not secret:
            secret = secrets.token_urlsafe(32)
    return Destination(
        id="",
        project=project,
        kind=kind,
        events=wanted,
        target=target,
        rules=checked_rules,
        secret=secret if kind == "webhook" else "",
        smtp=conf,
        name=name,
        origin=origin,
    )


def _smtp(given: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(given) - set(_SMTP_KEYS))
    if unknown:
        raise UsageError(f"unknown SMTP setting {unknown[0]!r}: use {', '.join(_SMTP_KEYS)}")
    out: dict[str, Any] = {"host": str(given.get("host") or "localhost")}
    try:
        out["port"] = int(given.get("port") or 25)
    except (TypeError, ValueError):
        raise UsageError(f"--smtp-port {given.get('port')!r} is not a port number") from None
    if not 0 < out["port"] < 65536:
        raise UsageError(f"--smtp-port {out['port']} is not a port number (1-65535)")
    tls = str(given.get("tls") or "none")
    if tls not in ("none", "starttls", "ssl"):
        raise UsageError(f"--smtp-tls {tls!r}: use none, starttls or ssl")
    out["tls"] = tls
    for key in ("user", "sender"):
        if given.get(key):
            out[key] = str(given[key])
    password = given.get("password")
    env = given.get("password_env")
    if env:
        password = os.environ.get(str(env))
        if password is None:
            raise UsageError(f"the SMTP password variable {env} is not set: export it first")
    if password:
        out["password"] = str(password)
    return out


def load_alerts_file(path: Path, allow_private: bool = False) -> list[Destination]:
    """The destinations of an alerts file (module docstring)."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read the alerts file {path}: {exc.strerror}") from None
    try:
        if Path(path).suffix.lower() == ".toml":
            import tomllib

            data: Any = tomllib.loads(raw.decode())
        else:
            data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise UsageError(f"the alerts file {path} is not valid JSON or TOML: {exc}") from None
    items = data.get("destination", data.get("destinations")) if isinstance(data, dict) else data
    if not isinstance(items, list):
        raise UsageError(
            f"the alerts file {path} holds no list of destinations: write [[destination]] "
            'tables (TOML) or {"destinations": [...]} (JSON)'
        )
    out = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise UsageError(f"{path}: destination #{i + 1} is not a table/object")
        dest = _from_item(item, allow_private, f"{path}: destination #{i + 1}")
        # An id per position, so a restart with the same file keeps the same ids (and
        # the deliveries still pending for them).
        out.append(Destination(**{**_fields(dest), "id": f"cfg-{i + 1}"}))
    return out


def _from_item(item: dict[str, Any], allow_private: bool, where: str) -> Destination:
    kinds = [k for k in KINDS if item.get(k)]
    if len(kinds) != 1:
        raise UsageError(f"{where}: give exactly one of webhook, slack or email")
    kind = kinds[0]
    try:
        dest = make_destination(
            project=str(item.get("project") or "*"),
            kind=kind,
            target=str(item[kind]),
            events=item.get("on") or "failed,hang,nonfinite,alert",
            rules=[str(r) for r in item.get("rules") or []],
            secret=str(item.get("secret") or ""),
            smtp=item.get("smtp") or {},
            name=str(item.get("name") or ""),
            origin="config",
            allow_private=allow_private,
        )
    except UsageError as exc:
        raise UsageError(f"{where}: {exc}") from None
    return dest


def _fields(dest: Destination) -> dict[str, Any]:
    return {f: getattr(dest, f) for f in dest.__struct_fields__}
