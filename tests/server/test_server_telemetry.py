"""The rank health endpoints (console, system, health, stalls) in-process through httpx's
``ASGITransport``, over SQLite and PostgreSQL; and ``Api(server=).health()`` against a
real uvicorn, equal to ``Api(dir=).health()`` over the same records."""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

import rankwise
from rankwise.server import ServerSettings, create_app
from rankwise.store import open_store
from rankwise.store.base import Store
from rankwise.stream import records as R
from rankwise.stream.identity import StreamId
from tests.helpers.servers import call, serve_in_thread
from tests.helpers.telemetry import console_stream, expected_lines, steps_stream, system_stream

RUN = "/api/v1/projects/p/runs"


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "sqlite":
        s = open_store(f"sqlite:///{tmp_path / 'db.sqlite'}", crash_timeout=5.0)
    else:
        s = open_store(request.getfixturevalue("pg_dsn"), crash_timeout=5.0)
    s.migrate()
    yield s
    s.close()


@pytest.fixture
def app(store: Store, tmp_path: Path) -> Any:
    return create_app(store, ServerSettings(static_dir=tmp_path / "no-static"))


def get(app: Any, url: str, status: int = 200, **params: Any) -> Any:
    r = call(app, "GET", url, params=params)
    assert r.status_code == status, r.text
    return r.json()


def dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    return int(proc.stdout)


def health_streams(now: float) -> dict[StreamId, list[R.AnyRecord]]:
    """Four live ranks ending at ``now``: steady, steady, a straggler, one stalled in
    all_reduce; and a fifth whose process is gone (crashed)."""
    keys = [StreamId("p", "h", f"rank-{i}", 0) for i in range(5)]
    t0 = now - 300
    stall = R.Stall(
        seq=0,
        time=now - 5,
        idle_seconds=115,
        where="all_reduce at train.py:88",
        stacks={"MainThread": 'File "train.py", line 88, in step\n  dist.all_reduce(t)'},
    )
    streams = {
        keys[0]: steps_stream(keys[0], 0, [t0 + s for s in range(300)]),
        keys[1]: steps_stream(keys[1], 1, [t0 + s for s in range(300)], node=1),
        keys[2]: steps_stream(keys[2], 2, [t0 + s * 2.5 for s in range(120)]),  # straggler
        keys[3]: steps_stream(keys[3], 3, [t0 + s for s in range(180)], stall, node=1),
        keys[4]: steps_stream(keys[4], 4, [t0 + s for s in range(100)]),
    }
    me, gone = os.getpid(), dead_pid()
    for i, recs in enumerate(streams.values()):
        first = recs[0]
        assert isinstance(first, R.StreamStart)
        recs[0] = msgspec.structs.replace(
            first, host=socket.gethostname(), pid=me if i < 4 else gone, world_size=5
        )
        recs[-1] = msgspec.structs.replace(recs[-1], time=now - 1.0 if i < 4 else now - 200)
    return streams


