"""Sending one alert: a webhook (generic JSON or Slack) over HTTP(S), or an e-mail (SMTP).

Safety rules, each for a reason:

* **SSRF.** A webhook URL is chosen by whoever may add destinations, and the server
  sits inside a network; so its host is resolved and every address checked before the
  connection, and the connection goes to the address that was checked (a DNS answer
  that changes between check and connect cannot redirect it). Loopback, link-local,
  private, shared, reserved and multicast addresses are refused unless
  ``allow_private`` (``--allow-private-webhooks``).
* **Nothing followed, nothing shown.** A redirect is a failure (never followed); of a
  response only its status is kept, its body is read (a little) and dropped.
* **Secrets stay put.** Errors name the host, never the URL (a Slack hook's path is its
  secret) nor a password.

``DeliveryError`` says why a send failed, in words fit for ``alert test`` and the log.
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import ipaddress
import json
import smtplib
import socket
import ssl
import time
from email.message import EmailMessage
from typing import Any
from urllib.parse import urlsplit

from ..alerting import Destination, email_text, slack_body
from ..errors import DeliveryError

SIGNATURE_HEADER = "X-Rankwise-Signature"
TIMESTAMP_HEADER = "X-Rankwise-Timestamp"
EVENT_HEADER = "X-Rankwise-Event"
_USER_AGENT = "rankwise-alerts"


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """``sha256=<hex>`` of HMAC-SHA256(secret, ``timestamp + "." + body``)."""
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def _refused(addr: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    mapped = getattr(addr, "ipv4_mapped", None)
    if mapped is not None:
        addr = mapped
    return not addr.is_global or addr.is_multicast


def resolve(host: str, port: int, allow_private: bool) -> str:
    """The address to connect to for ``host`` (checked, see the module docstring)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise DeliveryError(f"cannot resolve the webhook host {host!r}: {exc}") from None
    addrs = list(dict.fromkeys(str(info[4][0]) for info in infos))
    if not addrs:
        raise DeliveryError(f"the webhook host {host!r} has no address")
    if not allow_private:
        for a in addrs:
            ip = ipaddress.ip_address(a.split("%")[0])
            if _refused(ip):
                raise DeliveryError(
                    f"the webhook host {host!r} resolves to {ip}, a loopback, private or "
                    "link-local address: alerts are not sent inside the server's network "
                    "(pass --allow-private-webhooks to the server and to `rankwise alert` "
                    "to allow it)"
                )
    return addrs[0]


class _PinnedHTTP(http.client.HTTPConnection):
    def __init__(self, host: str, port: int, ip: str, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self._ip = ip

    def connect(self) -> None:
        self.sock = socket.create_connection((self._ip, self.port), self.timeout)


class _PinnedHTTPS(http.client.HTTPSConnection):
    def __init__(self, host: str, port: int, ip: str, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout, context=ssl.create_default_context())
        self._ip = ip

    def connect(self) -> None:
        sock = socket.create_connection((self._ip, self.port), self.timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)  # type: ignore[attr-defined]


def post_json(
    url: str,
    body: bytes,
    headers: dict[str, str],
    *,
    timeout: float = 10.0,
    allow_private: bool = False,
) -> int:
    """POST ``body`` to ``url``; the 2xx status, else ``DeliveryError``."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.scheme not in ("http", "https") or not host:
        raise DeliveryError(
            "the webhook URL is not http(s)://HOST/...: fix it with `rankwise alert`"
        )
    port = parts.port or (443 if parts.scheme == "https" else 80)
    ip = resolve(host, port, allow_private)
    cls = _PinnedHTTPS if parts.scheme == "https" else _PinnedHTTP
    conn = cls(host, port, ip, timeout)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    try:
        conn.request(
            "POST",
            path,
            body=body,
            headers={"Content-Type": "application/json", "User-Agent": _USER_AGENT, **headers},
        )
        resp = conn.getresponse()
        resp.read(4096)  # dropped: a receiver's reply is never shown or followed
        status = resp.status
    except http.client.HTTPException as exc:  # its text may quote the URL: name it only
        raise DeliveryError(f"webhook {host}: {type(exc).__name__}") from None
    except OSError as exc:  # refused, unreachable, timed out, TLS: no URL in the text
        reason = type(exc).__name__ if not str(exc) else f"{type(exc).__name__}: {exc}"
        raise DeliveryError(f"webhook {host}: {reason}"[:300]) from None
    finally:
        conn.close()
    if 300 <= status < 400:
        raise DeliveryError(
            f"webhook {host} answered a redirect ({status}), which is not followed: "
            "give the final URL"
        )
    if not 200 <= status < 300:
        raise DeliveryError(f"webhook {host} answered HTTP {status}")
    return status


def send_email(
    smtp: dict[str, Any], to: str, subject: str, text: str, *, timeout: float = 10.0
) -> None:
    """Send one plain-text e-mail through the destination's SMTP server."""
    host = str(smtp.get("host") or "localhost")
    port = int(smtp.get("port") or 25)
    tls = str(smtp.get("tls") or "none")
    msg = EmailMessage()
    msg["From"] = str(smtp.get("sender") or "rankwise@localhost")
    msg["To"] = to
    msg["Subject"] = subject
    msg.set_content(text)
    try:
        client: smtplib.SMTP
        if tls == "ssl":
            client = smtplib.SMTP_SSL(
                host, port, timeout=timeout, context=ssl.create_default_context()
            )
        else:
            client = smtplib.SMTP(host, port, timeout=timeout)
        with client:
            if tls == "starttls":
                client.starttls(context=ssl.create_default_context())
            if smtp.get("user"):
                client.login(str(smtp["user"]), str(smtp.get("password") or ""))
            client.send_message(msg)
    except smtplib.SMTPAuthenticationError:
        raise DeliveryError(
            f"the SMTP server {host}:{port} refused the login: check --smtp-user and the password"
        ) from None
    except (OSError, smtplib.SMTPException) as exc:
        raise DeliveryError(
            f"cannot send e-mail through {host}:{port} ({type(exc).__name__}: "
            f"{str(exc)[:120]}): check --smtp-host/--smtp-port and that the server is up"
        ) from None


def send(
    dest: Destination, body: dict[str, Any], *, timeout: float = 10.0, allow_private: bool = False
) -> None:
    """Deliver one event's ``body`` (``alerting.message``) to ``dest``."""
    if dest.kind == "email":
        subject, text = email_text(body)
        send_email(dest.smtp, dest.target, subject, text, timeout=timeout)
        return
    payload = slack_body(body) if dest.kind == "slack" else body
    raw = json.dumps(payload, allow_nan=False, default=str).encode()
    headers = {EVENT_HEADER: str(body["id"])}
    if dest.kind == "webhook":
        ts = str(int(time.time()))
        headers[TIMESTAMP_HEADER] = ts
        if dest.secret:
            headers[SIGNATURE_HEADER] = sign(dest.secret, ts, raw)
    post_json(dest.target, raw, headers, timeout=timeout, allow_private=allow_private)
