"""``POST /api/v1/ingest/batch`` on a real uvicorn server: several streams in one request,
each part answered as ``/ingest`` answers it alone, nothing applied twice."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from rankwise import _http
from rankwise.server import ServerSettings, create_app
from rankwise.server.routes.ingest_batch import MAX_PARTS
from rankwise.store import open_store
from rankwise.store.base import Store
from rankwise.stream.identity import StreamId
from rankwise.stream.wire import BATCH_CONTENT_TYPE
from tests.helpers.servers import admin_token, bearer, serve_in_thread
from tests.helpers.streams import body, records

BATCH = "/api/v1/ingest/batch"


def part(label: str, recs: list[Any], **kw: Any) -> dict[str, Any]:
    return {"project": "p", "run": "r", "label": label, "incarnation": 0, "body": body(recs), **kw}


def post(client: httpx.Client, parts: list[dict[str, Any]], encoding: str = "identity") -> Any:
    data = _http.compress(msgspec.msgpack.encode({"parts": parts}), encoding)
    headers = {"Content-Type": BATCH_CONTENT_TYPE}
    if encoding != "identity":
        headers["Content-Encoding"] = encoding
    return client.post(BATCH, content=data, headers=headers)


@pytest.fixture
def served(tmp_path: Path) -> Any:
    store = open_store(f"sqlite:///{tmp_path / 'server.db'}")
    store.migrate()
    app = create_app(store, ServerSettings())
    with (
        serve_in_thread(app) as url,
        httpx.Client(base_url=url, headers=bearer(admin_token(app))) as client,
    ):
        yield store, client
    store.close()


def loss_steps(store: Store, label: str) -> list[int]:
    return [r["step"] for r in store.history("p", "r", keys=["loss"], label=label)]


def test_a_batch_applies_each_stream_once_and_answers_each_mark(served: Any) -> None:
    store, client = served
    whole = {f"rank-{r}": records(f"rank-{r}", steps=30) for r in range(4)}
    # The first half of each stream, then everything again: the resend is a replay.
    first = post(client, [part(lab, recs[:15]) for lab, recs in whole.items()], "zstd")
    assert first.status_code == 200, first.text
    assert [p["acked_seq"] for p in first.json()["parts"]] == [14] * 4
    again = post(client, [part(lab, recs) for lab, recs in whole.items()], "gzip")
    assert again.status_code == 200, again.text
    last = len(whole["rank-0"]) - 1
    assert [p["acked_seq"] for p in again.json()["parts"]] == [last] * 4
    for lab in whole:
        assert store.acked(StreamId("p", "r", lab, 0)) == last
        assert loss_steps(store, lab) == list(range(30))
        assert store.stored_points("p", "r")[(lab, "loss")] == 30  # each point once


def test_a_refused_part_is_answered_in_its_slot_and_the_others_land(served: Any) -> None:
    store, client = served
    good = records("rank-0", steps=5)
    gap = records("rank-1", steps=5)[3:]  # starts above the mark: 409 with the mark
    other = records("rank-2", steps=5)
    reply = post(
        client,
        [part("rank-0", good), part("rank-1", gap), part("rank-2", other, project="q")],
    )
    assert reply.status_code == 200, reply.text
    parts = reply.json()["parts"]
    assert parts[0] == {"acked_seq": len(good) - 1}
    assert parts[1]["error"]["status"] == 409 and parts[1]["error"]["acked_seq"] == -1
    # The body's stream start names project p, the part says q: refused as /ingest does.
    assert parts[2]["error"]["status"] == 422, parts[2]
    assert loss_steps(store, "rank-0") == list(range(5))
    assert store.acked(StreamId("p", "r", "rank-1", 0)) == -1


def test_a_part_without_its_streams_secret_is_refused_alone(served: Any) -> None:
    store, client = served
    from tests.helpers.streams import start

    bound = records("rank-0", steps=3)
    bound[0] = start(key_digest=_digest("s3cret"))
    first = post(client, [part("rank-0", bound[:2], key="s3cret")])
    assert first.json()["parts"] == [{"acked_seq": 1}]
    wrong = post(client, [part("rank-0", bound, key="guess"), part("rank-1", records("rank-1"))])
    answered = wrong.json()["parts"]
    assert answered[0]["error"]["status"] == 403 and answered[0]["error"]["stream_key"] is True
    assert "acked_seq" in answered[1]
    assert store.acked(StreamId("p", "r", "rank-0", 0)) == 1


def _digest(secret: str) -> str:
    from rankwise.stream import streamkey

    return streamkey.digest(secret)


@pytest.mark.parametrize(
    ("parts", "says"),
    [
        ("twice", "twice"),
        ("too many", f"at most {MAX_PARTS}"),
        ("bad id", "not an id"),
        ("not msgpack", "not an IngestBatch"),
    ],
)
def test_a_malformed_batch_is_refused_whole(served: Any, parts: str, says: str) -> None:
    store, client = served
    recs = records("rank-0", steps=2)
    if parts == "twice":
        reply = post(client, [part("rank-0", recs), part("rank-0", recs)])
    elif parts == "too many":
        reply = post(client, [part(f"rank-{i}", recs) for i in range(MAX_PARTS + 1)])
    elif parts == "bad id":
        reply = post(client, [part("../etc", recs)])
    else:
        reply = client.post(BATCH, content=b"\xc1not", headers={"Content-Type": BATCH_CONTENT_TYPE})
    assert reply.status_code == 422, reply.text
    assert says in reply.json()["error"]["message"]
    assert store.acked(StreamId("p", "r", "rank-0", 0)) == -1


def test_what_a_batch_adds_in_all_is_bounded_as_one_upload(
    served: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A part that would take the request past one upload's console lines or series is
    refused (413, its uploader halves it); the parts before it land."""
    from rankwise.server.routes import ingest_batch
    from rankwise.stream import records as R
    from tests.helpers.streams import start

    store, client = served
    monkeypatch.setattr(ingest_batch, "MAX_LINES", 5)
    monkeypatch.setattr(ingest_batch, "MAX_SERIES", 3)

    def talky(label: str) -> list[R.AnyRecord]:
        return [start(label=label), R.Console(1, 1.0, "stdout", ["a", "b", "c"], [1.0] * 3)]

    reply = post(client, [part("rank-0", talky("rank-0")), part("rank-1", talky("rank-1"))])
    first, second = reply.json()["parts"]
    assert first == {"acked_seq": 1}
    assert second["error"]["status"] == 413 and "console lines" in second["error"]["message"]
    assert store.acked(StreamId("p", "r", "rank-1", 0)) == -1

    def wide(label: str) -> list[R.AnyRecord]:
        return [start(label=label), R.Metrics(1, 1.0, 0, {"a": 1.0, "b": 2.0})]

    reply = post(client, [part("rank-2", wide("rank-2")), part("rank-3", wide("rank-3"))])
    assert [p.get("acked_seq") for p in reply.json()["parts"]] == [1, None]
    # Alone, the refused part fits: the SDK's uploader sends it in a smaller batch.
    assert post(client, [part("rank-3", wide("rank-3"))]).json()["parts"] == [{"acked_seq": 1}]


def test_a_read_token_cannot_post_a_batch(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'server.db'}")
    store.migrate()
    app = create_app(store, ServerSettings())
    read = store.create_token("read", ["p"], "tests").value
    ingest_q = store.create_token("ingest", ["q"], "tests").value
    with serve_in_thread(app) as url:
        with httpx.Client(base_url=url, headers=bearer(read)) as client:
            assert post(client, [part("rank-0", records())]).status_code == 403
        with httpx.Client(base_url=url, headers=bearer(ingest_q)) as client:
            # An ingest token of another project: the part is refused, nothing applied.
            reply = post(client, [part("rank-0", records())])
            assert reply.status_code == 200
            assert reply.json()["parts"][0]["error"]["status"] == 403
    assert store.acked(StreamId("p", "r", "rank-0", 0)) == -1
    store.close()
