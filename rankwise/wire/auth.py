"""The replies of the dashboard session and token routes (``/session``, ``/tokens``).

Like every reply, msgspec structs encoded as they are; their field descriptions are the
OpenAPI document's. A token's secret appears in one reply only, ``NewTokenReply``, once.
"""

from __future__ import annotations

from typing import Annotated

import msgspec

# No docstrings on these structs: a docstring would become the schema's description.


# Who a request acts as (``GET /session``, and the reply of a login). The field order is
# the order the reply has always had.
class WhoAmI(msgspec.Struct, kw_only=True):
    auth: Annotated[
        bool, msgspec.Meta(description="false on a local `rankwise ui`: no login needed")
    ]
    local: Annotated[
        bool,
        msgspec.Meta(
            description="true on `rankwise ui` (it reads a data directory); false on a server "
            "that ranks upload to"
        ),
    ] = False
    role: Annotated[
        str,
        msgspec.Meta(
            description="read, write or admin (admin on `rankwise ui`); write and admin may "
            "edit reports and runs of their projects"
        ),
    ]
    projects: Annotated[list[str] | None, msgspec.Meta(description="null: every project")]
    name: str = ""
    via: Annotated[str, msgspec.Meta(description="bearer, session or local")]


# One token as ``GET /tokens`` lists it: never its secret.
class TokenRow(msgspec.Struct, kw_only=True):
    id: str
    role: str
    name: str
    projects: list[str] | None
    created: float
    last_used: float | None
    revoked: float | None


class TokensReply(msgspec.Struct, kw_only=True):
    tokens: list[TokenRow]


# A token just created: its row and the token itself.
class NewTokenReply(TokenRow, kw_only=True):
    token: Annotated[
        str, msgspec.Meta(description="the token itself: shown this once, never again")
    ]
