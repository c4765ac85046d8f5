"""``rankwise sync``: offline runs to a server, any path level, repeatable, --follow."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import rankwise
from rankwise.sdk.sync import find_stream_files, sync
from tests.helpers.runs import assert_same_history, launch_ranks, sync_cli, wait_all
from tests.helpers.servers import REPO, AppServer, subprocess_env
from tests.helpers.wait import wait_until


@pytest.fixture
def server(app_server: AppServer) -> str:
    return app_server.url


@pytest.fixture
def offline(tmp_path: Path) -> Path:
    """Two finished runs of two ranks each, written with no server, in two projects."""
    data = tmp_path / "data"
    data.mkdir()
    procs = launch_ranks(data, "one", 2, "--steps", "30", "--project", "pa")
    procs += launch_ranks(data, "two", 2, "--steps", "30", "--project", "pb")
    wait_all(procs)
    return data


def test_find_stream_files_at_every_level(offline: Path) -> None:
    assert len(find_stream_files(offline)) == 4
    assert len(find_stream_files(offline / "pa")) == 2
    assert len(find_stream_files(offline / "pa" / "one")) == 2
    assert len(find_stream_files(offline / "pa" / "one" / "streams")) == 2
    one = find_stream_files(offline / "pa" / "one")[0]
    assert find_stream_files(one) == [one]
    with pytest.raises(rankwise.UsageError):
        find_stream_files(offline / "missing")


def test_sync_levels_and_twice_doubles_nothing(offline: Path, server: str) -> None:
    out = sync_cli(offline / "pa" / "one", server)
    assert "synced 2 stream(s)" in out
    assert rankwise.Api(server=server).projects() == ["pa"]
    out = sync_cli(offline, server)  # the whole data dir: only "two" is new
    assert "synced 4 stream(s)" in out
    again = sync_cli(offline, server)
    assert "0 new bytes" in again
    for project, run_id in (("pa", "one"), ("pb", "two")):
        local = rankwise.Api(dir=offline).run(run_id, project=project)
        remote = rankwise.Api(server=server).run(run_id, project=project)
        assert_same_history(local, remote, f"sqlite:///{offline.parent / 'server.db'}")
        assert remote.state == "finished"


def test_sync_presents_each_streams_secret(offline: Path, server: str) -> None:
    """Each SDK stream is bound to the secret beside it (``<file>.key``, 0600): sync
    sends it; a stream whose secret is gone is refused whole (403), naming the header,
    and the others still land."""
    one, other = find_stream_files(offline / "pa" / "one")
    key = one.with_name(one.name + ".key")
    assert key.stat().st_mode & 0o777 == 0o600
    hidden = key.rename(key.with_name("elsewhere"))
    report = sync(offline / "pa" / "one", server, retry_for=5)
    assert list(report.failed) == [str(one)], report.failed
    assert "X-Rankwise-Stream-Key" in report.failed[str(one)], report.failed
    assert "rankwise token create" not in report.failed[str(one)]  # not the token's fault
    hidden.rename(key)
    assert sync(offline / "pa" / "one", server).failed == {}
    local = rankwise.Api(dir=offline).run("one", project="pa")
    remote = rankwise.Api(server=server).run("one", project="pa")
    assert_same_history(local, remote, f"sqlite:///{offline.parent / 'server.db'}")
    assert other.exists()


def test_sync_shows_progress(
    offline: Path, server: str, capsys: pytest.CaptureFixture[str]
) -> None:
    report = sync(offline / "pb", server, progress=True)
    assert report.streams == 2 and report.uploaded_bytes > 0 and not report.failed
    assert "rankwise sync" in capsys.readouterr().err


def test_sync_cli_prints_its_result_and_no_bar_off_a_terminal(offline: Path, server: str) -> None:
    """By default the bar is for a terminal: a log got "0.00B [00:00, ?B/s]" first."""
    out = subprocess.run(
        [sys.executable, "-m", "rankwise.cli", "sync", str(offline / "pa"), "--server", server],
        env=subprocess_env(), cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("rankwise: synced 2 stream(s)"), out.stdout
    assert "B/s" not in out.stderr and "rankwise sync" not in out.stderr, out.stderr


def test_sync_unreachable_server_fails_with_a_hint(offline: Path) -> None:
    from tests.helpers.servers import free_port

    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "rankwise.cli",
            "sync",
            str(offline),
            "--server",
            f"http://127.0.0.1:{free_port()}",
            "--no-progress",
            "--retry-for",
            "1",
        ],
        env=subprocess_env(RANKWISE_UPLOAD_BACKOFF_MAX="0.1"),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=200,
    )
    assert out.returncode == 2
    assert "nothing was lost" in out.stderr and "rankwise sync again" in out.stderr


def test_sync_follow_uploads_a_run_until_it_finishes(tmp_path: Path, server: str) -> None:
    data = tmp_path / "data"
    data.mkdir()
    procs = launch_ranks(data, "live", 2, "--steps", "40", "--sleep", "0.03")
    wait_until(lambda: len(find_stream_files(data)) == 2)
    follow = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rankwise.cli",
            "sync",
            str(data),
            "--server",
            server,
            "--follow",
            "--no-progress",
        ],
        env=subprocess_env(),
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    wait_all(procs)
    out, _ = follow.communicate(timeout=60)
    assert follow.returncode == 0, out
    local = rankwise.Api(dir=data).run("live")
    remote = rankwise.Api(server=server).run("live")
    assert_same_history(local, remote, f"sqlite:///{tmp_path / 'server.db'}")
    assert remote.state == "finished"
