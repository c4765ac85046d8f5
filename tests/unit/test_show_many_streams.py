"""``rankwise show`` of a run with more than 64 streams lists the streams that did not
finish cleanly and counts the others (``--all-streams`` lists them all); a small run's
table is whole. The run is 100 stream files written as the SDK writes them."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from rankwise.cli import main as cli
from rankwise.stream.files import stream_filename, streams_dir
from rankwise.stream.identity import StreamId
from tests.helpers.streams import body, make_stream


def _run(root: Path, run: str, ranks: int) -> None:
    d = streams_dir(root, "p", run)
    d.mkdir(parents=True)
    for r in range(ranks):
        key = StreamId("p", run, f"rank-{r}", 0)
        finish = "failed" if r == 70 else "killed" if r == 71 else "finished"
        recs = make_stream(key, 3, rank=r, world=ranks, finish=finish)
        (d / stream_filename(key.label, 0)).write_bytes(body(recs))


def _stream_rows(out: str) -> list[str]:
    lines = out.split("\nstreams\n", 1)[1].splitlines()
    return [ln.split()[0] for ln in lines[1:] if ln.startswith("rank-")]


def test_many_streams_list_the_odd_ones(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _run(tmp_path, "big", 100)
    _run(tmp_path, "small", 8)
    assert cli(["show", "big", "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert _stream_rows(out) == ["rank-70", "rank-71"]
    assert "... and 98 more streams finished cleanly (--all-streams lists them)" in out
    assert cli(["show", "big", "--dir", str(tmp_path), "--all-streams"]) == 0
    out = capsys.readouterr().out
    assert len(_stream_rows(out)) == 100 and "more streams" not in out
    assert cli(["show", "small", "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert len(_stream_rows(out)) == 8 and "more streams" not in out


def test_api_run_keeps_columns_of_a_bounded_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``Api.run()`` keeps the columns it read of at most ``KEEP_BYTES`` of stream files
    (a 1,024-rank run kept 4.9 GB); the streams past it are read again when asked, and
    every read gives what keeping them all gives."""
    from rankwise import Api
    from rankwise.read import checkpoint, local

    d = streams_dir(tmp_path, "p", "r")
    d.mkdir(parents=True)
    for r in range(6):  # ranks at different last steps: rank 5 lags (the complete step)
        key = StreamId("p", "r", f"rank-{r}", 0)
        recs = make_stream(key, 40 - 5 * (r == 5), rank=r, world=6)
        (d / stream_filename(key.label, 0)).write_bytes(body(recs))

    def fresh() -> Any:
        """The run read from its files (no fold checkpoint of an earlier read used:
        ``rankwise.read.checkpoint``, tested in test_fold_checkpoint.py)."""
        shutil.rmtree(tmp_path / "p" / "r" / checkpoint.FOLDER, ignore_errors=True)
        return Api(str(tmp_path)).run("r", project="p")

    def read() -> tuple[Any, Any, Any, int]:
        run = fresh()
        kept = len(run._from._kept_columns)
        rows = run.history(keys=["loss"])
        return run.summary_cross_rank, run.summary_ranks, rows, kept

    whole = read()
    assert whole[3] == 6
    assert whole[0]["loss"].step == 34  # the lagging rank's last step: it was folded
    one = (d / stream_filename("rank-0", 0)).stat().st_size
    monkeypatch.setattr(local, "KEEP_BYTES", 2 * one)
    from rankwise.stream import columns

    reads: list[str] = []
    real = columns.read_columns

    def counted(path: Path, keys: Any = None) -> Any:
        reads.append(path.name)
        return real(path, keys)

    monkeypatch.setattr(columns, "read_columns", counted)
    # Past the budget each stream keeps its last rows: the last 10 reach step 34, so
    # the summary needs no file read again.
    monkeypatch.setattr(local, "TAIL_ROWS", 10)
    run = fresh()
    reads.clear()
    assert run.summary_cross_rank == whole[0] and reads == []
    assert read()[:3] == whole[:3]
    # The last 3 rows (steps 37-39) of the 40-step ranks past the budget do not reach
    # it: those streams are read again, and the summary is the same.
    monkeypatch.setattr(local, "TAIL_ROWS", 3)
    run = fresh()
    reads.clear()
    assert run.summary_cross_rank == whole[0]
    assert sorted(reads) == [stream_filename(f"rank-{r}", 0) for r in (2, 3, 4)]
    bounded = read()
    assert bounded[3] == 2
    assert bounded[:3] == whole[:3]


def test_a_tail_keeps_whole_steps_and_refuses_steps_going_back() -> None:
    import numpy as np

    from rankwise.stream.columns import MetricColumns, tail

    def cols(steps: list[int]) -> MetricColumns:
        n = len(steps)
        return MetricColumns(
            seq=np.arange(n), step=np.array(steps), time=np.arange(n, dtype=float),
            weight=np.full(n, np.nan), values={"a": np.arange(n, dtype=float)},
            present={"a": np.ones(n, bool)},
        )  # fmt: skip

    got = tail(cols([0, 1, 1, 2, 2, 2, 3]), 3)
    assert got is not None and got.step.tolist() == [2, 2, 2, 3]  # step 2 whole
    assert got.values["a"].tolist() == [3.0, 4.0, 5.0, 6.0] and got.others == []
    whole = tail(cols([0, 1]), 5)
    assert whole is not None and whole.step.tolist() == [0, 1]
    assert tail(cols([0, 2, 1]), 2) is None
