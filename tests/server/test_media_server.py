"""Rich data over a real uvicorn: blobs PUT and records POSTed as the uploader sends them,
then the media, histogram and table routes read back, including a 100k-row table paged,
sorted and filtered by DuckDB, and request text that tries to become SQL.

Expected values come from the records and the pyarrow table themselves (sorted and
filtered here with Python), never from the server under test.
"""

from __future__ import annotations

import hashlib
import io
import math
import statistics
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from rankwise.server import ServerSettings, create_app
from rankwise.store import open_store
from rankwise.store.blobs import LocalBlobStore
from rankwise.stream import records as R
from rankwise.stream.identity import StreamId
from tests.helpers.rich import expected_media, predictions, rich_stream
from tests.helpers.servers import bearer, serve_in_thread
from tests.helpers.streams import body
from tests.helpers.telemetry import T0, start

N = 100_000
KEY = StreamId("p", "r", "rank-0", 0)
RUN = "/api/v1/projects/p/runs/r"


class Server:
    def __init__(self, url: str, token: str, store: Any = None) -> None:
        self.client = httpx.Client(base_url=url, headers=bearer(token), timeout=60)
        self.store = store

    def get(self, path: str, **params: Any) -> httpx.Response:
        return self.client.get(RUN + path, params=params)

    def table(self, **params: Any) -> dict[str, Any]:
        r = self.get("/tables", key="predictions", **params)
        assert r.status_code == 200, r.text
        return r.json()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Any, list[Any]]]:
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    tmp: Path = tmp_path_factory.mktemp("media-server")
    store = open_store(tmp / "db.sqlite")
    store.migrate()
    app = create_app(
        store,
        ServerSettings(static_dir=tmp / "no-static", blobs=LocalBlobStore(tmp / "blobs")),
    )
    token = store.create_token("admin", None, "tests").value
    table = predictions(N, seed=3)
    buf = io.BytesIO()
    pq.write_table(table, buf, row_group_size=8192)
    data = buf.getvalue()
    digest = hashlib.sha256(data).hexdigest()
    recs: list[R.AnyRecord] = rich_stream(KEY, 0, 3, tables=False)
    recs.append(
        R.TableRec(
            seq=len(recs), time=T0 + 99, step=7, key="predictions", digest=digest,
            size=len(data), nrows=N, ncols=table.num_columns, columns=table.column_names,
            types=["int", "image", "int", "int", "bool", "str", "float"], blobs=[],
        )
    )  # fmt: skip
    with serve_in_thread(app) as url:
        srv = Server(url, token, store)
        headers = {"Content-Type": "application/x-rankwise-stream"}
        params = {"project": "p", "run": "r", "label": "rank-0", "incarnation": 0}
        # The records first: refused (409) until their blobs are stored.
        r = srv.client.post("/api/v1/ingest", params=params, content=body(recs), headers=headers)
        assert r.status_code == 409, r.text
        missing = r.json()["error"]["missing_blobs"]
        assert digest in missing
        # rich_stream's item digests are the sha256 of these texts: upload them as blobs.
        blobs = {digest: data}
        for text in (f"rank-0/{s}/{i}" for s in range(3) for i in range(3)):
            blobs[hashlib.sha256(text.encode()).hexdigest()] = text.encode()
        assert set(missing) == set(blobs)
        for d in missing:
            assert srv.client.put(f"/api/v1/blobs/p/{d}", content=blobs[d]).status_code == 201
        r = srv.client.post("/api/v1/ingest", params=params, content=body(recs), headers=headers)
        assert r.status_code == 200, r.text
        assert r.json()["acked_seq"] == len(recs) - 1
        try:
            yield srv, table, recs
        finally:
            srv.client.close()
    store.close()


def test_media_and_histograms_read_back(served: tuple[Server, Any, list[Any]]) -> None:
    srv, _, recs = served
    keys = srv.get("/media/keys").json()["keys"]
    assert [(k["key"], k["kind"]) for k in keys] == [
        ("examples", "image"),
        ("predictions", "table"),
        ("w", "histogram"),
    ]
    items = srv.get("/media", key="examples").json()["items"]
    got = [
        (i["step"], i["label"], i["index"], i["digest"], i.get("caption"), i["width"], i["height"])
        for i in items
    ]
    assert got == expected_media({KEY: recs})
    one = items[4]
    blob = srv.client.get(f"/api/v1/blobs/p/{one['digest']}")
    assert blob.status_code == 200 and blob.headers["content-type"] == "image/png"
    assert blob.headers["x-content-type-options"] == "nosniff"
    assert hashlib.sha256(blob.content).hexdigest() == one["digest"]
    series = srv.get("/histograms", key="w").json()["series"]
    hists = [r for r in recs if isinstance(r, R.HistogramRec)]
    assert series[0]["steps"] == [h.step for h in hists]
    assert series[0]["counts"] == [h.counts for h in hists]
    assert series[0]["edges"] == [h.edges for h in hists]


