"""Every route's JSON reply is exactly what the route declares: decoded strictly into its
declared model, then encoded back, it is the same object (so no field is missing, none
is unknown, and none has another type).

The declared model of a route is the one the OpenAPI document names for its success
reply: a read-model struct (``rankwise.server.openapi.STRUCTS``) or a pydantic model.
``CASES`` must cover every route: a new route without a case fails here.
"""

from __future__ import annotations

import hashlib
import io
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from fastapi.routing import APIRoute
from pydantic import BaseModel

from rankwise.alert_config import make_destination
from rankwise.server import ServerSettings, create_app
from rankwise.server.openapi import STRUCTS
from rankwise.store import open_store
from rankwise.store.blobs import LocalBlobStore
from rankwise.stream import records as R
from rankwise.stream.identity import StreamId
from rankwise.wire.artifacts import CommitRequest
from tests.helpers.rich import predictions, rich_stream, table_record
from tests.helpers.servers import admin_token, call
from tests.helpers.streams import body, records
from tests.helpers.telemetry import T0, console_stream, start, steps_stream, system_stream

RUN = "/api/v1/projects/p/runs/r"
RUN_T = "/api/v1/projects/{project}/runs/{run}"
STREAM = {"project": "p", "run": "r", "label": "rank-9", "incarnation": 0}
BLOB = b"\x89PNG not really"
DIGEST = hashlib.sha256(BLOB).hexdigest()
MODEL = b"weights, two chunks"
MODEL_CHUNKS = [MODEL[:8], MODEL[8:]]


def _manifest(path: str) -> dict[str, Any]:
    chunks = [[hashlib.sha256(c).hexdigest(), len(c)] for c in MODEL_CHUNKS]
    entry = {"path": path, "digest": hashlib.sha256(MODEL).hexdigest(), "size": len(MODEL)}
    return {"entries": [{**entry, "chunks": chunks}, {"path": "data.csv", "ref": "s3://b/k"}]}


COMMIT = {"type": "model", "manifest": _manifest("model.bin"), "client_id": "c" * 32}
ART = "/api/v1/artifacts/p/m"

