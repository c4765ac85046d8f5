"""The HTTP API in-process (httpx ASGITransport) over a real SQLite store."""

from __future__ import annotations

import gzip
import math
import time
from pathlib import Path

import msgspec
import pytest

from rankwise.server import ServerSettings, create_app
from rankwise.store import open_store
from rankwise.stream import records as R
from tests.helpers.env import need
from tests.helpers.servers import call
from tests.helpers.streams import body, records, start, value

PARAMS = {"project": "p", "run": "r", "label": "rank-0", "incarnation": 0}
MSGPACK = {"Accept": "application/msgpack"}


@pytest.fixture
def store(tmp_path: Path):
    s = open_store(f"sqlite:///{tmp_path / 'db.sqlite'}")
    s.migrate()
    yield s
    s.close()


@pytest.fixture
def app(store, tmp_path: Path):
    return create_app(store, ServerSettings(static_dir=tmp_path / "no-static"))


def ingest(app, data: bytes, label: str = "rank-0", run: str = "r", **headers: str):
    params = dict(PARAMS, label=label, run=run)
    return call(app, "POST", "/api/v1/ingest", params=params, content=data, headers=headers)


def test_ingest_acks_and_replays_change_nothing(app) -> None:
    recs = records(steps=10)
    assert call(app, "GET", "/api/v1/ack", params=PARAMS).json() == {"acked_seq": -1}
    r = ingest(app, body(recs[:5]))
    assert r.status_code == 200, r.text
    assert r.json() == {"acked_seq": 4}
    # The whole stream again, overlapping what is held: only the rest is applied.
    assert ingest(app, body(recs)).json() == {"acked_seq": len(recs) - 1}
    assert ingest(app, body(recs)).json() == {"acked_seq": len(recs) - 1}
    assert call(app, "GET", "/api/v1/ack", params=PARAMS).json() == {"acked_seq": len(recs) - 1}
    rows = call(app, "GET", "/api/v1/projects/p/runs/r/history").json()["rows"]
    assert [row["step"] for row in rows] == list(range(10))


def test_gap_is_409_with_the_mark(app) -> None:
    recs = records(steps=10)
    ingest(app, body(recs[:3]))
    r = ingest(app, body(recs[6:]))
    assert r.status_code == 409
    err = r.json()["error"]
    assert err["acked_seq"] == 2 and err["status"] == 409
    assert "resend from seq 3" in err["message"]
    assert ingest(app, body(recs[3:])).json()["acked_seq"] == len(recs) - 1


def test_compressed_bodies(app) -> None:
    zstandard = need("zstandard")
    recs = records(steps=6)
    r = ingest(app, gzip.compress(body(recs[:4])), **{"Content-Encoding": "gzip"})
    assert r.json() == {"acked_seq": 3}
    data = zstandard.ZstdCompressor().compress(body(recs))
    assert ingest(app, data, **{"Content-Encoding": "zstd"}).json() == {"acked_seq": 7}
    r = ingest(app, body(recs), **{"Content-Encoding": "br"})
    assert r.status_code == 415 and "gzip" in r.json()["error"]["message"]
    r = ingest(app, b"not gzip", **{"Content-Encoding": "gzip"})
    assert r.status_code == 422


def test_bad_bodies_are_422_and_apply_nothing(app) -> None:
    recs = records(steps=6)
    data = body(recs)
    torn = ingest(app, data[:-3])
    assert torn.status_code == 422 and "whole frames" in torn.json()["error"]["message"]
    assert ingest(app, b"garbage!" + data[8:]).status_code == 422
    other = records(label="rank-1", steps=2)
    r = ingest(app, body(other))  # posted as rank-0
    assert r.status_code == 422 and "posted as" in r.json()["error"]["message"]
    assert call(app, "GET", "/api/v1/ack", params=PARAMS).json() == {"acked_seq": -1}
    bad = call(app, "POST", "/api/v1/ingest", params=dict(PARAMS, run="../x"), content=data)
    assert bad.status_code == 400 and "'run'" in bad.json()["error"]["message"]
    missing = call(app, "POST", "/api/v1/ingest", params={"project": "p"}, content=data)
    assert missing.status_code == 422


def test_oversized_body_is_413(store, tmp_path: Path) -> None:
    app = create_app(store, ServerSettings(max_body_bytes=2000, static_dir=tmp_path))
    data = body(records(steps=200))
    assert len(data) > 2000
    r = ingest(app, data)
    assert r.status_code == 413 and "--max-body-mb" in r.json()["error"]["message"]
    # A small compressed body that inflates past the limit is refused too.
    bomb = gzip.compress(b"\0" * 1_000_000)
    assert len(bomb) < 2000
    assert ingest(app, bomb, **{"Content-Encoding": "gzip"}).status_code == 413


