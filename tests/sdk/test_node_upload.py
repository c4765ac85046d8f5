"""``node_upload``: the processes of one node share one uploader, which posts every
stream in one request (``rankwise.sdk.node_upload``). Real processes, a real uvicorn
server, the real store: every value lands once, the node's uploader can be SIGKILLed and
another takes over, and a server without the batch route still gets everything."""

from __future__ import annotations

import os
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import rankwise
from rankwise.server import create_app
from rankwise.store import open_store
from tests.helpers.runs import assert_same_history, launch_ranks, wait_all
from tests.helpers.servers import serve_in_thread
from tests.helpers.wait import wait_until

INGEST, BATCH = "/api/v1/ingest", "/api/v1/ingest/batch"


class CountPosts:
    """ASGI middleware: the POSTs the app was sent, by path."""

    def __init__(self, app: Any, seen: Counter[str]) -> None:
        self.app, self.seen = app, seen

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            self.seen[scope["path"]] += 1
        await self.app(scope, receive, send)


class NoBatchRoute:
    """ASGI middleware: 404 for the batch route, in the API's error shape."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] == BATCH:
            from starlette.responses import JSONResponse

            body = {"error": {"status": 404, "message": "no such API route"}}
            await JSONResponse(body, status_code=404)(scope, receive, send)
            return
        await self.app(scope, receive, send)


@pytest.fixture
def server(tmp_path: Path) -> Any:
    db = f"sqlite:///{tmp_path / 'server.db'}"
    store = open_store(db)
    store.migrate()
    app = create_app(store)
    seen: Counter[str] = Counter()
    app.add_middleware(CountPosts, seen=seen)
    with serve_in_thread(app) as url:
        yield url, db, app, seen
    store.close()


def node_env(tmp_path: Path) -> dict[str, str]:
    share = tmp_path / "tmp"  # where the node's share is made (tempfile honours TMPDIR)
    share.mkdir(exist_ok=True)
    return {"RANKWISE_NODE_UPLOAD": "1", "TMPDIR": str(share)}


def test_the_ranks_of_a_node_post_together_and_every_value_lands_once(
    tmp_path: Path, server: Any
) -> None:
    url, db, app, seen = server
    data = tmp_path / "data"
    data.mkdir()
    procs = launch_ranks(
        data, "shared4", 4, "--steps", "80", "--sleep", "0.01", server=url, **node_env(tmp_path)
    )
    outs = wait_all(procs)
    assert all("not uploaded" not in err for _, err in outs), outs
    local = rankwise.Api(dir=data).run("shared4")
    remote = rankwise.Api(server=url).run("shared4")
    assert_same_history(local, remote, db)
    assert remote.state == "finished" and len(remote.streams) == 4
    # No rank posted alone: every upload went through the node's batches, and they
    # carried several streams each (the group commit counts the streams' uploads).
    assert seen[INGEST] == 0, seen
    assert seen[BATCH] > 0
    commit = app.state.group_commit
    assert commit.items > 1.5 * seen[BATCH], (commit.items, seen)
    # The share holds no member once every run ended and drained.
    share = next((tmp_path / "tmp").glob("rankwise-*/upload-*"))
    assert sorted(p.name for p in share.iterdir()) == ["lock"]


def lock_holder(share: Path) -> int | None:
    """The pid holding ``share/lock`` (``/proc/locks``: FLOCK ... pid major:minor:inode)."""
    inode = (share / "lock").stat().st_ino
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if len(fields) > 5 and fields[1] == "FLOCK" and fields[5].endswith(f":{inode}"):
            return int(fields[4])
    return None


@pytest.mark.slow
def test_the_nodes_uploader_sigkilled_hands_over_and_nothing_is_lost(
    tmp_path: Path, server: Any
) -> None:
    url, db, _, seen = server
    data = tmp_path / "data"
    data.mkdir()
    progress = tmp_path / "progress"
    procs = launch_ranks(
        data,
        "handover",
        3,
        "--steps",
        "200",
        "--sleep",
        "0.02",
        "--progress",
        str(progress),
        server=url,
        **node_env(tmp_path),
    )
    try:
        wait_until(lambda: progress.exists() and int(progress.read_text() or 0) >= 30)
        share = next((tmp_path / "tmp").glob("rankwise-*/upload-*"))
        wait_until(lambda: lock_holder(share) is not None)
        leader = lock_holder(share)
        victim = next(p for p in procs if p.pid == leader)
        before = seen[BATCH]
        os.kill(leader, signal.SIGKILL)
        victim.communicate(timeout=10)  # its pipes closed too
        # Another process takes the lock over and goes on posting.
        wait_until(lambda: lock_holder(share) not in (None, leader), timeout=10)
        wait_until(lambda: seen[BATCH] > before + 3, timeout=10)
        outs = wait_all([p for p in procs if p is not victim])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert all("not uploaded" not in err for _, err in outs), outs
    time.sleep(0.2)
    local = rankwise.Api(dir=data).run("handover")
    remote = rankwise.Api(server=url).run("handover")
    # Everything in the killed rank's file too: its stream was uploaded to its end by
    # the uploader that took over, though its own process was gone.
    assert_same_history(local, remote, db)
    states = sorted(s.state for s in remote.streams)
    assert len(states) == 3 and states.count("finished") == 2, states


def test_a_server_without_the_batch_route_gets_one_upload_per_stream(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'server.db'}"
    store = open_store(db)
    store.migrate()
    app = create_app(store)
    app.add_middleware(NoBatchRoute)  # as a server from before the route answers
    seen: Counter[str] = Counter()
    app.add_middleware(CountPosts, seen=seen)
    data = tmp_path / "data"
    data.mkdir()
    with serve_in_thread(app) as url:
        procs = launch_ranks(data, "older", 3, "--steps", "40", server=url, **node_env(tmp_path))
        outs = wait_all(procs)
        local = rankwise.Api(dir=data).run("older")
        remote = rankwise.Api(server=url).run("older")
        assert_same_history(local, remote, db)
    store.close()
    assert all("not uploaded" not in err for _, err in outs), outs
    assert seen[BATCH] >= 1 and seen[INGEST] > 0, seen


def test_the_share_is_a_private_folder_or_none(tmp_path: Path, monkeypatch: Any) -> None:
    """Another user's folder, a link or a folder others can write are refused (the
    process then uploads alone); two runs' streams, or two servers, never share."""
    from rankwise.sdk.node_upload import share_dir

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # read TMPDIR again
    a = share_dir("http://s:1", "tok", tmp_path / "run-a" / "streams")
    assert a.parent.name == f"rankwise-{os.getuid()}" and (a.stat().st_mode & 0o777) == 0o700
    assert share_dir("http://s:1", "tok", tmp_path / "run-a" / "streams") == a
    assert share_dir("http://s:1", "tok", tmp_path / "run-b" / "streams") != a
    assert share_dir("http://s:2", "tok", tmp_path / "run-a" / "streams") != a
    a.parent.chmod(0o755)
    with pytest.raises(OSError, match="not a private directory"):
        share_dir("http://s:1", "tok", tmp_path / "run-a" / "streams")
    a.parent.chmod(0o700)
    a.parent.rename(tmp_path / "elsewhere")
    (tmp_path / f"rankwise-{os.getuid()}").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(OSError, match="not a private directory"):
        share_dir("http://s:1", "tok", tmp_path / "run-a" / "streams")


