"""``rankwise.hang.hang_report`` and the flight-recorder parsing, on their own (the torchrun
jobs that exercise them end to end are in test_hang_story.py)."""

from __future__ import annotations

import dataclasses
import pickle
import sys
import types
from typing import Any

import msgspec

from rankwise.hang import HangReport, RankPosition, hang_report, ranks_text
from rankwise.sdk import flight
from rankwise.sdk.flight import BUFFER_VAR, PER_GROUP, configure, parse
from rankwise.stream import records as R

WAIT = "all_reduce at train.py:88"
STACK = '  File "train.py", line 88, in main\n    dist.all_reduce(x)\n'


def coll(seq: int, op: str = "gloo:all_reduce", pg: str = "0 (default_pg)") -> R.Collective:
    return R.Collective(pg=pg, seq=seq, op=op, state="scheduled", sizes=[[4]], dtypes=["Float"])


def stalled(
    rank: int, where: str = WAIT, stack: str = STACK, flight: list[R.Collective] | None = None
) -> RankPosition:
    stall = R.Stall(
        seq=9,
        time=100.0 + rank,
        idle_seconds=10.0,
        where=where,
        stacks={f"MainThread ({1000 + rank})": stack, "rankwise-writer (5)": "other"},
        thread=f"MainThread ({1000 + rank})",
        flight=flight or [],
    )
    return RankPosition(label=f"rank-{rank}", rank=rank, state="running", stall=stall)


def test_the_rank_elsewhere_is_named_first_from_the_stacks() -> None:
    sleep = '  File "train.py", line 80, in main\n    time.sleep(60)\n'
    report = hang_report(
        [
            stalled(0),
            stalled(1),
            stalled(2, "sleep at train.py:80", sleep),
            stalled(3),
        ]
    )
    assert report is not None and report.collective is None
    assert report.odd == ["rank-2"]
    assert report.waiting is not None and report.waiting.where == WAIT
    assert [r.rank for r in report.waiting.ranks] == [0, 1, 3]
    assert [g.where for g in report.elsewhere] == ["sleep at train.py:80"]
    assert report.message.startswith("rank 2 is in sleep at train.py:80")
    assert "ranks 0, 1, 3 wait in all_reduce at train.py:88" in report.lines
    assert report.time == 90.0  # rank 0 stopped logging first
    # Same place by ``where`` but another stack is another place.
    other = stalled(1, WAIT, '  File "train.py", line 70, in warmup\n    dist.all_reduce(x)\n')
    split = hang_report([stalled(0), other, stalled(2)])
    assert split is not None and split.odd == ["rank-1"]


def test_the_flight_recorder_names_the_collective_and_who_never_entered_it() -> None:
    done = [coll(s) for s in range(1, 6)]
    report = hang_report(
        [
            stalled(0, flight=[*done, coll(6)]),
            stalled(1, flight=done),  # waits in the same line, yet never entered #6
            stalled(2, flight=[*done, coll(6)]),
            stalled(3, flight=[*done, coll(6)]),
        ]
    )
    assert report is not None and report.collective is not None
    c = report.collective
    assert (c.seq, c.op, c.entered, c.pg) == (6, "all_reduce", [0, 2, 3], "0 (default_pg)")
    assert [(m.label, m.last_seq) for m in c.missing] == [("rank-1", 5)]
    assert report.odd == ["rank-1"]
    line = next(x for x in report.lines if x.startswith("collective #6"))
    assert "(all_reduce, 1 tensor of [4] float)" in line
    assert line.endswith("entered by ranks 0, 2, 3; rank 1's last is #5 (all_reduce)")


def test_logging_and_ended_ranks_are_listed_and_a_quiet_job_has_no_report() -> None:
    running = RankPosition("rank-1", 1, "running", None)
    crashed = RankPosition("rank-3", 3, "crashed", None)
    assert hang_report([running, crashed]) is None
    report = hang_report([stalled(0), running, stalled(2), crashed])
    assert report is not None
    assert [r.label for r in report.logging] == ["rank-1"]
    assert [(r.label, r.state) for r in report.ended] == [("rank-3", "crashed")]
    assert report.odd == ["rank-1"]  # every stalled rank waits in one place
    assert report.message.startswith("rank 1 is still logging")
    assert "rank 3 crashed" in report.lines


def test_the_report_round_trips_as_a_reply_does() -> None:
    report = hang_report(
        [stalled(0, flight=[coll(2)]), stalled(1, "x at y.py:1", flight=[coll(1)])]
    )
    assert report is not None
    back = msgspec.json.decode(msgspec.json.encode(report), type=HangReport)
    assert back == report


def test_ranks_text_folds_runs() -> None:
    assert ranks_text([3]) == "rank 3"
    assert ranks_text([0, 1, 2, 4, 5, 7]) == "ranks 0–2, 4, 5, 7"


