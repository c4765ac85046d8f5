"""``@rankwise.track`` in one process: the forms it takes, async functions, the states a
call's end gives its run, and what ``get_run()`` answers around it (the torchrun cases
are in ``tests/e2e/test_track_torchrun.py``)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import rankwise

QUIET = {"system": False, "console": "off"}


def test_bare_and_called_forms_return_the_value(data_dir: Path) -> None:
    @rankwise.track
    def bare(x: int) -> int:
        run = rankwise.get_run()
        assert run is not None and run.project == "default"
        run.log({"x": float(x)})
        return x + 1

    @rankwise.track(project="t", name="called", tags=["a"], **QUIET)
    def called() -> str:
        run = rankwise.get_run()
        assert run is not None and run.name == "called" and run.tags == ("a",)
        return "ok"

    assert rankwise.get_run() is None
    assert bare(1) == 2 and called() == "ok"
    assert bare.__name__ == "bare"  # functools.wraps
    assert rankwise.get_run() is None and rankwise.run is None
    runs = rankwise.Api(dir=data_dir).runs(project="default")
    assert len(runs) == 1 and runs[0].state == "finished"
    assert [r["x"] for r in runs[0].history()] == [1.0]


def test_async_functions_are_tracked(data_dir: Path) -> None:
    @rankwise.track(project="t", **QUIET)
    async def work() -> str:
        await asyncio.sleep(0)
        run = rankwise.get_run()
        assert run is not None
        run.log({"y": 2.0})
        return run.id

    run_id = asyncio.run(work())
    got = rankwise.Api(dir=data_dir).run(run_id, project="t")
    assert got.state == "finished" and got.history()[0]["y"] == 2.0


def test_a_keyboard_interrupt_ends_the_run_killed(data_dir: Path) -> None:
    seen: list[str] = []

    @rankwise.track(project="t", **QUIET)
    def stopped() -> None:
        run = rankwise.get_run()
        assert run is not None
        seen.append(run.id)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        stopped()
    stream = rankwise.Api(dir=data_dir).run(seen[0], project="t").streams[0]
    assert stream.state == "killed" and stream.exit_code == 130


def test_bad_arguments_are_refused_when_decorating() -> None:
    with pytest.raises(rankwise.UsageError, match="run_mode='solo'"):
        rankwise.track(run_mode="solo")
    with pytest.raises(rankwise.UsageError, match="rank_scope='node'"):
        rankwise.track(rank_scope="node")
    with pytest.raises(rankwise.UsageError, match="decorates a function"):
        rankwise.track()(42)


def test_a_disabled_process_gets_no_run(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANKWISE_DISABLED", "1")

    @rankwise.track(project="t")
    def f() -> object:
        return rankwise.get_run()

    assert f() is None
    assert not data_dir.exists() or not any(data_dir.rglob("*.rwlog"))


def test_get_run_outside_a_tracked_call_is_rankwise_run(data_dir: Path) -> None:
    run = rankwise.init(project="t", system=False, console="off")
    assert rankwise.get_run() is run
    rankwise.finish()
    assert rankwise.get_run() is None