def _rows(table: Any) -> list[list[Any]]:
    cols = [table.column(i).to_pylist() for i in range(table.num_columns)]
    return [list(r) for r in zip(*cols)]


def _same(a: list[list[Any]], b: list[list[Any]]) -> bool:
    def norm(v: Any) -> Any:
        return None if isinstance(v, float) and math.isnan(v) else v

    return [[norm(v) for v in r] for r in a] == [[norm(v) for v in r] for r in b]


def test_a_100k_row_table_pages_sorts_and_filters(
    served: tuple[Server, Any, list[Any]],
) -> None:
    srv, table, _ = served
    rows = _rows(table)
    first = srv.table(limit=50)
    assert (first["total"], first["nrows"], first["step"], first["label"]) == (N, N, 7, "rank-0")
    assert first["columns"] == table.column_names and _same(first["rows"], rows[:50])
    deep = srv.table(offset=77_777, limit=1000)
    assert _same(deep["rows"], rows[77_777:78_777])
    # Sorted by score, descending, NULLs last, ties in file order.
    score = table.column_names.index("score")
    ranked = sorted(range(N), key=lambda i: (rows[i][score] is None, -(rows[i][score] or 0.0), i))
    page = srv.table(sort="score", desc="true", offset=100, limit=200)
    assert _same(page["rows"], [rows[i] for i in ranked[100:300]])
    tail = srv.table(sort="score", desc="true", offset=N - 10, limit=10)
    assert all(r[score] is None for r in tail["rows"])
    # Filters: a substring, a number range, a bool; total counts the matches.
    note = table.column_names.index("note")
    want = [r for r in rows if "9 odd" in r[note].lower()]
    got = srv.table(filter_col="note", filter="9 ODD", limit=1000)
    assert got["total"] == len(want) and _same(got["rows"], want[:1000])
    guess = table.column_names.index("guess")
    want = [r for r in rows if 3 <= r[guess] <= 4]
    got = srv.table(filter_col="guess", filter="3..4", sort="id", desc="true", limit=10)
    assert got["total"] == len(want) and _same(got["rows"], want[::-1][:10])
    want = [r for r in rows if r[score] is not None and r[score] > 0.99]
    got = srv.table(filter_col="score", filter=">0.99", limit=1000)
    assert got["total"] == len(want) and _same(got["rows"], want)
    correct = table.column_names.index("correct")
    got = srv.table(filter_col="correct", filter="false", limit=5)
    assert got["total"] == sum(1 for r in rows if not r[correct])


def test_request_text_never_becomes_sql(served: tuple[Server, Any, list[Any]]) -> None:
    srv, _, _ = served
    for params in (
        {"sort": 'score" DESC; DROP TABLE runs; --'},
        {"sort": "score; SELECT 1"},
        {"sort": "read_csv('/etc/passwd')"},
        {"filter_col": "id) OR (1=1", "filter": "1"},
        {"filter_col": "guess", "filter": "1 OR 1=1"},
        {"filter_col": "guess", "filter": "0); COPY (SELECT 1) TO '/tmp/x'; --"},
        {"filter": "x"},  # no filter_col
        {"limit": 1001},
        {"offset": -1},
    ):
        r = srv.get("/tables", key="predictions", **params)
        assert r.status_code == 422, (params, r.text)
    # A substring filter holding SQL is only a substring: it matches nothing, harmlessly.
    hostile = "'; DROP TABLE runs; SELECT '"
    got = srv.table(filter_col="note", filter=hostile)
    assert got["total"] == 0 and got["rows"] == []
    assert srv.table(limit=1)["total"] == N  # the store and the table are intact
    assert srv.get("/tables", key="predictions", step=3).status_code == 404
    assert srv.get("/tables", key="no such").status_code == 404
    assert srv.client.get("/api/v1/projects/p/runs/nope/media/keys").status_code == 404