# (method, path template as routed, concrete path, query, JSON body)
CASES: list[tuple[str, str, str, dict[str, Any], Any]] = [
    ("GET", "/api/v1/projects", "/api/v1/projects", {}, None),
    ("GET", "/api/v1/projects/{project}/runs", "/api/v1/projects/p/runs", {}, None),
    (
        "GET",
        "/api/v1/projects/{project}/runs",
        "/api/v1/projects/p/runs",
        {"with_streams": "true"},
        None,
    ),
    ("GET", "/api/v1/projects/{project}/runs/{run}", RUN, {}, None),
    ("GET", "/api/v1/projects/{project}/runs/{run}/metrics", RUN + "/metrics", {}, None),
    ("GET", "/api/v1/projects/{project}/runs/{run}/series", RUN + "/series", {"key": "loss"}, None),
    ("GET", RUN_T + "/heatmap", RUN + "/heatmap", {"key": "loss"}, None),
    ("GET", "/api/v1/projects/{project}/runs/{run}/history", RUN + "/history", {}, None),
    ("POST", "/api/v1/compare", "/api/v1/compare", {}, {"runs": ["p/r"], "key": "loss"}),
    ("GET", "/api/v1/projects/{project}/runs/{run}/health", RUN + "/health", {"stacks": 1}, None),
    ("GET", "/api/v1/projects/{project}/runs/{run}/stalls", RUN + "/stalls", {}, None),
    ("GET", "/api/v1/projects/{project}/runs/{run}/hang", RUN + "/hang", {}, None),
    ("GET", "/api/v1/projects/{project}/runs/{run}/console", RUN + "/console", {}, None),
    ("GET", "/api/v1/projects/{project}/runs/{run}/system", RUN + "/system", {}, None),
    (
        "GET",
        "/api/v1/projects/{project}/runs/{run}/system/series",
        RUN + "/system/series",
        {"key": "gpu/util_percent"},
        None,
    ),
    (
        "POST",
        "/api/v1/projects/{project}/views",
        "/api/v1/projects/p/views",
        {},
        {"name": "crashed", "filters": {"state": ["crashed"]}, "columns": ["loss"]},
    ),
    ("GET", "/api/v1/projects/{project}/views", "/api/v1/projects/p/views", {}, None),
    (
        "POST",
        "/api/v1/projects/{project}/reports/{report}",
        "/api/v1/projects/p/reports/weekly",
        {},
        {"title": "Weekly", "blocks": [{"id": "t", "type": "text", "text": "# Loss"}]},
    ),
    ("GET", "/api/v1/projects/{project}/reports", "/api/v1/projects/p/reports", {}, None),
    (
        "GET",
        "/api/v1/projects/{project}/reports/{report}",
        "/api/v1/projects/p/reports/weekly",
        {"version": 1},
        None,
    ),
    (
        "GET",
        "/api/v1/projects/{project}/reports/{report}/versions",
        "/api/v1/projects/p/reports/weekly/versions",
        {},
        None,
    ),
    (
        "POST",
        "/api/v1/projects/{project}/runs/search",
        "/api/v1/projects/p/runs/search",
        {},
        {"filters": {"config.lr": {"$gt": 0.01}}, "order": "+summary.loss"},
    ),
    (
        "POST",
        "/api/v1/projects/{project}/runs/{run}/edits",
        RUN + "/edits",
        {},
        {"tags": ["x"], "notes": "**bold**", "name": "renamed"},
    ),
    ("GET", "/api/v1/projects/{project}/runs/{run}/edits", RUN + "/edits", {}, None),
    (
        "POST",
        "/api/v1/projects/{project}/runs/tags",
        "/api/v1/projects/p/runs/tags",
        {},
        {"runs": ["r"], "add": ["bulk"]},
    ),
    (  # a dry run: the later cases still read run r
        "POST",
        "/api/v1/projects/{project}/runs/delete",
        "/api/v1/projects/p/runs/delete",
        {},
        {"filters": {"tags": "bulk"}, "dry_run": True},
    ),
    (
        "POST",
        "/api/v1/projects/{project}/runs/restore",
        "/api/v1/projects/p/runs/restore",
        {},
        {"runs": ["r"]},
    ),
    ("GET", "/api/v1/projects/{project}/trash", "/api/v1/projects/p/trash", {}, None),
    ("GET", "/api/v1/audit", "/api/v1/audit", {}, None),
    ("GET", "/api/v1/projects/{project}/runs/{run}/media/keys", RUN + "/media/keys", {}, None),
    (
        "GET",
        "/api/v1/projects/{project}/runs/{run}/media",
        RUN + "/media",
        {"key": "examples", "step": 2},
        None,
    ),
    (
        "GET",
        "/api/v1/projects/{project}/runs/{run}/histograms",
        RUN + "/histograms",
        {"key": "w"},
        None,
    ),
    (
        "GET",
        "/api/v1/projects/{project}/runs/{run}/tables",
        RUN + "/tables",
        {"key": "predictions", "sort": "score", "desc": "true", "limit": 20},
        None,
    ),
    ("GET", "/api/v1/ack", "/api/v1/ack", STREAM, None),
    ("GET", "/api/v1/tokens", "/api/v1/tokens", {}, None),
    ("POST", "/api/v1/tokens", "/api/v1/tokens", {}, {"role": "read", "name": "contract"}),
    ("GET", "/api/v1/session", "/api/v1/session", {}, None),
    (
        "POST",
        "/api/v1/blobs/{project}/missing",
        "/api/v1/blobs/p/missing",
        {},
        {"digests": [DIGEST, "0" * 64]},
    ),
    ("POST", "/api/v1/blobs/{project}/lost", "/api/v1/blobs/p/lost", {}, {"digests": ["1" * 64]}),
    (
        "POST",
        "/api/v1/artifacts/{project}/{artifact}/versions",
        ART + "/versions",
        {},
        {**COMMIT, "manifest": _manifest("model-2.bin"), "aliases": ["best"], "run_id": "r"},
    ),
    (
        "POST",
        "/api/v1/artifacts/{project}/{artifact}/use",
        ART + "/use",
        {},
        {"ref": "v0", "run_id": "r", "label": "rank-0"},
    ),
    ("GET", "/api/v1/artifacts/{project}", "/api/v1/artifacts/p", {"type": "model"}, None),
    ("GET", "/api/v1/artifacts/{project}/{artifact}", ART, {}, None),
    ("GET", "/api/v1/artifacts/{project}/{artifact}/{ref}", ART + "/latest", {}, None),
    ("GET", "/api/v1/runs/{project}/{run}/artifacts", "/api/v1/runs/p/r/artifacts", {}, None),
    ("GET", "/api/v1/projects/{project}/runs/{run}/alerts", RUN + "/alerts", {}, None),
    ("GET", "/api/v1/alerts/destinations", "/api/v1/alerts/destinations", {}, None),
    (
        "POST",
        "/api/v1/alerts/destinations",
        "/api/v1/alerts/destinations",
        {},
        {"project": "p", "kind": "email", "target": "ops@example.com", "events": ["failed"]},
    ),
    (
        "POST",
        "/api/v1/alerts/destinations/{dest}/test",
        "/api/v1/alerts/destinations/cfg-1/test",
        {},
        None,
    ),
]
# Routes whose success reply has no JSON body (204), or whose body is not JSON.
NO_JSON = {
    ("DELETE", "/api/v1/projects/{project}/views"),
    ("DELETE", "/api/v1/projects/{project}/reports/{report}"),
    ("DELETE", "/api/v1/tokens/{token_id}"),
    ("DELETE", "/api/v1/alerts/destinations/{dest}"),
    ("DELETE", "/api/v1/session"),
    ("POST", "/api/v1/session"),  # its body needs a live token: tested below
    ("POST", "/api/v1/ingest"),  # its body is a stream: tested below
    ("POST", "/api/v1/ingest/batch"),  # streams in MessagePack: test_ingest_batch.py
    ("PUT", "/api/v1/blobs/{project}/{digest}"),  # its body is raw bytes: tested below
    ("GET", "/api/v1/blobs/{project}/{digest}"),  # the blob's own bytes: tested below
    # an artifact file's own bytes: tested below
    ("GET", "/api/v1/artifacts/{project}/{artifact}/{ref}/files/{path:path}"),
}


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    tmp: Path = tmp_path_factory.mktemp("contract")
    store = open_store(f"sqlite:///{tmp / 'db.sqlite'}", crash_timeout=5.0)
    store.migrate()
    rng = random.Random(8)
    key = StreamId("p", "r", "rank-0", 0)
    stall = R.Stall(seq=0, time=T0 + 50, idle_seconds=20.0, where="all_reduce", stacks={"1": "x"})
    recs = steps_stream(key, 0, [T0 + i for i in range(20)], stall=stall)
    store.ingest([(key, recs)])
    con_key = StreamId("p", "r", "rank-1", 0)  # crashed: no finish, long silent
    store.ingest([(con_key, console_stream(con_key, 1, 0, 50, rng))])
    sys_key = StreamId("p", "r", "rank-2", 0)
    store.ingest([(sys_key, system_stream(sys_key, 2, 1, 10, node_sampler=True))])
    rich_key = StreamId("p", "r", "rank-3", 0)  # media and histograms
    store.ingest([(rich_key, rich_stream(rich_key, 3, 4, tables=False))])
    blobs = LocalBlobStore(tmp / "blobs")
    table_key = StreamId("p", "r", "rank-4", 0)
    table = table_record(blobs, "p", 1, 0, "predictions", predictions(300))
    store.ingest([(table_key, [start(table_key, 4, 1), table])])
    for chunk in MODEL_CHUNKS:  # an artifact version (v0) and the chunks of its file
        blobs.put("p", hashlib.sha256(chunk).hexdigest(), io.BytesIO(chunk))
    store.commit_artifact("p", "m", msgspec.convert(COMMIT, CommitRequest))
    # An alert event with one delivery, to a destination whose test fails (port 9 is shut).
    store.add_destination(
        make_destination(
            project="p",
            kind="webhook",
            target="http://127.0.0.1:9/h",
            events="nonfinite",
            allow_private=True,
            origin="config",
        )
    )
    store.replace_config_destinations(
        [msgspec.structs.replace(d, id="cfg-1") for d in store.list_destinations("p")]
    )
    nan_key = StreamId("p", "r", "rank-5", 0)
    store.ingest([(nan_key, [start(nan_key, 5, 1), R.Metrics(1, T0, 0, {"loss": float("nan")})])])
    yield create_app(store, ServerSettings(static_dir=tmp / "no-static", blobs=blobs))
    store.close()


