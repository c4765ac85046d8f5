"""A run deleted on the server while it trains (real uvicorn, the real SDK): the server
answers its later uploads 410 Gone, the SDK warns once, stops uploading it and training
goes on to a normal finish, every record still in the local stream file."""

from __future__ import annotations

from pathlib import Path

import pytest

import rankwise
from rankwise.read.local import LocalReader
from tests.helpers.servers import AppServer
from tests.helpers.wait import wait_until


def test_deleted_while_training_warns_once_and_training_goes_on(
    data_dir: Path, app_server: AppServer, capfd: pytest.CaptureFixture[str]
) -> None:
    settings = {"flush_interval": 0.02, "upload_interval": 0.05, "upload_timeout": 10}
    run = rankwise.init(project="p", server=app_server.url, settings=settings)
    for step in range(20):
        run.log({"loss": 1.0 / (step + 1)})
    store = app_server.store
    wait_until(lambda: store.get_run("p", run.id) is not None, timeout=20)
    api = rankwise.Api(server=app_server.url, token=app_server.token)
    seen: list[str] = []

    def told_yet() -> bool:
        seen.append(capfd.readouterr().err)
        return "no longer takes run" in "".join(seen)

    assert api.delete_runs([run.id], project="p") == [run.id]
    for step in range(20, 400):  # uploads go on being tried, and refused
        run.log({"loss": 1.0 / (step + 1)})
    wait_until(told_yet, timeout=20)
    for step in range(400, 450):  # and after the refusal too
        run.log({"loss": 1.0 / (step + 1)})
    run.finish()
    err = "".join(seen) + capfd.readouterr().err
    told = [line for line in err.splitlines() if "no longer takes run" in line]
    assert len(told) == 1, err
    assert run.id in told[0] and "deleted" in told[0]
    assert "were not uploaded" not in err and "Traceback" not in err
    # Training went on: the local stream holds every step, finished.
    local = LocalReader(data_dir, 60.0).run(run.id, "p")
    assert local.state == "finished" and local.steps == 450
    # The server holds what it took before the delete, and nothing after it.
    assert store.get_run("p", run.id) is None
    assert store.run_gone("p", run.id) == "deleted"
    restored = api.restore_runs([run.id], project="p")
    assert restored == [run.id]
    remote = api.run(run.id, project="p")
    assert remote.steps < 450
