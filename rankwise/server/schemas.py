"""What FastAPI validates: request bodies and the constrained query parameters.

Every reply is a msgspec struct of ``rankwise.wire``, encoded as it is and documented
from the same declaration
(``rankwise.server.openapi``). ``docs/http-api.md`` is the prose version of the contract.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, Field, Strict, StringConstraints

from .. import names
from ..wire.charts import XAxis

RunState = Literal["running", "finished", "failed", "killed", "crashed"]


def _a_number(value: Any) -> Any:
    """JSON as the schema says: ``true`` or ``"5"`` is not a number (pydantic's lax mode
    would take them), while ``5.0`` is still the integer 5, as JSON Schema counts it."""
    if isinstance(value, (bool, str)):
        raise ValueError("expected a JSON number")
    return value


JsonInt = Annotated[int, BeforeValidator(_a_number)]
JsonFloat = Annotated[float, BeforeValidator(_a_number)]
JsonBool = Annotated[bool, Strict()]
# An x range end: finite and within a 64-bit step (``routes.deps.X_BOUNDS``), else 422,
# never a 500 from the database.
XValue = Annotated[
    float, Field(ge=-9.2e18, le=9.2e18, allow_inf_nan=False), BeforeValidator(_a_number)
]

_ID = names.ID_CHARS_PATTERN[1:-1]
RunRef = Annotated[str, StringConstraints(pattern=f"^{_ID}/{_ID}$")]
STREAMS_PATTERN = f"^(?:all|none|{_ID}(?:,{_ID})*)$"


class CompareRequest(BaseModel):
    runs: list[RunRef] = Field(min_length=1, description='"project/run" ids')
    key: str = Field(min_length=1, max_length=names.KEY_MAX, pattern=names.KEY_PATTERN)
    x: XAxis = "step"
    from_: XValue | None = Field(None, alias="from")
    to: XValue | None = None
    max_points: JsonInt = Field(2000, ge=2, le=100_000)
    streams: str = Field(
        "all", description="all, none, or comma-separated labels", pattern=STREAMS_PATTERN
    )
    band: JsonBool = True
