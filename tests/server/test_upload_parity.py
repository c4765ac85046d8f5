"""A server and ``rankwise ui`` accept exactly the same records (``server/upload.py``).

Each case is a good stream start and step, then a bad chunk of one kind. The server (a
real uvicorn over the real app) takes the good upload and refuses the bad one with an
HTTP status, nothing of it applied; the local indexer (``DirectoryTailer`` over the same
bytes in a run folder) indexes the good chunk, then skips the bad one for good with one
warning that carries the server's own message. A blob nobody holds is the one
difference by design, and it ends the same: the server asks for it (409
``missing_blobs``) and applies the record once its uploader declares it lost; the run
folders' view counts it lost at once.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from rankwise.budget import MAX_KEYS_PER_RECORD
from rankwise.server import ServerSettings, create_app
from rankwise.server.indexer import DirectoryTailer
from rankwise.server.upload import Limits
from rankwise.store import open_store
from rankwise.store.base import Store
from rankwise.stream import records as R
from rankwise.stream.blobs import digest_of, write_blob
from rankwise.stream.frames import MAGIC, encode_frame
from rankwise.stream.identity import StreamId
from rankwise.stream.wire import STREAM_CONTENT_TYPE
from tests.helpers.env import need
from tests.helpers.rich import digest
from tests.helpers.servers import admin_token, bearer, serve_in_thread
from tests.helpers.streams import start

LIMITS = Limits(max_keys_per_run=50, max_table_cells=1000)
T = 1000.0


def _item(**kw: Any) -> R.MediaItem:
    fields: dict[str, Any] = {"kind": "image", "digest": digest("img"), "size": 1, "format": "png"}
    return R.MediaItem(**{**fields, **kw})


def _table(nrows: int, ncols: int = 1, d: str | None = None) -> Callable[[int], R.TableRec]:
    return lambda seq: R.TableRec(
        seq, T, 1, "tbl", d or digest("tbl"), 10, nrows, ncols, ["c"] * ncols, ["int"] * ncols
    )


# name -> (the bad chunk's records from its first seq, the status a server answers)
BAD: dict[str, tuple[Callable[[int], list[R.AnyRecord]], int]] = {
    "metric key breaks the key rule": (
        lambda s: [R.Metrics(s, T, 1, {" loss": 1.0})],
        422,
    ),
    "keys past the run's cap, NaN values": (
        lambda s: [R.Metrics(s, T, 1, {f"k{i}": float("nan") for i in range(60)})],
        413,
    ),
    "keys past one record's cap": (
        lambda s: [R.Metrics(s, T, 1, {f"k{i}": 1.0 for i in range(MAX_KEYS_PER_RECORD + 1)})],
        413,
    ),
    "media of an unknown kind": (
        lambda s: [R.Media(s, T, 1, "m", [_item(kind="svg", format="svg")])],
        422,
    ),
    "media digest not sha256": (
        lambda s: [R.Media(s, T, 1, "m", [_item(digest="../../etc/passwd")])],
        422,
    ),
    "media key with NUL": (
        lambda s: [R.Media(s, T, 1, "m\x00", [_item()])],
        422,
    ),
    "histogram edges do not fit": (
        lambda s: [R.HistogramRec(s, T, 1, "h", [1.0, 2.0], [0.0, 1.0])],
        422,
    ),
    "table over the cell cap": (lambda s: [_table(nrows=2000)(s)], 413),
    "finish in no state": (lambda s: [R.Finish(s, T, "bogus")], 422),
    "console line flood": (
        lambda s: [R.Console(s, T, "stdout", ["x"] * 10_001, [T] * 10_001)],
        413,
    ),
    "config update over the element budget": (
        lambda s: [R.ConfigUpdate(s, T, {"big": list(range(10_001))})],
        413,
    ),
    "seqs not consecutive": (
        lambda s: [R.Metrics(s, T, 1, {"loss": 1.0}), R.Metrics(s + 2, T, 2, {"loss": 2.0})],
        422,
    ),
}


@dataclass
class Server:
    url: str
    store: Store
    headers: dict[str, str]

    def post(self, key: StreamId, recs: list[R.AnyRecord]) -> httpx.Response:
        params = {"project": key.project, "run": key.run_id, "label": key.label}
        return httpx.post(
            f"{self.url}/api/v1/ingest",
            params={**params, "incarnation": key.incarnation},
            content=MAGIC + encode_frame(recs),
            headers={**self.headers, "Content-Type": STREAM_CONTENT_TYPE},
        )


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    store = open_store(f"sqlite:///{tmp_path_factory.mktemp('server') / 'server.db'}")
    store.migrate()
    settings = ServerSettings(
        max_keys_per_run=LIMITS.max_keys_per_run, max_table_cells=LIMITS.max_table_cells
    )
    app = create_app(store, settings)
    try:
        with serve_in_thread(app) as url:
            yield Server(url, store, bearer(admin_token(app)))
    finally:
        store.close()


class Local:
    """A data directory, its index and its tailer, as ``rankwise ui`` builds them."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.store = open_store(f"sqlite:///{root / 'index.db'}")
        self.store.migrate()
        self.tailer = DirectoryTailer(root / "data", self.store, discover_interval=0, limits=LIMITS)

    def run_dir(self, key: StreamId) -> Path:
        return self.root / "data" / key.project / key.run_id

    def append(self, key: StreamId, recs: list[R.AnyRecord]) -> int:
        path = self.run_dir(key) / "streams" / f"{key.label}.{key.incarnation}.rwlog"
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "ab") as f:
            f.write((b"" if path.stat().st_size else MAGIC) + encode_frame(recs))
        return self.tailer.poll()