def test_one_page_of_a_100k_row_table_is_fast(served: tuple[Server, Any, list[Any]]) -> None:
    """The figure for benchmarks/README.md (printed; the bound is generous for CI)."""
    srv, _, _ = served
    cases = {
        "first page": {"limit": 100},
        "page at 90k": {"offset": 90_000, "limit": 100},
        "sorted by score": {"sort": "score", "desc": "true", "limit": 100},
        "filtered substring": {"filter_col": "note", "filter": "77 odd", "limit": 100},
    }
    for name, params in cases.items():
        times = []
        for _ in range(7):
            t0 = time.perf_counter()
            srv.table(**params)
            times.append(time.perf_counter() - t0)
        med = statistics.median(times)
        print(f"100k-row table, {name}: median {med * 1000:.1f} ms over 7")
        assert med < 2.0


def test_an_oversize_table_is_refused_whole(served: tuple[Server, Any, list[Any]]) -> None:
    srv, _, recs = served
    huge = R.TableRec(
        seq=len(recs), time=T0 + 200, step=8, key="huge", digest=recs[-1].digest, size=1,
        nrows=10**7, ncols=11, columns=[f"c{i}" for i in range(11)], types=["int"] * 11,
    )  # fmt: skip
    tail = [*recs, huge]
    params = {"project": "p", "run": "r", "label": "rank-0", "incarnation": 0}
    r = srv.client.post(
        "/api/v1/ingest",
        params=params,
        content=body(tail[-1:]),
        headers={"Content-Type": "application/x-rankwise-stream"},
    )
    assert r.status_code == 413, r.text
    assert "10000000 rows x 11 columns" in r.json()["error"]["message"]
    keys = [k["key"] for k in srv.get("/media/keys").json()["keys"]]
    assert "huge" not in keys


def test_a_table_on_s3_is_paged_from_a_local_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The blob store is moto's real S3 server: the table is fetched once into the
    server's content-addressed cache (verified by digest) and paged from there."""
    import pyarrow.parquet as pq

    from rankwise.store.blobs import FsspecBlobStore
    from tests.helpers.blobs import moto_s3

    with moto_s3(monkeypatch) as endpoint:
        import boto3  # type: ignore[import-untyped]

        store = open_store(tmp_path / "db.sqlite")
        try:
            boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket="rw-tables")
            blobs = FsspecBlobStore("s3://rw-tables/blobs", endpoint=endpoint)
            table = predictions(5000, seed=9)
            buf = io.BytesIO()
            pq.write_table(table, buf)
            data = buf.getvalue()
            digest = hashlib.sha256(data).hexdigest()
            assert blobs.put("p", digest, io.BytesIO(data))
            assert blobs.local_path("p", digest) is None  # S3: no file to hand DuckDB
            store.migrate()
            rec = R.TableRec(
                seq=1, time=T0, step=0, key="predictions", digest=digest, size=len(data),
                nrows=5000, ncols=table.num_columns, columns=table.column_names,
                types=["int", "image", "int", "int", "bool", "str", "float"],
            )  # fmt: skip
            store.ingest([(KEY, [start(KEY, 0, 0), rec])])
            app = create_app(store, ServerSettings(static_dir=tmp_path / "none", blobs=blobs))
            from rankwise.server.tables import TablePager

            app.state.table_pager = TablePager(cache_dir=tmp_path / "cache")
            with serve_in_thread(app) as url:
                srv = Server(url, store.create_token("read", ["p"], "t").value)
                try:
                    got = srv.table(sort="id", desc="true", limit=3)
                    assert [r[0] for r in got["rows"]] == [4999, 4998, 4997]
                    assert got["total"] == 5000
                    cached = tmp_path / "cache" / digest[:2] / digest
                    assert cached.read_bytes() == data
                    got = srv.table(filter_col="note", filter="4321 odd")
                    assert got["total"] == 1 and got["rows"][0][0] == 4321
                finally:
                    srv.client.close()
        finally:
            store.close()


def test_a_token_of_another_project_reads_nothing(served: tuple[Server, Any, list[Any]]) -> None:
    srv, _, _ = served
    store = srv.store
    other = Server(str(srv.client.base_url), store.create_token("read", ["other"], "o").value)
    ingest = Server(str(srv.client.base_url), store.create_token("ingest", ["p"], "i").value)
    try:
        for who in (other, ingest):
            for path, params in (
                ("/media/keys", {}),
                ("/media", {"key": "examples"}),
                ("/histograms", {"key": "w"}),
                ("/tables", {"key": "predictions"}),
            ):
                assert who.get(path, **params).status_code == 403
    finally:
        other.client.close()
        ingest.client.close()
