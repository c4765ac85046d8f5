"""API tokens: their format, generation, hashing and constant-time check.

A token reads ``rk_<role letter>_<id>_<secret>``: ``rk_i_`` ingest, ``rk_r_`` read,
``rk_w_`` write (read, and edit reports and runs), ``rk_a_`` admin (a prefix secret
scanners can match). The ``id`` (12 hex digits) is what
the store indexes and what ``rankwise token list`` and ``revoke`` show; the ``secret``
(``secrets.token_urlsafe(32)``, 256 bits) is shown once and only its SHA-256 is stored. A
fast hash is right here: the secret is random, not a password, and a slow KDF on every
ingest request from every rank would cost throughput for nothing.

Invariants: the secret never appears in a ``repr``, a log line or an error message; a
wrong id and a wrong secret are checked along the same path (a digest comparison against
a dummy digest when the id is unknown) and end in the same answer.

This module is stdlib only: the SDK, the store and the server all import it.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass, field

ROLES = ("ingest", "read", "write", "admin")
_LETTER = {"ingest": "i", "read": "r", "write": "w", "admin": "a"}
_ROLE_OF = {v: k for k, v in _LETTER.items()}
PREFIX = "rk_"
# The whole token: ASCII only, bounded, so a 64 KB or non-ASCII header is refused early.
_TOKEN = re.compile(r"rk_([irwa])_([0-9a-f]{12})_([A-Za-z0-9_-]{32,64})")
_DUMMY = hashlib.sha256(b"rankwise: no such token").digest()


@dataclass(frozen=True)
class TokenInfo:
    """A token as the store keeps it: never the secret, only its digest (not in repr)."""

    id: str
    role: str
    name: str = ""
    projects: tuple[str, ...] | None = None  # None: every project
    created: float = 0.0
    last_used: float | None = None
    revoked: float | None = None
    secret_hash: bytes = field(default=b"", repr=False)

    def allows(self, project: str) -> bool:
        return self.projects is None or project in self.projects


@dataclass(frozen=True)
class NewToken:
    """A token just created: ``value`` is the whole token, to be shown once."""

    info: TokenInfo
    value: str = field(repr=False)

    def __repr__(self) -> str:
        return f"NewToken(id={self.info.id!r}, role={self.info.role!r}, value={mask(self.value)!r})"


def generate(role: str) -> tuple[str, str, str]:
    """A fresh ``(token, id, secret)`` for ``role``."""
    if role not in _LETTER:
        raise ValueError(f"role {role!r} is not one of {', '.join(ROLES)}")
    token_id = secrets.token_hex(6)
    secret = secrets.token_urlsafe(32)
    return f"{PREFIX}{_LETTER[role]}_{token_id}_{secret}", token_id, secret


def parse(token: str) -> tuple[str, str, str] | None:
    """``(role, id, secret)`` of a well-formed token, else None (never raises)."""
    if not isinstance(token, str) or len(token) > 100:
        return None
    m = _TOKEN.fullmatch(token)
    if m is None:
        return None
    return _ROLE_OF[m.group(1)], m.group(2), m.group(3)


def digest(secret: str) -> bytes:
    """SHA-256 of the secret: what the store keeps."""
    return hashlib.sha256(secret.encode("ascii", "replace")).digest()


def matches(info: TokenInfo | None, role: str, secret: str) -> bool:
    """Whether ``secret`` is the secret of ``info``, in constant time over the digests.

    ``info`` None (an unknown id) compares against a dummy digest, so an unknown id and a
    wrong secret cost the same. The role letter must match the stored role too.
    """
    stored = info.secret_hash if info is not None else _DUMMY
    same = hmac.compare_digest(digest(secret), bytes(stored))
    return same and info is not None and info.role == role and info.revoked is None


def mask(token: str) -> str:
    """``rk_i_0123456789ab_…``: the public part of a token, for messages and lists."""
    parsed = parse(token)
    if parsed is None:
        return "<token>"
    role, token_id, _ = parsed
    return f"{PREFIX}{_LETTER[role]}_{token_id}_…"