def _four_ranks(app, steps: int = 8, weight: bool = True) -> None:
    for rank in range(4):
        recs = records(
            label=f"rank-{rank}", steps=steps, weight=float(rank + 1) if weight else None
        )
        assert ingest(app, body(recs), label=f"rank-{rank}").status_code == 200


def test_reads(app) -> None:
    _four_ranks(app)
    assert call(app, "GET", "/api/v1/projects").json() == {
        "projects": [{"name": "p", "runs": 1, "updated": 1008.0}]
    }
    page = call(app, "GET", "/api/v1/projects/p/runs").json()
    assert page["total"] == 1
    run = page["runs"][0]
    assert run["id"] == "r" and run["state"] == "finished" and "streams" not in run
    assert run["n_streams"] == 4 and run["config"] == {"lr": 0.1}
    full = call(app, "GET", "/api/v1/projects/p/runs", params={"with_streams": "true"}).json()
    assert len(full["runs"][0]["streams"]) == 4
    one = call(app, "GET", "/api/v1/projects/p/runs/r").json()
    assert sorted(s["label"] for s in one["streams"]) == [f"rank-{i}" for i in range(4)]
    assert {s["rank"] for s in one["streams"]} == {0, 1, 2, 3}
    assert call(app, "GET", "/api/v1/projects/p/runs/r/metrics").json() == {"keys": ["loss"]}
    rows = call(app, "GET", "/api/v1/projects/p/runs/r/history", params={"label": "rank-2"})
    assert [r["loss"] for r in rows.json()["rows"]] == [value(2, s) for s in range(8)]


def test_runs_filters_search_sort_and_paging(app) -> None:
    for run in ("alpha", "beta", "gamma"):
        recs = records(run=run, steps=3, finish=run != "gamma")
        assert ingest(app, body(recs), run=run).status_code == 200
    get = lambda **p: call(app, "GET", "/api/v1/projects/p/runs", params=p).json()  # noqa: E731
    assert [r["id"] for r in get(sort="name")["runs"]] == ["alpha", "beta", "gamma"]
    assert [r["id"] for r in get(sort="-name", limit=2)["runs"]] == ["gamma", "beta"]
    assert [r["id"] for r in get(sort="name", limit=2, offset=2)["runs"]] == ["gamma"]
    assert get(sort="name", limit=2)["total"] == 3
    assert [r["id"] for r in get(q="ET")["runs"]] == ["beta"]
    assert {r["id"] for r in get(state="finished")["runs"]} == {"alpha", "beta"}


def test_series_band_and_msgpack_keep_nan(app) -> None:
    _four_ranks(app)
    nan = [
        R.StreamStart(0, 1.0, "p", "n", "rank-0", 0, host="elsewhere"),
        R.Metrics(1, 2.0, 0, {"x": float("nan")}),
        R.Metrics(2, 3.0, 1, {"x": math.inf}),
        R.Finish(3, 4.0, "finished"),
    ]
    assert ingest(app, body(nan), run="n").status_code == 200
    r = call(app, "GET", "/api/v1/projects/p/runs/r/series", params={"key": "loss"}).json()
    assert r["key"] == "loss" and r["x"] == "step"
    assert len(r["series"]) == 4
    band = r["band"]
    assert band["x"] == list(range(8)) and band["n"] == [4] * 8
    assert band["mean"][3] == pytest.approx(sum(value(k, 3) for k in range(4)) / 4)
    only = call(
        app,
        "GET",
        "/api/v1/projects/p/runs/r/series",
        params={"key": "loss", "streams": "rank-1,rank-3", "band": "false"},
    ).json()
    assert [s["label"] for s in only["series"]] == ["rank-1", "rank-3"] and only["band"] is None
    as_json = call(app, "GET", "/api/v1/projects/p/runs/n/series", params={"key": "x"}).json()
    assert as_json["series"][0]["y"] == [None, None]
    assert as_json["series"][0]["nonfinite"] == {"x": [0, 1], "value": ["NaN", "Infinity"]}
    assert r["series"][0]["nonfinite"] == {"x": [], "value": []}
    # A summary's NaN and ±Inf: spelled out in JSON, exact in MessagePack.
    run_json = call(app, "GET", "/api/v1/projects/p/runs/n").json()
    assert run_json["summary"] == {"x": "Infinity"}
    assert run_json["summary_ranks"] == {"rank-0": {"x": "Infinity"}}
    # summary_ranks=false (the run page's first read): the same run without them.
    lean = call(app, "GET", "/api/v1/projects/p/runs/n", params={"summary_ranks": "false"})
    assert "summary_ranks" not in lean.json()
    assert {k: v for k, v in run_json.items() if k != "summary_ranks"} == lean.json()
    listed = call(app, "GET", "/api/v1/projects/p/runs", params={"q": "n"}).json()["runs"]
    assert [x["summary"] for x in listed if x["id"] == "n"] == [{"x": "Infinity"}]
    assert all("summary_ranks" not in x for x in listed)  # one run's reply only
    packed_run = call(app, "GET", "/api/v1/projects/p/runs/n", headers=MSGPACK)
    assert msgspec.msgpack.decode(packed_run.content)["summary"] == {"x": math.inf}
    packed = call(
        app, "GET", "/api/v1/projects/p/runs/n/series", params={"key": "x"}, headers=MSGPACK
    )
    assert packed.headers["content-type"] == "application/msgpack"
    y = msgspec.msgpack.decode(packed.content)["series"][0]["y"]
    assert math.isnan(y[0]) and y[1] == math.inf
    unknown_key = call(app, "GET", "/api/v1/projects/p/runs/r/series", params={"key": "nope"})
    assert unknown_key.status_code == 200 and unknown_key.json()["series"] == []