def test_parse_keeps_the_last_entries_of_each_group_without_p2p() -> None:
    def entry(seq: int, pg: tuple[str, str], **kw: object) -> dict[str, object]:
        return {
            "process_group": pg,
            "collective_seq_id": seq,
            "profiling_name": "gloo:all_reduce",
            "state": "scheduled",
            "retired": seq < 100,
            "input_sizes": [[2, 3]],
            "input_dtypes": ["Float"],
            "time_created_ns": 1_700_000_000_000_000_000,
            **kw,
        }

    dump = {
        "entries": [
            *[entry(s, ("0", "default_pg")) for s in range(1, 101)],
            entry(3, ("1", "sub")),
            entry(0, ("0", "default_pg"), is_p2p=True),
        ]
    }
    got = parse(dump)
    default = [c for c in got if c.pg == "0 (default_pg)"]
    assert len(default) == PER_GROUP and default[-1].seq == 100 and default[0].seq == 37
    assert default[-1].state == "scheduled" and default[-2].state == "completed"
    assert [c.pg for c in got if c.pg != "0 (default_pg)"] == ["1 (sub)"]
    assert default[0].sizes == [[2, 3]] and default[0].time == 1.7e9


def test_a_finished_rank_is_not_hung_and_a_killed_one_still_is() -> None:
    # finish() may stop the watchdog before it records that logging resumed.
    done = [dataclasses.replace(stalled(r), state="finished") for r in range(2)]
    assert hang_report(done) is None
    killed = [dataclasses.replace(stalled(0), state="killed"), stalled(1, "sleep at t.py:1")]
    report = hang_report([*killed, RankPosition("rank-2", 2, "finished", None)])
    assert report is not None and [r.state for g in [report.waiting] if g for r in g.ranks]
    assert [(r.label, r.state) for r in report.ended] == [("rank-2", "finished")]


def test_init_turns_the_buffer_on_only_when_it_may() -> None:
    env: dict[str, str] = {}
    configure(True, env)
    assert env == {BUFFER_VAR: "2000"}
    mine = {BUFFER_VAR: "50"}
    configure(True, mine)  # a value the user set is respected
    assert mine == {BUFFER_VAR: "50"}
    off: dict[str, str] = {}
    configure(False, off)  # Settings(flight_recorder=False)
    assert off == {}


def test_init_leaves_the_buffer_alone_once_the_group_exists() -> None:
    import torch.distributed as dist

    from tests.helpers.env import free_port

    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1
    )
    try:
        env: dict[str, str] = {}
        configure(True, env)  # torch read the variable when it made the group: too late
        assert env == {}
    finally:
        dist.destroy_process_group()


def _fake_torch(monkeypatch: Any, **dumps: Any) -> None:
    """torch as a CUDA build shows it to ``flight.entries``: an initialised group and the
    recorders' dumps (this machine's CPU build has no NCCL recorder to dump)."""
    c10d = types.SimpleNamespace(**dumps)
    torch = types.SimpleNamespace(_C=types.SimpleNamespace(_distributed_c10d=c10d))
    dist = types.SimpleNamespace(is_available=lambda: True, is_initialized=lambda: True)
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setitem(sys.modules, "torch.distributed", dist)


def _dump(*entries: dict[str, Any]) -> Any:
    def dump(includeCollectives: bool, includeStackTraces: bool, onlyActive: bool) -> bytes:
        assert includeCollectives and not includeStackTraces and not onlyActive
        return pickle.dumps({"version": "2.10", "entries": list(entries)})

    return dump


def _entry(pg: tuple[str, str], seq: int, op: str, state: str) -> dict[str, Any]:
    return {
        "process_group": pg, "collective_seq_id": seq, "profiling_name": op, "state": state,
        "retired": state == "completed", "is_p2p": False, "input_sizes": [[1024]],
        "input_dtypes": ["Float"], "time_created_ns": 1_700_000_000_000_000_000 + seq,
    }  # fmt: skip


def test_entries_read_nccls_recorder_and_gloos(monkeypatch: Any) -> None:
    """NCCL's groups are kept by a recorder of their own (``_dump_nccl_trace``), apart
    from gloo's (``_dump_fr_trace``): a job on GPUs, perhaps with a gloo group beside,
    has its collectives in both. Seen on an H200 (torch 2.11): reading
    ``_dump_fr_trace`` alone found no entry of an NCCL job."""
    nccl = [_entry(("0", "default_pg"), s, "nccl:all_reduce", "completed") for s in (1, 2)]
    nccl.append(_entry(("0", "default_pg"), 3, "nccl:all_reduce", "scheduled"))
    gloo = [_entry(("1", "cpu"), 1, "gloo:barrier", "completed")]
    _fake_torch(monkeypatch, _dump_nccl_trace=_dump(*nccl), _dump_fr_trace=_dump(*gloo))
    got = flight.entries(True)
    assert [(c.pg, c.seq, c.op, c.state) for c in got] == [
        ("0 (default_pg)", 1, "nccl:all_reduce", "completed"),
        ("0 (default_pg)", 2, "nccl:all_reduce", "completed"),
        ("0 (default_pg)", 3, "nccl:all_reduce", "scheduled"),
        ("1 (cpu)", 1, "gloo:barrier", "completed"),
    ]
    # A CPU build has no NCCL recorder; a dump that fails leaves the other one's entries.
    _fake_torch(monkeypatch, _dump_fr_trace=_dump(*gloo))
    assert [c.op for c in flight.entries(True)] == ["gloo:barrier"]

    def broken(**_: Any) -> bytes:
        raise RuntimeError("dump failed")

    _fake_torch(monkeypatch, _dump_nccl_trace=_dump(*nccl), _dump_fr_trace=broken)
    assert [c.seq for c in flight.entries(True)] == [1, 2, 3]
    assert flight.entries(False) == []
