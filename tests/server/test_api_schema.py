"""Schemathesis over the OpenAPI document: no 500, no reply that breaks its own schema.

Positive and negative data, every operation, the checks schemathesis runs by default
(server errors, status codes, content types, headers, response schemas, negative data
rejected). ``credentials`` is where a token goes once the server requires one: each
case runs once per caller listed there. A small ``max_examples`` keeps this under a minute.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import positive_data_acceptance
from schemathesis.core.parameters import ParameterLocation

from rankwise import names
from rankwise.server import ServerSettings, create_app
from rankwise.store import open_store
from rankwise.stream.identity import StreamId
from tests.helpers.streams import records

EXAMPLES = 10
# An upload body is opaque bytes to the schema: sent as generated (the ingest decoder is
# fuzzed with well-formed and broken streams in test_ingest_fuzz.py; a batch's parts in
# test_ingest_batch.py).
schemathesis.serializer.alias("application/x-rankwise-stream", "application/octet-stream")
schemathesis.serializer.alias("application/x-rankwise-batch", "application/octet-stream")
HOST = {"Host": "localhost"}  # the app answers only allowed hosts; "testserver" is not one


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, str]]:
    """The schema of an app with authentication on (as `rankwise server` runs), and an
    admin token of its store."""
    tmp: Path = tmp_path_factory.mktemp("schema")
    store = open_store(f"sqlite:///{tmp / 'db.sqlite'}")
    store.migrate()
    # Data for the read routes to find.
    store.ingest([(StreamId("p", "r", "rank-0", 0), records(steps=5))])
    token = store.create_token("admin", None, "schemathesis").value
    app = create_app(store, ServerSettings(static_dir=tmp / "no-static", max_body_bytes=1 << 20))
    yield schemathesis.openapi.from_asgi("/api/openapi.json", app, headers=HOST), token
    store.close()


@pytest.fixture(scope="module")
def api_schema(served: tuple[Any, str]) -> Any:
    return served[0]


@pytest.fixture(scope="module")
def credentials(served: tuple[Any, str]) -> list[dict[str, str]]:
    """The headers of each kind of caller; every case runs as each: with no credentials
    (every answer must be the documented 401) and with an admin token."""
    return [{}, {"Authorization": f"Bearer {served[1]}"}]


@pytest.mark.slow
@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_api_conforms_to_its_schema(
    api_schema: Any, credentials: list[dict[str, str]], mode: GenerationMode
) -> None:
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert len(operations) >= 10  # every route of the API is in the document
    tested = 0
    for operation in operations:
        try:
            fuzz(operation, mode, credentials)
        except Unsatisfiable:
            assert mode is GenerationMode.NEGATIVE  # nothing to break: no parameters
            continue
        tested += 1
    assert tested >= len(operations) // 2


def fuzz(operation: Any, mode: GenerationMode, credentials: list[dict[str, str]]) -> None:
    # The frame grammar of an upload cannot be written in OpenAPI: any bytes are "valid"
    # to the document, so a refused random body is no failure there. Likewise a blob's
    # bytes must hash to the digest in its path (400 otherwise), which no schema says; and
    # an artifact commit's manifest has rules across its entries (chunk sizes that add up,
    # no file under another file, chunks already uploaded: 409) no schema can state. An
    # alert destination's URL must resolve to a public address (SSRF), which no schema says.
    # A run filter's grammar and an edit's value rules are the server's too.
    method = operation.method.upper()
    opaque = (
        operation.path in ("/api/v1/ingest", "/api/v1/ingest/batch")
        or (method == "PUT" and operation.path.startswith("/api/v1/blobs/"))
        or (method == "POST" and operation.path.startswith("/api/v1/artifacts/"))
        or (method == "POST" and operation.path == "/api/v1/alerts/destinations")
        # A run filter's grammar (rankwise.filters) and an edit's value rules (one-line
        # names, tags to add or remove) are checked by the server, not by the document.
        # A delete names its runs or a filter, one of the two, which no schema here says.
        or (
            method == "POST"
            and operation.path.endswith(("/runs/search", "/edits", "/runs/tags", "/runs/delete"))
        )
    )
    skip = [positive_data_acceptance] if opaque else []

    strategy = operation.as_strategy(generation_mode=mode)
    if mode is GenerationMode.POSITIVE:
        strategy = strategy.filter(valid_beyond_the_document)
    else:
        strategy = strategy.filter(lambda case: not body_valid_after_all(operation, case))

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=strategy)
    def check(case: Any) -> None:
        for headers in credentials:
            # Without credentials, valid data is refused (401) by design.
            excluded = skip if headers else [*skip, positive_data_acceptance]
            case.call_and_validate(headers={**HOST, **headers}, excluded_checks=excluded)

    check()


def body_valid_after_all(operation: Any, case: Any) -> bool:
    """A negative case whose only broken part is its JSON body, which the document
    accepts all the same. Schemathesis breaks one branch of a ``oneOf`` with a value
    another branch allows (a report block's ``type`` outside the table block's enum, as a
    histogram block's): no negative data, so its acceptance is no failure."""
    meta = case._meta
    if meta is None or not isinstance(case.body, dict | list):
        return False
    broken = {where for where, info in meta.components.items() if info.mode.is_negative}
    if broken != {ParameterLocation.BODY}:
        return False
    raw = operation.schema.raw_schema
    spec = raw["paths"][operation.path][operation.method.lower()]
    schema = spec.get("requestBody", {}).get("content", {}).get("application/json", {})
    if "schema" not in schema:
        return False
    validator = jsonschema.Draft202012Validator(
        {**schema["schema"], "components": raw.get("components", {})},
        format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER,
    )
    return bool(validator.is_valid(case.body))


def valid_beyond_the_document(case: Any) -> bool:
    """What OpenAPI cannot say, positive data keeps to: the key rule's NFC and Unicode
    categories (its pattern is as near as a regex gets), ``from <= to``, one position."""
    body = case.body if isinstance(case.body, dict) else {}
    fields = {**body, **(case.query or {})}
    for name, value in fields.items():
        values = value if isinstance(value, list) else [value]
        if name in ("key", "name") and not all(names.is_key(v) for v in values):
            return False
    file_path = (case.path_parameters or {}).get("path")
    if file_path is not None and not names.is_file_name(file_path):
        return False  # an artifact file's path: NFC and Unicode categories, as for keys
    streams = fields.get("streams")
    labels = streams.split(",") if isinstance(streams, str) else []
    if streams not in ("all", "none") and not all(names.is_id(x) for x in labels):
        return False  # labels follow the id rule (no device names, NFC)
    if sum(k in fields for k in ("offset", "after", "before", "at")) > 1:
        return False  # the console's positions are exclusive
    lo, hi = fields.get("from"), fields.get("to")
    return not (isinstance(lo, int | float) and isinstance(hi, int | float) and lo > hi)


def test_documented_run_states_are_the_stores() -> None:
    from typing import get_args

    from rankwise.server.schemas import RunState
    from rankwise.stream.records import STATES

    assert get_args(RunState) == STATES


def test_fields_always_sent_are_required() -> None:
    """A reply struct that does not omit its defaults sends every field: the document
    marks each one required (and an omitting struct leaves its defaults optional)."""
    from rankwise.server.openapi import struct_components
    from rankwise.wire.charts import Band
    from rankwise.wire.runs import RunInfo

    components = struct_components()
    band = components["Band"]
    assert set(band["required"]) == {f for f in Band.__struct_fields__}
    assert "nan" in band["required"] and "complete_step" in band["required"]
    run = components["RunInfo"]
    optional = set(run["properties"]) - set(run.get("required", []))
    assert {"streams", "summary_ranks"} <= optional  # defaults left out of a reply
    assert len(run["properties"]) == len(RunInfo.__struct_fields__)
