"""``Api(server=URL)`` answers as ``Api(dir=...)`` does: same runs, filters, objects."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import rankwise
from tests.helpers.runs import assert_same_history
from tests.helpers.servers import AppServer, bearer

FAST = {"flush_interval": 0.02, "upload_interval": 0.02, "upload_timeout": 10}


@pytest.fixture
def server(app_server: AppServer) -> str:
    return app_server.url


def test_filters_and_objects_match_the_local_reader(data_dir: Path, server: str) -> None:
    specs = [
        ("a", "vision", "g1", ["x", "y"], 0),
        ("a", "vision", "g2", ["x"], 1),
        ("a", "nlp", "g1", ["y"], 0),
        ("b", "nlp", None, [], 0),
    ]
    for project, job_type, group, tags, code in specs:
        run = rankwise.init(
            project=project,
            job_type=job_type,
            group=group,
            tags=tags,
            server=server,
            settings=FAST,
            config={"job": job_type},
        )
        for step in range(5):
            run.log({"loss": step * 0.5})
        run.finish(exit_code=code)
    local, remote = rankwise.Api(dir=data_dir), rankwise.Api(server=server)
    assert remote.projects() == local.projects() == ["a", "b"]
    queries: list[dict[str, object]] = [
        {},
        {"project": "a"},
        {"project": "a", "group": "g1"},
        {"job_type": "nlp"},
        {"tags": "x"},
        {"tags": ["x", "y"]},
        {"state": "failed"},
        {"state": ["finished", "failed"], "project": "a"},
        {"project": "nope"},
    ]
    for query in queries:
        mine = [(r.project, r.id) for r in local.runs(**query)]
        theirs = [(r.project, r.id) for r in remote.runs(**query)]
        assert sorted(theirs) == sorted(mine), query
    for lr in local.runs():
        rr = remote.run(lr.id)
        assert isinstance(rr, rankwise.api.RunInfo)
        assert (rr.project, rr.state, rr.group, rr.job_type, rr.tags, rr.config) == (
            lr.project,
            lr.state,
            lr.group,
            lr.job_type,
            lr.tags,
            lr.config,
        )
        assert rr.summary == lr.summary and rr.steps == lr.steps == 5
        assert rr.summary_ranks == lr.summary_ranks and rr.environment == lr.environment
        assert (rr.run_ranks, rr.run_nodes) == (lr.run_ranks, lr.run_nodes) == (1, 1)
        assert rr.summary_cross_rank == lr.summary_cross_rank
        assert lr.summary_cross_rank["loss"]["step"] == 4
        assert [s.label for s in rr.streams] == [s.label for s in lr.streams]
        assert_same_history(lr, rr, f"sqlite:///{data_dir.parent / 'server.db'}")
        assert remote.run(f"{lr.project}/{lr.id}").id == lr.id
    listed = {r.id: r for r in remote.runs()}  # from a list: fetched on first use
    assert {i: r.summary_ranks for i, r in listed.items()} == {
        r.id: r.summary_ranks for r in local.runs()
    }
    for reader in (local, remote):  # both refuse an unknown state with the same error
        with pytest.raises(rankwise.UsageError, match=r"state='bogus' is not one of running"):
            reader.runs(state="bogus")
    with pytest.raises(rankwise.RunNotFoundError, match="no run 'missing'"):
        remote.run("missing")


# Where each reader read a stream from (its file; its run's URL): the one field of the
# read model that two readers of the same stream cannot share.
WHERE_READ = {"path"}


def test_every_field_of_every_run_reads_back_the_same(data_dir: Path, server: str) -> None:
    """Adding a field to the read model is one change: whatever ``RunInfo`` and
    ``StreamInfo`` declare, both readers fill in alike (walked field by field, so a new
    field is compared here without touching this test)."""
    import msgspec

    from rankwise.api import RunInfo, StreamInfo

    for i, (code, tags) in enumerate([(0, ["a"]), (1, ["b", "c"])]):
        run = rankwise.init(
            project="fields", id=f"r{i}", server=server, settings=FAST, tags=tags,
            group="g", job_type="train", notes="n", config={"lr": 0.1 * (i + 1)},
        )  # fmt: skip
        for step in range(4):
            run.log({"loss": 1.0 / (step + 1), "acc": step / 4})
        run.summary["best"] = 0.5
        run.finish(exit_code=code)
    local, remote = rankwise.Api(dir=data_dir), rankwise.Api(server=server)
    run_fields = msgspec.structs.fields(RunInfo)
    stream_fields = [f for f in msgspec.structs.fields(StreamInfo) if f.name not in WHERE_READ]
    assert len(run_fields) >= 28 and len(stream_fields) >= 21  # the walk sees the model
    compared = 0
    for lr in local.runs(project="fields"):
        listed = {r.id: r for r in remote.runs(project="fields")}[lr.id]
        for rr in (remote.run(lr.id, project="fields"), listed):
            for f in run_fields:
                if f.name == "streams":
                    assert len(rr.streams) == len(lr.streams) == 1
                    for rs, ls in zip(rr.streams, lr.streams):
                        for g in stream_fields:
                            assert getattr(rs, g.name) == getattr(ls, g.name), g.name
                            compared += 1
                    continue
                # By its public name: a renamed field (summary_ranks) is read through the
                # property that fetches it when a listed run lacks it.
                mine, theirs = getattr(lr, f.encode_name), getattr(rr, f.encode_name)
                assert theirs == mine, f.encode_name
                compared += 1
    assert compared == 2 * 2 * (len(run_fields) - 1 + len(stream_fields))
    failed = local.run("r1", project="fields")
    assert failed.state == "failed" and failed.first_failure is not None


def _exact(value: object) -> object:
    """A value with NaN made comparable (NaN == NaN here, and nowhere else)."""
    import math

    if isinstance(value, float) and math.isnan(value):
        return "nan"
    return value


def test_cross_rank_summary_agrees_exactly_with_nan_and_inf(data_dir: Path, server: str) -> None:
    """``summary_cross_rank`` is one struct from both readers, NaN and ±Inf included; a
    JSON reply spells those as strings, as it always has."""
    import math

    import httpx
    import msgspec

    from rankwise.wire.runs import CrossRankValue

    run = rankwise.init(project="nan", id="r", server=server, settings=FAST)
    run.log({"loss": 1.0, "up": 1.0, "down": 2.0}, step=0)
    run.log({"loss": float("nan"), "up": math.inf, "down": -math.inf}, step=1)
    run.finish()
    local = rankwise.Api(dir=data_dir).run("r", project="nan")
    remote = rankwise.Api(server=server).run("r", project="nan")
    mine, theirs = local.summary_cross_rank, remote.summary_cross_rank
    assert mine.keys() == theirs.keys() == {"loss", "up", "down"}
    for key in mine:
        assert type(mine[key]) is type(theirs[key]) is CrossRankValue
        a, b = msgspec.structs.asdict(mine[key]), msgspec.structs.asdict(theirs[key])
        assert {k: _exact(v) for k, v in a.items()} == {k: _exact(v) for k, v in b.items()}
    assert math.isnan(mine["loss"].mean) and mine["loss"]["nan"] == 1 and mine["loss"].n == 0
    assert mine["up"].max == math.inf and mine["down"].min == -math.inf
    token = bearer(os.environ["RANKWISE_TOKEN"])
    sent = httpx.get(f"{server}/api/v1/projects/nan/runs/r", headers=token).json()
    sent = sent["summary_cross_rank"]
    assert sent["loss"] == {"step": 1, "n": 0, "mean": "NaN", "wmean": "NaN", "min": "NaN",
                            "max": "NaN", "nan": 1, "posinf": 0, "neginf": 0, "sum": "NaN",
                            "reduce": "mean"}  # fmt: skip
    assert (sent["up"]["mean"], sent["down"]["mean"]) == ("Infinity", "-Infinity")
