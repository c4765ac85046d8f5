"""API tokens and dashboard sessions in the store (tables of migration 5).

The store keeps digests only: a token's SHA-256 (``rankwise.tokens``) and a session id's
SHA-256, so a copy of the database lets nobody in. Revoking is a timestamp, never a
delete, so ``token list`` keeps showing who had access and when it ended; revoking a
token also ends its dashboard sessions (the session check joins the token).

``last_used`` and a session's ``last_seen`` are written at most once per ``every``
seconds per row (the server batches them), never once per request: thousands of ranks
uploading through one token must not turn every ingest into two writes.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from .. import tokens as T
from ..errors import UsageError
from .sqlbase import SQLBase

_COLUMNS = "id, role, name, projects, created, last_used, revoked, secret_hash"


@dataclass(frozen=True)
class SessionInfo:
    token: T.TokenInfo
    created: float
    last_seen: float


def session_digest(session_id: str) -> bytes:
    return hashlib.sha256(session_id.encode("ascii", "replace")).digest()


def _info(row: Sequence[Any]) -> T.TokenInfo:
    token_id, role, name, projects, created, last_used, revoked, secret_hash = row
    return T.TokenInfo(
        id=token_id,
        role=role,
        name=name,
        projects=None if projects is None else tuple(json.loads(projects)),
        created=float(created),
        last_used=None if last_used is None else float(last_used),
        revoked=None if revoked is None else float(revoked),
        secret_hash=bytes(secret_hash),
    )


def check_new_token(role: str, projects: Iterable[str] | None) -> tuple[str, ...] | None:
    if role not in T.ROLES:
        raise UsageError(f"role {role!r} is not one of {', '.join(T.ROLES)}")
    if projects is None:
        return None
    if role == "admin":
        raise UsageError("an admin token covers every project: create it without projects")
    out = tuple(dict.fromkeys(projects))
    if not out or not all(isinstance(p, str) and p for p in out):
        raise UsageError("projects: give one or more project names, or none for all projects")
    return out


class Tokens(SQLBase):
    """Store methods for tokens and sessions; mixed into ``SQLStore``."""

    # -- tokens ------------------------------------------------------------------------

    def create_token(
        self, role: str, projects: Iterable[str] | None = None, name: str = ""
    ) -> T.NewToken:
        """A new token (its value is in the result only, never stored)."""
        scoped = check_new_token(role, projects)
        value, token_id, secret = T.generate(role)
        info = T.TokenInfo(
            id=token_id,
            role=role,
            name=name,
            projects=scoped,
            created=time.time(),
            secret_hash=T.digest(secret),
        )
        self._write(
            lambda tx: tx.run(
                "INSERT INTO tokens (id, name, role, projects, secret_hash, created) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (
                    info.id,
                    name,
                    role,
                    None if scoped is None else json.dumps(list(scoped)),
                    info.secret_hash,
                    info.created,
                ),
            )
        )
        return T.NewToken(info, value)

    def get_token(self, token_id: str) -> T.TokenInfo | None:
        row = self._read(
            lambda tx: tx.one(f"SELECT {_COLUMNS} FROM tokens WHERE id = ?", (token_id,))
        )
        return None if row is None else _info(row)

    def list_tokens(self) -> list[T.TokenInfo]:
        rows = self._read(lambda tx: tx.all(f"SELECT {_COLUMNS} FROM tokens ORDER BY created"))
        return [_info(r) for r in rows]

    def has_admin_token(self) -> bool:
        row = self._read(
            lambda tx: tx.one(
                "SELECT COUNT(*) FROM tokens WHERE role = 'admin' AND revoked IS NULL"
            )
        )
        return bool(row and row[0])

    def revoke_token(self, token_id: str) -> bool:
        """Revoke the token and its sessions; False when no live token has that id."""
        now = time.time()

        def revoke(tx: Any) -> int:
            n = int(
                tx.run(
                    "UPDATE tokens SET revoked = ? WHERE id = ? AND revoked IS NULL",
                    (now, token_id),
                )
            )
            tx.run(
                "UPDATE sessions SET revoked = ? WHERE token = ? AND revoked IS NULL",
                (now, token_id),
            )
            return n

        return bool(self._write(revoke))

    def touch_tokens(self, used: dict[str, float]) -> None:
        """Record when tokens were last used (one write for a batch of them)."""
        if used:
            self._write(
                lambda tx: tx.many(
                    "UPDATE tokens SET last_used = ? WHERE id = ? "
                    "AND (last_used IS NULL OR last_used < ?)",
                    [(t, i, t) for i, t in used.items()],
                )
            )

    # -- sessions ----------------------------------------------------------------------

    def create_session(self, session_id: str, token_id: str) -> None:
        now = time.time()
        self._write(
            lambda tx: tx.run(
                "INSERT INTO sessions (id_hash, token, created, last_seen) VALUES (?, ?, ?, ?)",
                (session_digest(session_id), token_id, now, now),
            )
        )

    def get_session(self, session_id: str) -> SessionInfo | None:
        """The live session and its live token, or None (revoked either way, or unknown)."""
        cols = ", ".join(f"t.{c.strip()}" for c in _COLUMNS.split(","))
        row = self._read(
            lambda tx: tx.one(
                f"SELECT s.created, s.last_seen, {cols} FROM sessions s "
                "JOIN tokens t ON t.id = s.token "
                "WHERE s.id_hash = ? AND s.revoked IS NULL AND t.revoked IS NULL",
                (session_digest(session_id),),
            )
        )
        if row is None:
            return None
        return SessionInfo(_info(row[2:]), float(row[0]), float(row[1]))

    def touch_session(self, session_id: str, every: float) -> None:
        """Move ``last_seen`` to now if it is older than ``every`` seconds."""
        now = time.time()
        self._write(
            lambda tx: tx.run(
                "UPDATE sessions SET last_seen = ? WHERE id_hash = ? AND last_seen < ?",
                (now, session_digest(session_id), now - every),
            )
        )

    def revoke_session(self, session_id: str) -> bool:
        n = self._write(
            lambda tx: tx.run(
                "UPDATE sessions SET revoked = ? WHERE id_hash = ? AND revoked IS NULL",
                (time.time(), session_digest(session_id)),
            )
        )
        return bool(n)
