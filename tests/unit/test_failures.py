"""``rankwise.failures.first_failure``: the rule, on its own (the torchrun jobs that
exercise it end to end are in test_failure_story.py)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from rankwise.failures import Failure, StreamEnd, first_failure
from tests.helpers.servers import subprocess_env


def end(label: str, state: str, t: float | None, inc: int = 0, **kw: object) -> StreamEnd:
    rank = int(label.split("-")[1])
    fields = {"error_type": None, "error_message": None, **kw}
    return StreamEnd(label, inc, rank, 0, state, time=t, **fields)


def test_the_earliest_failed_or_crashed_stream_leads() -> None:
    first = first_failure(
        [
            end("rank-0", "failed", 12.0, error_type="RuntimeError", error_message="peer gone"),
            end("rank-1", "crashed", 10.0),  # its last sign of life
            end("rank-2", "killed", 12.5, signal=15),
            end("rank-3", "finished", 13.0),
        ]
    )
    assert first is not None
    assert (first.label, first.state, first.time) == ("rank-1", "crashed", 10.0)
    assert [(t.label, t.state) for t in first.then] == [("rank-0", "failed"), ("rank-2", "killed")]
    assert first.describe().startswith("rank 1 crashed")
    assert first.then[1].describe() == "rank 2 killed by signal 15"
    assert Failure.from_dict(first.to_dict()) == first


def test_a_rank_silent_before_a_peer_symptom_leads_until_its_death_is_known() -> None:
    """Rank 1 was SIGKILLed at 10.0 but is still read as running (its death not yet known:
    another host, or a heartbeat not yet late); rank 0's gloo error is a symptom."""
    gloo = "[../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer"
    streams = [
        end("rank-0", "failed", 12.0, error_type="RuntimeError", error_message=gloo),
        end("rank-1", "running", 10.0),  # its last record
        end("rank-2", "running", 12.4),  # still writing after the symptom: not silent
    ]
    first = first_failure(streams)
    assert first is not None
    assert (first.label, first.state, first.time) == ("rank-1", "silent", 10.0)
    assert [(t.label, t.state) for t in first.then] == [("rank-0", "failed")]
    when = time.strftime("%H:%M:%S", time.localtime(10.0))
    assert first.describe() == f"rank 1: no sign of life since {when} — checking"
    assert Failure.from_dict(first.to_dict()) == first
    # Once its death is known, it leads as crashed, as before.
    streams[1] = end("rank-1", "crashed", 10.0)
    known = first_failure(streams)
    assert known is not None and (known.label, known.state) == ("rank-1", "crashed")
    # A cause that is not a peer symptom keeps the lead; so does a symptom with no one
    # silent since before it.
    streams[1] = end("rank-1", "running", 10.0)
    streams[0] = end("rank-0", "failed", 12.0, error_type="ValueError", error_message="bad")
    assert (first_failure(streams) or first).label == "rank-0"
    streams[0] = end("rank-0", "failed", 9.0, error_type="RuntimeError", error_message=gloo)
    assert (first_failure(streams) or first).label == "rank-0"


def test_killed_alone_is_no_failure_and_killed_before_is_not_after() -> None:
    assert first_failure([end("rank-0", "killed", 1.0), end("rank-1", "finished", 2.0)]) is None
    first = first_failure([end("rank-0", "killed", 1.0), end("rank-1", "failed", 2.0)])
    assert first is not None and first.label == "rank-1" and first.then == []


def test_only_the_latest_incarnation_counts() -> None:
    recovered = [end("rank-1", "failed", 1.0, inc=0), end("rank-1", "finished", 9.0, inc=1)]
    assert first_failure(recovered) is None
    again = [end("rank-1", "finished", 1.0, inc=0), end("rank-1", "failed", 9.0, inc=1)]
    first = first_failure(again)
    assert first is not None and first.incarnation == 1


def test_ties_and_unknown_times() -> None:
    first = first_failure(
        [end("rank-2", "failed", 5.0), end("rank-1", "failed", 5.0), end("rank-0", "crashed", None)]
    )
    assert first is not None and first.label == "rank-1"  # a tie goes to the lower rank
    assert [t.label for t in first.then] == ["rank-2", "rank-0"]  # unknown time: last
    assert first.describe() == "rank 1 failed"


SIGTERM_WHILE_ENDING = """
import os, signal, sys, time, rankwise
run = rankwise.init(project="p", dir=sys.argv[1], system=False, console="off")
run.log({"loss": 1.0})

class Launcher:  # a launcher's SIGTERM, just as the failing rank is ending
    def stop(self, deadline):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.2)

run.add_component(Launcher())
raise RuntimeError("the cause")
"""


def test_a_sigterm_while_a_failing_run_ends_keeps_its_finish_record(tmp_path: Path) -> None:
    import rankwise

    out = subprocess.run(
        [sys.executable, "-c", SIGTERM_WHILE_ENDING, str(tmp_path)],
        env=subprocess_env(), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == -signal.SIGTERM, out.stderr  # delivered once the run ended
    assert "RuntimeError: the cause" in out.stderr  # the traceback still printed
    (run,) = rankwise.Api(dir=tmp_path).runs()
    (stream,) = run.streams
    assert (stream.state, stream.error_type, stream.error_message) == (
        "failed",
        "RuntimeError",
        "the cause",
    )
    assert run.first_failure is not None and run.first_failure.message == "the cause"
