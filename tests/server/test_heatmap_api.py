"""``GET .../heatmap`` over HTTP, in local mode (``rankwise ui --dir`` indexing stream
files, a real process): the reply decodes to the ranks' bucket means, pages by rank, and
bad parameters get a 422 naming the bound (404 for an unknown run)."""

from __future__ import annotations

import base64
from collections.abc import Iterator

import numpy as np
import pytest

from rankwise.stream.files import stream_filename, streams_dir
from rankwise.stream.identity import StreamId
from tests.helpers.servers import ServerProcess
from tests.helpers.streams import body, make_stream
from tests.helpers.wait import wait_until

RANKS, STEPS = 8, 40
PATH = "/api/v1/projects/p/runs/r/heatmap"


def _value(rank: int, step: int) -> float:
    return 1.0 + 0.001 * step + (5.0 if rank == 6 else 0.0)  # rank 6 runs hot


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("heatmap") / "data"
    d = streams_dir(root, "p", "r")
    d.mkdir(parents=True)
    for r in range(RANKS):
        key = StreamId("p", "r", f"rank-{r}", 0)
        recs = make_stream(key, STEPS, rank=r, world=RANKS, node_rank=r // 4, local_rank=r % 4,
                           values=lambda s, r=r: {"temp": _value(r, s)})  # fmt: skip
        (d / stream_filename(key.label, 0)).write_bytes(body(recs))
    with ServerProcess.ui(root, root.parent / "server.log") as srv:
        wait_until(lambda: srv.get(PATH, params={"key": "temp"}).status_code == 200, timeout=30)
        wait_until(
            lambda: srv.get(PATH, params={"key": "temp"}).json()["total_rows"] == RANKS,
            timeout=30,
        )
        yield srv


def test_reply_holds_the_bucket_means_and_the_hot_rank_is_the_outlier(
    server: ServerProcess,
) -> None:
    got = server.get(PATH, params={"key": "temp", "buckets": 4}).json()
    # 4 buckets of 10 whole steps: hi is the end of the last one.
    assert (got["lo"], got["hi"], got["buckets"]) == (0, STEPS, 4)
    cells = np.frombuffer(base64.b64decode(got["values"]), "<f4").reshape(RANKS, 4)
    steps = np.arange(STEPS)
    col = steps // 10
    want = [[np.mean([_value(r, s) for s in steps[col == c]]) for c in range(4)]
            for r in range(RANKS)]  # fmt: skip
    np.testing.assert_allclose(cells, want, rtol=1e-6)
    np.testing.assert_allclose(got["median"], np.median(want, axis=0), rtol=1e-9)  # no gaps
    rows = got["rows"]
    assert [(x["rank"], x["node"], x["local_rank"]) for x in rows][6] == (6, 1, 2)
    assert max(rows, key=lambda x: x["score"])["rank"] == 6
    page = server.get(PATH, params={"key": "temp", "offset": 6, "limit": 5}).json()
    assert [x["label"] for x in page["rows"]] == ["rank-6", "rank-7"]
    assert page["total_rows"] == RANKS and page["offset"] == 6


@pytest.mark.parametrize(
    ("params", "word"),
    [
        ({"buckets": "0"}, "buckets"),
        ({"buckets": "2001"}, "buckets"),
        ({"limit": "1025"}, "limit"),
        ({"offset": "-1"}, "offset"),
        ({"from": "10", "to": "2"}, "from"),
        ({"x": "epoch"}, "x"),
    ],
)
def test_bad_parameters_are_422_naming_the_bound(
    server: ServerProcess, params: dict[str, str], word: str
) -> None:
    r = server.get(PATH, params={"key": "temp", **params})
    assert r.status_code == 422, r.text
    assert word in r.text


def test_unknown_run_is_404(server: ServerProcess) -> None:
    r = server.get("/api/v1/projects/p/runs/nope/heatmap", params={"key": "temp"})
    assert r.status_code == 404 and "nope" in r.text
