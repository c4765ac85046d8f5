"""What FastAPI validates: request bodies and the constrained query parameters.

Every reply is a msgspec struct (``rankwise.read.model``, ``rankwise.store.types``,
``rankwise.server.replies``), encoded as it is and documented from the same declaration
(``rankwise.server.openapi``). ``docs/http-api.md`` is the prose version of the contract.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from .. import names

XAxis = Literal["step", "time"]
RunState = Literal["running", "finished", "failed", "killed", "crashed"]


_ID = names.ID_CHARS_PATTERN[1:-1]
RunRef = Annotated[str, StringConstraints(pattern=f"^{_ID}/{_ID}$")]
STREAMS_PATTERN = f"^(?:all|none|{_ID}(?:,{_ID})*)$"


class CompareRequest(BaseModel):
    model_config = ConfigDict(strict=True)  # JSON as written: no true for a number

    runs: list[RunRef] = Field(min_length=1, description='"project/run" ids')
    key: str = Field(min_length=1, max_length=names.KEY_MAX, pattern=names.KEY_PATTERN)
    x: XAxis = "step"
    from_: float | None = Field(None, alias="from")
    to: float | None = None
    max_points: int = Field(2000, ge=2, le=100_000)
    streams: str = Field(
        "all", description="all, none, or comma-separated labels", pattern=STREAMS_PATTERN
    )
    band: bool = True
