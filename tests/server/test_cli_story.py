"""The first minute on the command line: init's line, ``rankwise ui``/``runs``/``show``/
``server`` as a new user meets them (real subprocesses, real uvicorn servers)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest

import rankwise
from rankwise.errors import UsageError
from tests.helpers.servers import ServerProcess, subprocess_env
from tests.helpers.wait import wait_until

INIT = """
import sys, rankwise
run = rankwise.init(project="p", id=sys.argv[1], run_mode=sys.argv[2],
                    settings={"flush_interval": 0.02})
run.log({"loss": 1.0}, step=0)
print("URL", run.url)
run.finish()
"""


def _init(
    root: Path, run_id: str, mode: str = "auto", **env: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", INIT, run_id, mode],
        env=subprocess_env(RANKWISE_DIR=str(root), **env), capture_output=True, text=True,
        timeout=60, cwd=root.parent,
    )  # fmt: skip


def _cli(*args: str, root: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = subprocess_env() if root is None else subprocess_env(RANKWISE_DIR=str(root))
    return subprocess.run(
        [sys.executable, "-m", "rankwise.cli", *args], env=env, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip


def test_init_says_where_the_run_is_and_how_to_see_it(tmp_path: Path) -> None:
    root = tmp_path / "data"
    out = _init(root, "first")
    assert out.returncode == 0, out.stderr
    lines = [x for x in out.stderr.splitlines() if x.startswith("rankwise: run ")]
    assert lines == [f"rankwise: run p/first in {root}; see it with: rankwise ui --dir {root}"]
    assert "URL None" in out.stdout
    silent = _init(root, "quiet", RANKWISE_SILENT="1")
    assert silent.returncode == 0 and "rankwise: run" not in silent.stderr
    # A shared run's other ranks stay quiet: one line per job, from the primary.
    other = _init(root, "shared", "shared", RANK="1", WORLD_SIZE="2", LOCAL_RANK="1")
    assert other.returncode == 0 and "rankwise: run" not in other.stderr, other.stderr
    # With `rankwise ui` serving the directory, the line (and run.url) is its page.
    with ServerProcess.ui(root, tmp_path / "ui.log") as ui:
        seen = _init(root, "second")
        page = f"{ui.url}/#/p/p/r/second"
        assert f"see it at {page}" in seen.stderr and f"URL {page}" in seen.stdout
    # In remote mode, the server's page.
    with ServerProcess.db(f"sqlite:///{tmp_path / 'db.sqlite'}", tmp_path / "db.log") as srv:
        remote = _init(root, "third", RANKWISE_SERVER=srv.url)
        assert f"see it at {srv.url}/#/p/p/r/third" in remote.stderr, remote.stderr
    # The ui is gone: its address is no longer offered.
    assert "see it with: rankwise ui" in _init(root, "fourth").stderr


def test_ui_on_a_new_directory_shows_runs_as_they_appear(tmp_path: Path) -> None:
    root = tmp_path / "not" / "yet"
    with ServerProcess.ui(root, tmp_path / "ui.log") as ui:
        assert httpx.get(f"{ui.url}/api/v1/projects").json() == {"projects": []}
        assert _init(root, "late").returncode == 0
        wait_until(lambda: httpx.get(f"{ui.url}/api/v1/projects/p/runs/late").status_code == 200)
    log = (tmp_path / "ui.log").read_text()
    assert "(new: runs will show as they start)" in log and "indexing" not in log
    # Again on what is there now: it says what it reads before it serves (a large
    # directory took seconds of silence).
    with ServerProcess.ui(root, tmp_path / "again.log"):
        pass
    log = (tmp_path / "again.log").read_text()
    said = f"rankwise: indexing {root}: 1 run(s), 1 stream file(s), "
    assert said in log and log.index(said) < log.index("rankwise: serving"), log


def test_ui_serves_before_a_big_directory_is_indexed_and_says_when_it_is(
    tmp_path: Path,
) -> None:
    """A directory that takes longer than ``--first-index-seconds`` to index is served
    then, and indexed while it serves (10 GB took minutes of silence before the address
    was printed): the address line says how much is left, a line says when all is
    indexed, and the run comes out whole."""
    from rankwise.stream.files import stream_filename, streams_dir
    from rankwise.stream.identity import StreamId
    from tests.helpers.streams import body, make_stream

    root = tmp_path / "data"
    d = streams_dir(root, "p", "r")
    d.mkdir(parents=True)
    for r in range(3):
        key = StreamId("p", "r", f"rank-{r}", 0)
        (d / stream_filename(key.label, 0)).write_bytes(
            body(make_stream(key, 300, rank=r, world=3))
        )
    log = tmp_path / "ui.log"
    url = "/api/v1/projects/p/runs/r"
    with ServerProcess(["ui", "--dir", str(root), "--first-index-seconds", "0"], log) as ui:

        def whole() -> bool:
            got = httpx.get(f"{ui.url}{url}")
            run = got.json() if got.status_code == 200 else {}
            return run.get("n_streams") == 3 and run.get("state") == "finished"

        wait_until(whole, timeout=60)
        assert httpx.get(f"{ui.url}{url}").json()["steps"] == 300
        wait_until(lambda: "rankwise: indexed" in log.read_text(), timeout=30)
    text = log.read_text()
    serving = next(line for line in text.splitlines() if "rankwise: serving" in line)
    assert "(still indexing " in serving and " MB: runs and steps show as it goes)" in serving
    assert text.index("rankwise: serving") < text.index(f"rankwise: indexed {root} (")
    # Indexed now: the next start serves at once, with nothing left to say.
    with ServerProcess(["ui", "--dir", str(root), "--first-index-seconds", "0"], log):
        pass
    again = log.read_text()[len(text) :]
    assert "still indexing" not in again and "rankwise: indexed" not in again, again


@pytest.mark.slow
def test_mistyped_dir_and_bad_databases_are_one_line_errors(tmp_path: Path) -> None:
    typo = tmp_path / "typo"
    for args in (["runs", "--dir", str(typo)], ["show", "x", "--dir", str(typo)]):
        out = _cli(*args)
        assert out.returncode == 2 and out.stdout == ""
        assert out.stderr == (
            f"rankwise: error: the data directory {typo} does not exist: pass --dir (or dir=, "
            "or set RANKWISE_DIR) to where rankwise.init() wrote runs\n"
        )
    # Api(dir=) says the same (it returned [] while the CLI refused).
    for read in (lambda a: a.runs(), lambda a: a.projects(), lambda a: a.run("x")):
        with pytest.raises(UsageError, match=f"the data directory {typo} does not exist"):
            read(rankwise.Api(dir=typo))
    for db in (
        "postgresql://nobody:secret@127.0.0.1:1/nothing",
        f"sqlite:///{tmp_path}/no/such/dir/db.sqlite",
    ):
        out = _cli("server", "--db", db, "--port", "0")
        assert out.returncode == 2, out.stderr
        (line,) = out.stderr.splitlines()
        assert line.startswith("rankwise: error: cannot open the database"), line
        assert "secret" not in line and "Traceback" not in out.stderr


def test_server_on_a_missing_postgres_database_says_why(pg_dsn: str) -> None:
    """PostgreSQL's own reason, at once: it used to wait 10 s for the pool, then say only
    that no connection came."""
    from urllib.parse import urlsplit, urlunsplit

    missing = urlunsplit(urlsplit(pg_dsn)._replace(path="/rw_no_such_db", query=""))
    out = _cli("server", "--db", missing, "--port", "0")
    assert out.returncode == 2, out.stderr
    (line,) = out.stderr.splitlines()
    assert line.startswith(f"rankwise: error: cannot open the database {missing}"), line
    assert 'database "rw_no_such_db" does not exist' in line, line


@pytest.mark.slow
def test_runs_filters_group_column_show_group_and_quiet_broken_pipe(tmp_path: Path) -> None:
    root = tmp_path / "data"
    job = """