def test_compare(app) -> None:
    _four_ranks(app)
    recs = records(run="r2", steps=4)
    ingest(app, body(recs), run="r2")
    req = {"runs": ["p/r", "p/r2"], "key": "loss", "streams": "none"}
    r = call(app, "POST", "/api/v1/compare", json=req).json()
    assert [(x["run"], x["band"]["n"][0], x["series"]) for x in r["runs"]] == [
        ("r", 4, []),
        ("r2", 1, []),
    ]
    missing = call(app, "POST", "/api/v1/compare", json=dict(req, runs=["p/r", "p/zzz"]))
    assert missing.status_code == 404 and "zzz" in missing.json()["error"]["message"]
    assert call(app, "POST", "/api/v1/compare", json=dict(req, runs=["r"])).status_code == 422
    assert call(app, "POST", "/api/v1/compare", json={"runs": []}).status_code == 422


@pytest.mark.parametrize(
    ("path", "params"),
    [
        ("/api/v1/projects/p/runs/r/series", {"key": "loss", "x": "epoch"}),
        ("/api/v1/projects/p/runs/r/series", {"key": "loss", "max_points": "1"}),
        ("/api/v1/projects/p/runs/r/series", {"key": "loss", "from": "5", "to": "1"}),
        ("/api/v1/projects/p/runs/r/series", {}),
        ("/api/v1/projects/p/runs", {"sort": "colour"}),
        ("/api/v1/projects/p/runs", {"state": "sleeping"}),
        ("/api/v1/projects/p/runs", {"limit": "0"}),
    ],
)
def test_bad_parameters_are_422_json(app, path: str, params: dict[str, str]) -> None:
    _four_ranks(app, steps=2)
    r = call(app, "GET", path, params=params)
    assert r.status_code == 422, r.text
    err = r.json()["error"]
    assert err["status"] == 422 and err["message"]


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/projects/p/runs/zzz",
        "/api/v1/projects/p/runs/zzz/metrics",
        "/api/v1/projects/p/runs/zzz/history",
        "/api/v1/projects/p/runs/zzz/series?key=loss",
        "/api/v1/projects/nope/runs",
        "/api/v1/no-such-endpoint",
        "/api/v2/projects",
    ],
)
def test_unknown_is_404_json(app, path: str) -> None:
    _four_ranks(app, steps=2)
    r = call(app, "GET", path)
    assert r.status_code == 404, r.text
    assert r.json()["error"]["message"]
    packed = call(app, "GET", path, headers=MSGPACK)
    assert msgspec.msgpack.decode(packed.content)["error"]["status"] == 404


def test_openapi_and_dashboard_slot(store, tmp_path: Path) -> None:
    app = create_app(store, ServerSettings(static_dir=tmp_path / "static"))
    spec = call(app, "GET", "/api/openapi.json").json()
    assert "/api/v1/ingest" in spec["paths"] and "/api/v1/compare" in spec["paths"]
    page = call(app, "GET", "/")
    assert page.status_code == 200 and "not been built" in page.text
    (tmp_path / "static").mkdir()
    (tmp_path / "static" / "index.html").write_text("<h1>dashboard</h1>")
    built = create_app(store, ServerSettings(static_dir=tmp_path / "static"))
    assert call(built, "GET", "/").text == "<h1>dashboard</h1>"
    assert call(built, "GET", "/api/v1/nothing").status_code == 404
    assert call(built, "GET", "/api/v1/projects").json() == {"projects": []}