def _routes(app: Any) -> Iterator[Any]:
    for route in app.routes:
        if hasattr(route, "effective_route_contexts"):
            yield from route.effective_route_contexts()
        elif isinstance(route, APIRoute):
            yield route


def _declared(app: Any, method: str, path: str) -> Any:
    """The model the OpenAPI document names for the route's success reply."""
    op = app.openapi()["paths"][path][method.lower()]
    ok = op["responses"].get("200") or op["responses"]["201"]
    ref = ok["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
    structs = {t.__name__: t for t in STRUCTS}
    if ref in structs:
        return structs[ref]
    for route in _routes(app):
        if route.path == path and method in route.methods:
            model = route.response_model
            assert model is not None and model.__name__ == ref, (method, path, ref)
            return model
    raise AssertionError(f"{method} {path}: no model named {ref}")


def strict_roundtrip(model: Any, raw: bytes) -> Any:
    """Decode ``raw`` as ``model`` (refusing a wrong type) and encode it back."""
    if isinstance(model, type) and issubclass(model, BaseModel):
        obj = model.model_validate_json(raw)
        return json.loads(obj.model_dump_json(by_alias=True, exclude_unset=True))
    return json.loads(msgspec.json.encode(msgspec.json.decode(raw, type=model, strict=True)))


def test_cases_cover_every_route(app: Any) -> None:
    served = {(m, r.path) for r in _routes(app) if r.path.startswith("/api/v1/") for m in r.methods}
    covered = {(m, p) for m, p, *_ in CASES} | NO_JSON
    assert served - covered == set(), "routes without a contract case"
    assert covered - served == set(), "contract cases for routes that do not exist"


@pytest.mark.parametrize(
    ("method", "route", "url", "params", "json_body"),
    CASES,
    ids=[f"{c[0]} {c[2]}{'?' + '&'.join(c[3]) if c[3] else ''}" for c in CASES],
)
def test_reply_is_exactly_its_declared_model(
    app: Any, method: str, route: str, url: str, params: dict[str, Any], json_body: Any
) -> None:
    kwargs: dict[str, Any] = {"params": params}
    if json_body is not None:
        kwargs["json"] = json_body
    r = call(app, method, url, **kwargs)
    assert r.status_code in (200, 201), r.text
    assert r.headers["content-type"].startswith("application/json")
    sent = json.loads(r.content)
    assert sent, "an empty reply proves nothing"
    assert strict_roundtrip(_declared(app, method, route), r.content) == sent


def test_ingest_reply_is_its_declared_model(app: Any) -> None:
    recs = records(steps=3, project="p", run="r", label="rank-9")
    r = call(
        app,
        "POST",
        "/api/v1/ingest",
        params=STREAM,
        content=body(recs),
        headers={"Content-Type": "application/x-rankwise-stream"},
    )
    assert r.status_code == 200, r.text
    model = _declared(app, "POST", "/api/v1/ingest")
    assert strict_roundtrip(model, r.content) == json.loads(r.content)


def test_login_reply_is_its_declared_model(app: Any) -> None:
    headers = {"X-Rankwise-CSRF": "1"}  # as the dashboard sends it
    token = {"token": admin_token(app)}
    r = call(app, "POST", "/api/v1/session", as_admin=False, headers=headers, json=token)
    assert r.status_code == 200, r.text
    model = _declared(app, "POST", "/api/v1/session")
    assert strict_roundtrip(model, r.content) == json.loads(r.content)


def test_blob_put_reply_is_its_declared_model(app: Any) -> None:
    url = f"/api/v1/blobs/p/{DIGEST}"
    for status in (201, 200):  # stored, then held already
        r = call(app, "PUT", url, content=BLOB)
        assert r.status_code == status, r.text
        model = _declared(app, "PUT", "/api/v1/blobs/{project}/{digest}")
        assert strict_roundtrip(model, r.content) == json.loads(r.content)
    r = call(app, "GET", url)
    assert r.status_code == 200 and r.content == BLOB
    assert r.headers["content-type"] == "application/octet-stream"


def test_artifact_file_is_its_bytes_as_an_attachment(app: Any) -> None:
    r = call(app, "GET", ART + "/v0/files/model.bin")
    assert r.status_code == 200, r.text
    assert r.content == MODEL
    assert r.headers["content-type"] == "application/octet-stream"
    assert r.headers["content-disposition"].startswith("attachment;")
    assert r.headers["etag"] == f'"{hashlib.sha256(MODEL).hexdigest()}"'


def test_a_reply_with_an_unknown_field_is_refused() -> None:
    """The round trip notices a field the model does not declare (it is dropped)."""
    from rankwise.wire.health import SystemReply

    raw = b'{"keys": ["node/cpu_percent"], "extra": 1}'
    assert strict_roundtrip(SystemReply, raw) != json.loads(raw)
