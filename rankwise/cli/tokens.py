"""``rankwise token create|list|revoke --db URL``: manage API tokens in a server's store.

These commands open the same database the server uses (no server needs to run). A new
token is printed once, alone on the last line, so scripts can take it with ``tail -n1``;
only its SHA-256 is stored. A revocation reaches running servers within their token
cache TTL (10 s by default).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..errors import UsageError
from ..tokens import ROLES
from ._format import ago, table


def add_token_commands(sub: Any) -> None:
    p = sub.add_parser("token", help="create, list and revoke API tokens of a server's store")
    tsub = p.add_subparsers(dest="token_command", required=True)
    c = tsub.add_parser("create", help="create a token and print it (once)")
    _db(c)
    c.add_argument(
        "--role",
        required=True,
        choices=ROLES,
        help="ingest (upload), read, write (read, and edit reports and runs) or admin",
    )
    c.add_argument(
        "--project",
        action="append",
        default=None,
        help="a project the token may touch (repeatable; default: every project)",
    )
    c.add_argument("--name", default="", help="what the token is for, shown by list")
    c.set_defaults(func=cmd_token_create)
    ls = tsub.add_parser("list", help="list tokens (never their secrets)")
    _db(ls)
    ls.add_argument("--json", action="store_true", help="JSON lines instead of a table")
    ls.set_defaults(func=cmd_token_list)
    r = tsub.add_parser("revoke", help="revoke a token and end its dashboard sessions")
    _db(r)
    r.add_argument("id", help="the token's id (the 12 hex digits after rk_x_)")
    r.set_defaults(func=cmd_token_revoke)


def _db(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", required=True, help="sqlite:///PATH or postgresql://USER@HOST/DB")


def open_db(url: str) -> Any:
    from ..store import open_store

    try:
        store = open_store(url)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    store.migrate()
    return store


def cmd_token_create(args: argparse.Namespace) -> int:
    with open_db(args.db) as store:
        try:
            new = store.create_token(args.role, args.project, args.name)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    scope = ", ".join(new.info.projects) if new.info.projects else "every project"
    print(f"rankwise: created {args.role} token {new.info.id} for {scope}; it is shown only now:")
    print(new.value)
    return 0


def cmd_token_list(args: argparse.Namespace) -> int:
    with open_db(args.db) as store:
        tokens = store.list_tokens()
    if args.json:
        for t in tokens:
            row = {k: getattr(t, k) for k in ("id", "role", "name", "created", "last_used")}
            row["projects"] = None if t.projects is None else list(t.projects)
            row["revoked"] = t.revoked
            print(json.dumps(row))
        return 0
    rows = [
        [
            t.id,
            t.role,
            t.name or "-",
            ",".join(t.projects) if t.projects is not None else "*",
            ago(t.created),
            ago(t.last_used),
            ago(t.revoked) if t.revoked is not None else "live",
        ]
        for t in tokens
    ]
    print(table(rows, ["id", "role", "name", "projects", "created", "last used", "revoked"]))
    return 0


def cmd_token_revoke(args: argparse.Namespace) -> int:
    with open_db(args.db) as store:
        if not store.revoke_token(args.id):
            raise UsageError(f"no live token with id {args.id!r}: see rankwise token list")
    print(f"rankwise: revoked token {args.id} (running servers stop accepting it within 10 s)")
    return 0