def _live_rank(rank: int, steps: int, weight: float | None = None) -> list[R.AnyRecord]:
    """A running stream (recent times, no finish) of a 3-rank shared run."""
    now = time.time()
    first = start("p", "live", f"rank-{rank}", world_size=3)
    out: list[R.AnyRecord] = [msgspec.structs.replace(first, time=now - 5)]
    for step in range(steps):
        out.append(
            R.Metrics(len(out), now - 4 + 0.01 * step, step, {"loss": 10.0 * rank + step}, weight)
        )
    return out


def test_live_band_marks_steps_not_every_live_rank_reached(app) -> None:
    # Ranks 0 and 1 are at step 5, rank 2 at step 3: steps 4 and 5 average fewer ranks.
    # Rank 2's whole stream is made once: its later upload resends the same records (a
    # resend reaching the mark must hold the record the store applied there).
    rest = _live_rank(2, 6)
    for rank, recs in ((0, _live_rank(0, 6)), (1, _live_rank(1, 6)), (2, rest[:5])):
        assert ingest(app, body(recs), label=f"rank-{rank}", run="live").status_code == 200
    band = call(app, "GET", "/api/v1/projects/p/runs/live/series", params={"key": "loss"}).json()[
        "band"
    ]
    assert band["x"] == [0, 1, 2, 3, 4, 5] and band["n"] == [3, 3, 3, 3, 2, 2]
    assert band["complete_step"] == 3 and band["step"] == [0, 1, 2, 3, 4, 5]
    assert band["partial"] == [False, False, False, False, True, True]
    assert band["nw"] == [0] * 6
    # The same over x=time: partial is a property of the step, whatever the axis.
    by_time = call(
        app, "GET", "/api/v1/projects/p/runs/live/series", params={"key": "loss", "x": "time"}
    ).json()["band"]
    assert by_time["partial"] == [False, False, False, False, True, True]
    # Once the lagging rank catches up, every step is complete.
    assert ingest(app, body(rest), label="rank-2", run="live").status_code == 200
    band = call(app, "GET", "/api/v1/projects/p/runs/live/series", params={"key": "loss"}).json()[
        "band"
    ]
    assert band["complete_step"] == 5 and not any(band["partial"])


def test_finished_run_band_has_no_partial_steps(app) -> None:
    _four_ranks(app)
    band = call(app, "GET", "/api/v1/projects/p/runs/r/series", params={"key": "loss"}).json()[
        "band"
    ]
    assert band["complete_step"] is None and band["partial"] == [False] * 8
    assert band["nw"] == [4] * 8


def test_run_ranks_are_the_runs_own_beside_the_jobs(app) -> None:
    # A worker-scope run of a 4-rank job holds one stream: 1 × 1, in a job of 4.
    recs = records(label="rank-2", run="worker-2", steps=2)
    assert ingest(app, body(recs), label="rank-2", run="worker-2").status_code == 200
    run = call(app, "GET", "/api/v1/projects/p/runs/worker-2").json()
    assert (run["run_ranks"], run["run_nodes"], run["world_size"]) == (1, 1, 4)


def test_a_rank_its_sibling_saw_dead_is_crashed_on_the_server(app) -> None:
    """The server cannot see another host's processes: a surviving sibling's Finish names
    the rank it saw dead there (``peers_gone``), and the run reads crashed at once."""
    now = time.time()

    def stream(label: str, *tail: R.AnyRecord) -> bytes:
        first = msgspec.structs.replace(
            start("p", "gone", label, world_size=2, pid=4242), time=now - 3
        )
        return body([first, R.Metrics(1, now - 2, 0, {"loss": 1.0}), *tail])

    assert ingest(app, stream("rank-1"), label="rank-1", run="gone").status_code == 200
    url = "/api/v1/projects/p/runs/gone"
    # Silent for 2 s of a 60 s crash timeout, on a host the server cannot check: running.
    assert call(app, "GET", url).json()["state"] == "running"
    gloo = "[gloo/transport/tcp/pair.cc:534] Connection closed by peer [10.0.0.2]:4242"
    end = R.Finish(2, now - 1, "failed", error_type="RuntimeError", error_message=gloo,
                   peers_gone=["rank-1"])  # fmt: skip
    assert ingest(app, stream("rank-0", end), label="rank-0", run="gone").status_code == 200
    run = call(app, "GET", url).json()
    assert (run["state"], run["crashed"]) == ("crashed", ["rank-1"])
    first = run["first_failure"]
    assert (first["label"], first["state"]) == ("rank-1", "crashed")
    assert [t["label"] for t in first["then"]] == ["rank-0"]
    # The runs list (read without each stream's fold) says the same.
    (listed,) = call(app, "GET", "/api/v1/projects/p/runs").json()["runs"]
    assert (listed["id"], listed["state"], listed["crashed"]) == ("gone", "crashed", ["rank-1"])
