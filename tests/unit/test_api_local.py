"""Reading a data directory back: filters, lookup errors, torn files, the CLI."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

import rankwise
from rankwise.cli import main as cli
from rankwise.stream.frames import MAGIC
from tests.helpers.env import PYTHON, REPO
from tests.helpers.wait import wait_until


def make_runs(fast: dict) -> dict[str, rankwise.Run]:
    runs = {}
    for rid, group, job, tags, project in [
        ("a1", "g1", "train", ["x", "y"], "p1"),
        ("a2", "g1", "eval", ["x"], "p1"),
        ("b1", None, "train", [], "p2"),
    ]:
        run = rankwise.init(
            project=project, id=rid, group=group, job_type=job, tags=tags, settings=fast
        )
        run.log({"loss": 1.0})
        runs[rid] = run
        run.finish(exit_code=1 if rid == "a2" else 0)
        time.sleep(0.01)
    return runs


def test_runs_filters(data_dir: Path, fast: dict) -> None:
    make_runs(fast)
    api = rankwise.Api()
    assert api.projects() == ["p1", "p2"]
    ids = lambda runs: [r.id for r in runs]  # noqa: E731
    assert ids(api.runs()) == ["b1", "a2", "a1"]  # newest first
    assert ids(api.runs(project="p1")) == ["a2", "a1"]
    assert ids(api.runs(group="g1", job_type="train")) == ["a1"]
    assert ids(api.runs(state="failed")) == ["a2"]
    assert ids(api.runs(state=["failed", "finished"], project="p2")) == ["b1"]
    assert ids(api.runs(tags=["x", "y"])) == ["a1"]
    assert ids(api.runs(tags="x")) == ["a2", "a1"]
    assert api.run("p1/a1").tags == ["x", "y"]


def test_unknown_and_ambiguous_runs(data_dir: Path, fast: dict) -> None:
    make_runs(fast)
    rankwise.init(project="p2", id="a1").finish()
    api = rankwise.Api()
    with pytest.raises(rankwise.RunNotFoundError, match="no run 'zz' in any project"):
        api.run("zz")
    with pytest.raises(KeyError):
        api.run("zz", project="p1")
    with pytest.raises(rankwise.UsageError, match=r"several projects.*pass project="):
        api.run("a1")
    assert api.run("a1", project="p2").project == "p2"


def test_torn_tail_is_recovered_and_reported(data_dir: Path, fast: dict) -> None:
    run = rankwise.init(id="torn", settings=fast)
    for i in range(100):
        run.log({"x": i})
    run.finish()
    path = run.path
    assert path is not None
    data = path.read_bytes()
    path.write_bytes(data[:-7])  # cut into the finish frame
    info = rankwise.Api().run("torn")
    assert [r["x"] for r in info.history()] == list(range(100))
    (s,) = info.streams
    assert s.damage is not None and "torn" in s.damage
    # No finish record survived, but the writing process (this one) is alive.
    assert s.state == "running"


def test_history_filters_and_dataframe(data_dir: Path, fast: dict) -> None:
    run = rankwise.init(id="h", settings=fast)
    for i in range(5):
        run.log({"a": i, "b": -i})
    run.log({"c": 9})
    run.finish()
    info = rankwise.Api().run("h")
    assert info.metric_keys == ["a", "b", "c"]
    assert [r.get("c") for r in info.history(keys="c")] == [9]
    assert info.history(label="nope") == []
    df = info.history_df(keys=["a"])
    assert list(df.columns) == ["step", "time", "label", "a"]
    assert df["a"].tolist() == [0, 1, 2, 3, 4]


def test_a_running_process_is_running_and_a_killed_one_crashed(tmp_path: Path) -> None:
    script = (
        "import time, rankwise\n"
        "run = rankwise.init(id='live',\n"
        "    settings={'heartbeat_interval': 0.2, 'flush_interval': 0.02})\n"
        "run.log({'x': 1})\n"
        "assert run._writer.sync(timeout=60)  # in the file before 'ready'\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )
    env = {**os.environ, "RANKWISE_DIR": str(tmp_path), "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([PYTHON, "-c", script], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        assert rankwise.Api(tmp_path).run("live").state == "running"
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        info = wait_until(
            lambda: (r := rankwise.Api(tmp_path).run("live")).state == "crashed" and r,
            timeout=10,
            every=0.2,
        )
        assert info.crashed == ["rank-0"]
        assert info.history()[0]["x"] == 1
    finally:
        proc.kill()
        proc.wait()
        assert proc.stdout is not None
        proc.stdout.close()


def test_stale_stream_without_a_visible_process_is_crashed(tmp_path: Path) -> None:
    streams = tmp_path / "default" / "ghost" / "streams"
    streams.mkdir(parents=True)
    from rankwise.stream import records as R
    from rankwise.stream.frames import encode_frame

    start = R.StreamStart(
        0,
        time.time() - 120,
        "default",
        "ghost",
        "rank-0",
        0,
        host="some-other-host",
        pid=1234,
        heartbeat_interval=5.0,
    )
    (streams / "rank-0.0.rwlog").write_bytes(MAGIC + encode_frame([start]))
    assert rankwise.Api(tmp_path).run("ghost").state == "crashed"
    assert rankwise.Api(tmp_path, crash_timeout=600).run("ghost").state == "running"


def test_cli_runs_and_show(data_dir: Path, fast: dict, capsys: pytest.CaptureFixture[str]) -> None:
    make_runs(fast)
    assert cli(["runs"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == [
        "id",
        "name",
        "group",
        "state",
        "ranks",
        "streams",
        "steps",
        "created",
    ]
    assert "p1/a2" in out and "failed" in out
    assert cli(["show", "a1", "--project", "p1"]) == 0
    out = capsys.readouterr().out
    assert "state    finished" in out and "loss" in out and "rank-0" in out
    assert cli(["show", "nope"]) == 2
    assert "no run 'nope'" in capsys.readouterr().err


def test_cli_on_an_empty_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(["runs", "--dir", str(tmp_path)]) == 0
    assert "no runs under" in capsys.readouterr().out