@pytest.fixture
def local(tmp_path: Path) -> Iterator[Local]:
    it = Local(tmp_path)
    yield it
    it.store.close()


def _good(key: StreamId) -> list[R.AnyRecord]:
    return [start(key.project, key.run_id, key.label), R.Metrics(1, T, 0, {"loss": 0.5})]


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "not indexed" in r.getMessage()]


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_chunk_is_refused_by_the_server_and_skipped_by_the_indexer(
    case: str, server: Server, local: Local, caplog: pytest.LogCaptureFixture
) -> None:
    make, status = BAD[case]
    key = StreamId("p", "parity-" + str(sorted(BAD).index(case)), "rank-0", 0)
    good, bad = _good(key), make(2)

    assert server.post(key, good).status_code == 200
    refused = server.post(key, bad)
    assert refused.status_code == status, refused.text
    message = refused.json()["error"]["message"]
    assert server.store.acked(key) == 1  # nothing of the bad chunk applied

    with caplog.at_level(logging.WARNING, logger="rankwise.server"):
        assert local.append(key, good) == 2
        assert local.append(key, bad) == 0
        assert local.store.acked(key) == 1
        # Skipped for good: a later good record of the file is not indexed either.
        assert local.append(key, [R.Metrics(bad[-1].seq + 1, T, 9, {"loss": 0.1})]) == 0
    assert local.store.acked(key) == 1
    assert _warnings(caplog) == [_warnings(caplog)[0]]  # warned once
    assert message in _warnings(caplog)[0]


def test_a_good_chunk_is_applied_by_both(server: Server, local: Local) -> None:
    """The control: rich records within every cap, their blobs held."""
    key = StreamId("p", "parity-good", "rank-0", 0)
    png = b"\x89PNG fake image bytes"
    d = digest_of(png)
    assert httpx.put(
        f"{server.url}/api/v1/blobs/p/{d}", content=png, headers=server.headers
    ).is_success
    write_blob(local.run_dir(key), png)
    rich: list[R.AnyRecord] = [
        R.Media(2, T, 1, "m", [_item(digest=d, size=len(png))]),
        R.HistogramRec(3, T, 1, "h", [1.0, 2.0], [0.0, 1.0, 2.0]),
        R.Metrics(4, T, 1, {f"k{i}": float("nan") for i in range(40)}),
        R.Finish(5, T, "finished"),
    ]
    assert server.post(key, _good(key)).status_code == 200
    assert server.post(key, rich).json()["acked_seq"] == 5
    assert local.append(key, _good(key)) == 2
    assert local.append(key, rich) == 4
    assert local.store.acked(key) == server.store.acked(key) == 5


def test_a_table_whose_file_disagrees_with_its_record(server: Server, local: Local) -> None:
    """The footer check reads the blob each side holds: the server's blob store, the
    run folder's blob."""
    pa = need("pyarrow")
    pq = need("pyarrow.parquet")
    out = io.BytesIO()
    pq.write_table(pa.table({"c": list(range(5))}), out)
    data = out.getvalue()
    d = digest_of(data)
    key = StreamId("p", "parity-table", "rank-0", 0)
    assert httpx.put(
        f"{server.url}/api/v1/blobs/p/{d}", content=data, headers=server.headers
    ).is_success
    write_blob(local.run_dir(key), data)
    says_ten = [_table(nrows=10, d=d)(2)]

    assert server.post(key, _good(key)).status_code == 200
    refused = server.post(key, says_ten)
    assert refused.status_code == 422, refused.text
    assert "holds 5 rows but its record says 10" in refused.json()["error"]["message"]
    assert local.append(key, _good(key)) == 2
    assert local.append(key, says_ten) == 0
    assert local.store.acked(key) == server.store.acked(key) == 1


def test_a_blob_nobody_holds_is_applied_once_declared_lost(server: Server, local: Local) -> None:
    key = StreamId("p", "parity-lost", "rank-0", 0)
    gone = digest("deleted with the run's blobs folder")
    media: list[R.AnyRecord] = [R.Media(2, T, 1, "m", [_item(digest=gone)])]

    assert server.post(key, _good(key)).status_code == 200
    asked = server.post(key, media)
    assert asked.status_code == 409
    assert asked.json()["error"]["missing_blobs"] == [gone]
    declared = httpx.post(
        f"{server.url}/api/v1/blobs/p/lost", json={"digests": [gone]}, headers=server.headers
    )
    assert declared.is_success, declared.text
    assert server.post(key, media).json()["acked_seq"] == 2

    assert local.append(key, _good(key)) == 2
    assert local.append(key, media) == 1  # the run folder lacks it: lost, not waited for
    assert local.store.acked(key) == server.store.acked(key) == 2
    assert local.store.media_keys("p", key.run_id) == server.store.media_keys("p", key.run_id)


def test_the_server_loads_no_http_client_for_the_wire_names() -> None:
    """The header names live in ``rankwise.stream.wire``: the app, its ingest route and
    the indexer load neither the client's seam (``rankwise._http``) nor httpx."""
    import subprocess
    import sys

    probe = (
        "import sys, rankwise.server.app, rankwise.server.indexer; "
        "print(sorted(m for m in ('httpx', 'rankwise._http') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