def test_console_endpoint(app: Any, store: Store) -> None:
    rng = random.Random(11)
    keys = [StreamId("p", "c", f"rank-{i}", 0) for i in range(4)]
    streams = {k: console_stream(k, i, i // 2, 300, rng) for i, k in enumerate(keys)}
    xss = StreamId("p", "c", "rank-0", 0)
    for k, recs in streams.items():
        store.ingest([(k, recs)])
    streams[xss].append(
        R.Console(
            seq=len(streams[xss]),
            time=1e10,
            stream="stderr",
            lines=["<img src=x onerror=alert(1)>"],
            times=[1e10],
        )
    )
    store.ingest([(xss, streams[xss][-1:])])
    want = expected_lines(streams)
    url = f"{RUN}/c/console"

    tail = get(app, url, limit=5)
    assert [ln["text"] for ln in tail["lines"]] == [w[3] for w in want[-5:]]
    assert tail["lines"][-1] == {
        "id": tail["lines"][-1]["id"], "label": "rank-0", "rank": 0, "node": 0,
        "stream": "stderr", "time": 1e10, "text": "<img src=x onerror=alert(1)>",
    }  # fmt: skip
    assert (tail["total"], tail["offset"]) == (1201, 1196)
    # Filters as query parameters; label and node repeat.
    params = [("label", "rank-1"), ("label", "rank-2"), ("stream", "stdout"), ("limit", "1000")]
    page = call(app, "GET", url, params=params).json()
    expect = [w for w in want if w[0] in ("rank-1", "rank-2") and w[1] == "stdout"]
    assert [(ln["label"], ln["text"]) for ln in page["lines"]] == [(w[0], w[3]) for w in expect]
    assert page["total"] == len(expect)
    page = call(app, "GET", url, params=[("node", "1"), ("q", "nccl"), ("limit", "1000")]).json()
    expect = [w for w in want if w[0] in ("rank-2", "rank-3") and "NCCL" in w[3]]
    assert [ln["text"] for ln in page["lines"]] == [w[3] for w in expect]
    # A time range, with a search inside it.
    lo, hi = want[200][2], want[400][2]
    page = get(app, url, limit=1000, q="loss", **{"from": lo, "to": hi})
    expect = [w for w in want[200:401] if "loss" in w[3]]
    assert [ln["text"] for ln in page["lines"]] == [w[3] for w in expect]
    assert page["total"] == len(expect) > 0
    get(app, url, 422, **{"from": hi, "to": lo})
    # Positions: offset, at a time, after and before a line; count=false counts nothing.
    page = get(app, url, offset=100, limit=3, count="false")
    assert [ln["text"] for ln in page["lines"]] == [w[3] for w in want[100:103]]
    assert page["total"] is None and page["offset"] == 100
    page = get(app, url, at=want[500][2], limit=2)
    assert page["offset"] == 500 and [ln["text"] for ln in page["lines"]] == [
        want[500][3],
        want[501][3],
    ]
    after = get(app, url, after=page["lines"][0]["id"], limit=1)
    assert after["offset"] == 501 and after["lines"][0]["text"] == want[501][3]
    before = get(app, url, before=page["lines"][0]["id"], limit=2)
    assert before["offset"] == 498 and [ln["text"] for ln in before["lines"]] == [
        want[498][3],
        want[499][3],
    ]

    assert "offset, at" in get(app, url, 422, offset=1, at=5.0)["error"]["message"]
    get(app, url, 422, stream="stdin")
    get(app, url, 422, limit=0)
    assert "no console line" in get(app, url, 422, after=10**12)["error"]["message"]
    assert (
        get(app, f"{RUN}/nope/console", 404)["error"]["message"] == "no run 'nope' in project 'p'"
    )


def test_system_endpoints(app: Any, store: Store) -> None:
    keys = [StreamId("p", "s", f"rank-{i}", 0) for i in range(4)]
    streams = {
        k: system_stream(k, i, i // 2, 40, node_sampler=i % 2 == 0) for i, k in enumerate(keys)
    }
    for k, recs in streams.items():
        store.ingest([(k, recs)])
    assert get(app, f"{RUN}/s/system") == {
        "keys": ["gpu/util_percent", "node/cpu_percent", "node/net_sent_bytes_per_s",
                 "proc/cpu_percent", "proc/rss_bytes"]
    }  # fmt: skip
    # System keys are not metrics: the charts tab never lists them.
    assert get(app, f"{RUN}/s/metrics") == {"keys": ["loss"]}
    got = get(app, f"{RUN}/s/system/series", key="gpu/util_percent")
    assert got["key"] == "gpu/util_percent"
    assert [(s["name"], s["key"], s["host"], s["gpu"]) for s in got["series"]] == [
        ("node 0 · gpu 0", "gpu/0/util_percent", "node0", 0),
        ("node 0 · gpu 1", "gpu/1/util_percent", "node0", 1),
        ("node 1 · gpu 0", "gpu/0/util_percent", "node1", 0),
        ("node 1 · gpu 1", "gpu/1/util_percent", "node1", 1),
    ]
    recs = streams[keys[2]]
    want = [(r.time, r.values["gpu/1/util_percent"]) for r in recs if type(r) is R.System]
    line = got["series"][3]
    assert list(zip(line["x"], line["y"])) == want and line["downsampled"] is False
    small = get(app, f"{RUN}/s/system/series", key="proc/rss_bytes", max_points=8)
    assert [s["name"] for s in small["series"]] == ["rank 0", "rank 1", "rank 2", "rank 3"]
    assert all(len(s["x"]) <= 8 and s["downsampled"] for s in small["series"])
    assert get(app, f"{RUN}/s/system/series", key="gpu/none") == {"key": "gpu/none", "series": []}
    get(app, f"{RUN}/s/system/series", 422, key="node/cpu_percent", **{"from": 5, "to": 1})
    get(app, f"{RUN}/nope/system", 404)
    get(app, f"{RUN}/nope/system/series", 404, key="node/cpu_percent")


def test_health_and_stalls_endpoints(app: Any, store: Store) -> None:
    now = time.time()
    streams = health_streams(now)
    for k, recs in streams.items():
        for a in range(0, len(recs), 97):
            store.ingest([(k, recs[a : a + 97])])
    h = get(app, f"{RUN}/h/health")
    assert h["state"] == "crashed" and h["crashed"] == ["rank-4"]
    # A run that is not running is assessed at its last record (rankwise.health).
    last = max(r.time for recs in streams.values() for r in recs)
    assert h["now"] == last and (h["window"], h["factor"]) == (60.0, 1.25)
    ranks = {r["label"]: r for r in h["ranks"]}
    assert [r["label"] for r in h["ranks"]] == [f"rank-{i}" for i in range(5)]
    assert ranks["rank-4"]["state"] == "crashed" and ranks["rank-0"]["state"] == "running"
    assert ranks["rank-2"]["slow"] and not ranks["rank-0"]["slow"] and not ranks["rank-1"]["slow"]
    assert ranks["rank-2"]["lag_steps"] == 179 - 119 and ranks["rank-0"][
        "step_rate"
    ] == pytest.approx(1.0, abs=0.05)
    assert ranks["rank-1"]["node"] == 1 and ranks["rank-1"]["host"] == socket.gethostname()
    stalled = ranks["rank-3"]
    assert stalled["stalled"] and stalled["stall"]["where"] == "all_reduce at train.py:88"
    assert stalled["stall"]["since"] == pytest.approx(now - 120)
    assert "stacks" not in stalled["stall"]  # one click away: stacks=true
    assert stalled["message"].startswith("rank 3 stalled for 2 min in all_reduce at train.py:88")
    assert ranks["rank-2"]["message"].startswith("rank 2 is slow")
    full = get(app, f"{RUN}/h/health", stacks="true", window=30, factor=3)
    assert full["ranks"][3]["stall"]["stacks"]["MainThread"].endswith("dist.all_reduce(t)")
    assert not full["ranks"][2]["slow"]  # 2.5x slower is not 3x slower
    st = get(app, f"{RUN}/h/stalls")["stalls"]
    assert [(e["label"], e["where"], e["cleared"], e["idle_seconds"]) for e in st] == [
        ("rank-3", "all_reduce at train.py:88", False, 115.0)
    ]
    assert get(app, f"{RUN}/h/stalls", label="rank-0") == {"stalls": []}
    get(app, f"{RUN}/h/health", 422, window=0)
    get(app, f"{RUN}/h/health", 422, factor=0.5)
    get(app, f"{RUN}/nope/health", 404)
    get(app, f"{RUN}/nope/stalls", 404)


def test_remote_health_equals_local(tmp_path: Path) -> None:
    """``Api(server=)`` and ``Api(dir=)`` over the same records tell the same health."""
    from tests.helpers.telemetry import write_stream_file

    now = time.time()
    streams = health_streams(now)
    root = tmp_path / "data"
    for k, recs in streams.items():
        write_stream_file(root, k, recs)
    with open_store(tmp_path / "db.sqlite", crash_timeout=5.0) as store:
        store.migrate()
        store.ingest(list(streams.items()))
        app = create_app(store, ServerSettings(static_dir=tmp_path / "no-static"))
        with serve_in_thread(app) as url:
            remote = rankwise.Api(server=url).run("h", project="p")
            local = rankwise.Api(root, crash_timeout=5.0).run("h", project="p")
            assert remote.state == local.state == "crashed"
            for at in (now, now - 100, None):
                for window in (60.0, 20.0):
                    # at=None: the run ended (crashed), so both assess at its last record.
                    assert remote.health(window=window, now=at) == local.health(window, now=at)
            slow = [h.label for h in remote.health() if h.slow]
            assert slow == ["rank-2", "rank-3"]  # the stalled rank makes no progress at all
            (stalled,) = [h for h in remote.health() if h.stalled]
            assert stalled.stacks == local.health()[3].stacks != {}
