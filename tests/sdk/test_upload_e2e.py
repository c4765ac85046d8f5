"""Remote mode end to end: the SDK uploading to a real uvicorn, through outages.

Nothing is mocked: servers are ``rankwise server`` processes (or uvicorn in a thread) on
loopback ports, over a real SQLite store, and an outage is a SIGKILL.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest

import rankwise
from rankwise.server import create_app
from rankwise.store import open_store
from tests.helpers.runs import assert_same_history, launch_ranks, sync_cli, wait_all
from tests.helpers.servers import ServerProcess, free_port, serve_in_thread
from tests.helpers.wait import wait_until


@pytest.fixture
def thread_server(tmp_path: Path):
    store = open_store(f"sqlite:///{tmp_path / 'server.db'}")
    store.migrate()
    with serve_in_thread(create_app(store)) as url:
        yield url
    store.close()


def test_remote_run_reads_back_like_the_local_one(
    data_dir: Path, thread_server: str, tmp_path: Path
) -> None:
    settings = {"flush_interval": 0.02, "upload_interval": 0.05, "upload_timeout": 10}
    run = rankwise.init(
        project="e2e",
        server=thread_server,
        config={"lr": 0.1, "layers": [1, 2]},
        tags=["a", "b"],
        group="g",
        settings=settings,
    )
    for step in range(50):
        run.log({"loss": 1.0 / (step + 1), "odd": math.nan if step % 7 == 0 else step})
    run.log({"inf": math.inf}, step=49, weight=2.0)
    run.config["late"] = "yes"
    run.summary["best"] = 0.5
    run.finish()
    local = rankwise.Api(dir=data_dir).run(run.id)
    remote = rankwise.Api(server=thread_server).run(run.id)
    assert isinstance(remote, rankwise.api.RunInfo)
    assert remote.config == local.config == {"lr": 0.1, "layers": [1, 2], "late": "yes"}
    assert remote.summary["best"] == 0.5 and remote.summary["inf"] == math.inf
    assert math.isnan(remote.summary["odd"]) is math.isnan(local.summary["odd"])
    for name in ("project", "id", "name", "group", "tags", "state", "world_size", "steps"):
        assert getattr(remote, name) == getattr(local, name), name
    assert remote.state == "finished"
    [rs], [ls] = remote.streams, local.streams
    for name in ("label", "incarnation", "rank", "state", "last_step", "points", "exit_code"):
        assert getattr(rs, name) == getattr(ls, name), name
    assert_same_history(local, remote, f"sqlite:///{tmp_path / 'server.db'}")
    assert remote.history(keys=["inf"]) == [
        {
            "step": 49,
            "time": local.history(keys=["inf"])[0]["time"],
            "label": "rank-0",
            "weight": 2.0,
            "inf": math.inf,
        }
    ]
    assert remote.metric_keys == local.metric_keys == ["inf", "loss", "odd"]
    assert len(remote.history_df(keys="loss")) == 50 if _has_pandas() else True
    if _has_pandas():  # scan() gives the same arrays from either reader (numpy via pandas)
        import numpy as np

        for key in ("loss", "odd", "inf"):
            lc, rc = local.scan([key])["rank-0"], remote.scan([key])["rank-0"]
            assert lc.step.tolist() == rc.step.tolist()
            assert np.array_equal(lc[key], rc[key], equal_nan=True), key


def _has_pandas() -> bool:
    try:
        import pandas  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.slow
def test_sigkill_and_restart_lose_and_double_nothing(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    db = f"sqlite:///{tmp_path / 'server.db'}"
    server = ServerProcess.db(db, tmp_path / "server.log").start()
    progress = tmp_path / "progress"
    try:
        procs = launch_ranks(
            data,
            "killed",
            2,
            "--steps",
            "60",
            "--sleep",
            "0.03",
            "--progress",
            str(progress),
            server=server.url,
        )
        wait_until(lambda: progress.exists() and int(progress.read_text() or 0) >= 15)
        server.kill()
        time.sleep(0.5)  # training goes on, uploads fail and back off
        assert all(p.poll() is None for p in procs)
        server.start()
        outs = wait_all(procs)
    finally:
        server.stop()
    assert all("not uploaded" not in err for _, err in outs), outs
    with ServerProcess.db(db, tmp_path / "server2.log") as again:
        local = rankwise.Api(dir=data).run("killed")
        remote = rankwise.Api(server=again.url).run("killed")
        assert_same_history(local, remote, db)
        assert len(remote.history()) == 2 * 60 * 2
        assert remote.state == "finished" and len(remote.streams) == 2


@pytest.mark.slow
def test_server_down_from_before_init_then_sync(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    procs = launch_ranks(
        data, "offline", 2, "--steps", "30", server=url, RANKWISE_UPLOAD_TIMEOUT="1"
    )
    outs = wait_all(procs)
    for out, err in outs:
        took = float(out.split("finish took")[1])
        assert took < 5.0, out  # bounded by upload_timeout (1 s; 5x), not by the outage
        assert "rankwise sync" in err and "Nothing is lost" in err, err
    db = f"sqlite:///{tmp_path / 'db.sqlite'}"
    server = ServerProcess.db(db, tmp_path / "server.log", port=port)
    with server:
        first = sync_cli(data, url)
        assert "synced 2 stream(s)" in first
        local = rankwise.Api(dir=data).run("offline")
        remote = rankwise.Api(server=url).run("offline")
        assert_same_history(local, remote, db)
        second = sync_cli(data, url)
        assert "0 new bytes" in second
        assert_same_history(local, rankwise.Api(server=url).run("offline"), db)
        assert rankwise.Api(server=url).run("offline").state == "finished"


def test_a_log_call_wider_than_a_record_reaches_the_server_whole(
    data_dir: Path, thread_server: str, capfd: pytest.CaptureFixture[str]
) -> None:
    """A server refuses a record of more than ``MAX_KEYS_PER_RECORD`` keys (413): the
    writer cuts a wider call into records it takes, each with the call's step, and says
    so once. Every value reaches the server; the local reader sees the same."""
    from rankwise.budget import MAX_KEYS_PER_RECORD

    wide = MAX_KEYS_PER_RECORD + 2_345
    keys = [f"layer{j}/grad_norm" for j in range(wide)]
    settings = {"flush_interval": 0.02, "upload_interval": 0.05, "upload_timeout": 20}
    run = rankwise.init(project="wide", server=thread_server, settings=settings)
    for step in range(3):
        run.log({k: step + j * 1e-3 for j, k in enumerate(keys)}, step=step)
    run.log({"loss": 0.5}, step=3)
    run.finish()
    err = capfd.readouterr().err
    assert err.count(f"a log() call of {wide} keys is stored as 2 records") == 1, err
    remote = rankwise.Api(server=thread_server).run(run.id, "wide")
    local = rankwise.Api(dir=data_dir).run(run.id, "wide")
    assert remote.state == local.state == "finished"
    assert remote.streams[0].points == local.streams[0].points == 3 * wide + 1
    for reader in (remote, local):
        got = reader.history(keys=[keys[0], keys[-1]])
        assert [(r["step"], r.get(keys[0]), r.get(keys[-1])) for r in got] == [
            row
            for step in range(3)
            for row in ((step, float(step), None), (step, None, step + (wide - 1) * 1e-3))
        ]
    assert remote.summary[keys[-1]] == 2 + (wide - 1) * 1e-3 and remote.summary["loss"] == 0.5