@pytest.mark.slow
def test_a_rank_does_not_wait_at_exit_on_a_stopped_nodes_uploader(
    tmp_path: Path, server: Any
) -> None:
    """The process uploading for the node is SIGSTOPped (a debugger, a stuck C call
    holding the interpreter): it keeps the lock, but the other ranks' exits do not wait
    for it; each sends its own stream once the node's uploader has moved none of it for
    ``ALONE_AFTER`` seconds, and everything lands once."""
    from rankwise.sdk.node_upload import ALONE_AFTER

    url, db, _, _ = server
    data = tmp_path / "data"
    data.mkdir()
    progress = tmp_path / "progress"
    procs = launch_ranks(
        data,
        "stopped",
        3,
        "--steps",
        "60",
        "--sleep",
        "0.05",
        "--progress",
        str(progress),
        server=url,
        RANKWISE_UPLOAD_TIMEOUT="60",
        **node_env(tmp_path),
    )
    leader = None
    try:
        wait_until(lambda: progress.exists() and int(progress.read_text() or 0) >= 10)
        share = next((tmp_path / "tmp").glob("rankwise-*/upload-*"))
        wait_until(lambda: lock_holder(share) is not None)
        leader = lock_holder(share)
        os.kill(leader, signal.SIGSTOP)
        others = [p for p in procs if p.pid != leader]
        outs = wait_all(others, timeout=120)
    finally:
        if leader is not None:
            os.kill(leader, signal.SIGCONT)
    for out, err in outs:
        took = float(out.split("finish took")[1])
        # About ALONE_AFTER, far under the 60 s upload_timeout (5x for a loaded machine).
        assert took < 5 * ALONE_AFTER, (out, err)
        assert "not uploaded" not in err, err
    wait_all([p for p in procs if p.pid == leader])
    local = rankwise.Api(dir=data).run("stopped")
    remote = rankwise.Api(server=url).run("stopped")
    assert_same_history(local, remote, db)
    assert remote.state == "finished" and len(remote.streams) == 3