import rankwise
for i, (group, tag, code) in enumerate([("g1", "a", 0), ("g1", "b", 1), ("g2", "a", 0)]):
    run = rankwise.init(project="p", id=f"r{i}", group=group, tags=[tag],
                        config={f"k{j}": "x" * 40 for j in range(3000)})
    run.log({"loss": 1.0})
    run.finish(exit_code=code)
"""
    done = subprocess.run(
        [sys.executable, "-c", job], capture_output=True, text=True, timeout=120,
        env=subprocess_env(RANKWISE_DIR=str(root), RANKWISE_SILENT="1"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr

    def ids(*args: str) -> list[str]:
        out = _cli("runs", "--project", "p", *args, root=root)
        assert out.returncode == 0, out.stderr
        lines = out.stdout.splitlines()
        assert lines[0].split()[:4] == ["id", "name", "group", "state"]
        return sorted(line.split()[0] for line in lines[1:])

    assert ids() == ["r0", "r1", "r2"]
    assert ids("--group", "g1") == ["r0", "r1"]
    assert ids("--state", "failed") == ["r1"]
    assert ids("--tag", "a", "--group", "g1") == ["r0"]
    assert "no runs match these filters" in _cli("runs", "--group", "zz", root=root).stdout
    nope = _cli("runs", "--project", "nope", root=root)  # was "no runs under D", rc 0
    assert nope.returncode == 2 and nope.stdout == ""
    assert f"no project 'nope' under {root} (its projects: p)" in nope.stderr
    bad = _cli("runs", "--state", "bogus", root=root)
    assert bad.returncode == 2 and "invalid choice: 'bogus'" in bad.stderr
    group = _cli("show", "g1", "--project", "p", root=root)
    assert group.returncode == 2
    assert "'g1' is a group of 2 run(s) (r1, r0), not a run" in group.stderr
    assert "rankwise runs --group g1" in group.stderr
    # `show | head`: the reader goes away after one line; no traceback, exit 0.
    proc = subprocess.Popen(
        [sys.executable, "-m", "rankwise.cli", "show", "r0", "--project", "p"],
        env=subprocess_env(RANKWISE_DIR=str(root)), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stdout.readline().startswith("run ")
    proc.stdout.close()
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and err == "", err


def test_help_is_plain_text() -> None:
    for args in ([], ["runs"], ["show"], ["ui"], ["server"], ["sync"]):
        out = _cli(*args, "--help")
        assert out.returncode == 0 and "``" not in out.stdout, out.stdout


def test_show_hides_the_wandb_metadata_in_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``_wandb`` (entity, metric definitions) is hidden as ``wandb.config`` hides it."""
    import rankwise.wandb as wandb
    from rankwise.cli import main

    run = wandb.init(
        project="w", dir=tmp_path, entity="team", config={"lr": 0.1}, settings={"silent": True}
    )
    run.define_metric("loss", summary="min")
    run.log({"loss": 1.0})
    run.finish()
    data = tmp_path / "rankwise-runs"
    assert rankwise.Api(dir=data).run(run.id, "w").config["_wandb"]["entity"] == "team"
    assert main(["show", run.id, "--dir", str(data), "--project", "w"]) == 0
    out = capsys.readouterr().out
    config = out[out.index("\nconfig") : out.index("\nsummary")]
    assert "lr" in config and "_wandb" not in config, config


def test_shim_help_is_plain_text() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "rankwise.wandb", "--help"],
        env=subprocess_env(), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("usage: python -m rankwise.wandb SCRIPT"), out.stdout
    assert "``" not in out.stdout and "torchrun --nproc-per-node=2 -m rankwise.wandb" in out.stdout
