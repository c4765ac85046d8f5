"""A big run's stream files read in worker processes (``rankwise.read.parallel``).

``Api(dir=..., workers=N)`` reads a run's files in a process pool: what each worker
sends back (the stream's facts, fold and columns or their last rows) must survive
pickling whole, and the run must come out exactly as the read in one process gives it
(its fields byte for byte, its summaries, cross-rank line, divergence and first failure,
the columns it keeps). A pool that cannot start or a worker that dies falls back to
reading in this process, with a warning, never a failure. The run is 12 real stream
files (``make_stream`` records, the SDK's frames), one with NaN and +Inf, one torn, one
damaged in the middle, one a second incarnation.
"""

from __future__ import annotations

import logging
import math
import multiprocessing
import os
import pickle
import shutil
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pytest

from rankwise import Api
from rankwise.read import checkpoint, local, parallel
from rankwise.stream.columns import MetricColumns
from rankwise.stream.files import stream_filename, streams_dir
from rankwise.stream.identity import StreamId
from tests.helpers.streams import body, make_stream

STEPS = 30


def _values(rank: int) -> Any:
    def values(s: int) -> dict[str, Any]:
        out: dict[str, Any] = {"loss": 1.0 / (s + 1) + rank, "acc": s * 0.01, "step_count": s}
        if rank == 3 and s == 12:
            out["loss"] = math.nan  # rank 3 diverges first
        if rank == 5 and s >= 20:
            out["loss"] = math.inf
        if s % 5 == 0:
            out["lr"] = 0.1 / (s + 1)  # a key not logged every step
        return out

    return values


def _write_run(root: Path) -> Path:
    d = streams_dir(root, "p", "r")
    d.mkdir(parents=True)
    for r in range(11):
        key = StreamId("p", "r", f"rank-{r}", 0)
        steps = STEPS - 4 if r == 6 else STEPS  # rank 6 lags: the last complete step
        finish = "failed" if r == 8 else "finished"
        recs = make_stream(key, steps, rank=r, world=11, values=_values(r), finish=finish)
        data = body(recs)
        if r == 9:
            data = data[:-7]  # torn: its writer died mid-frame
        if r == 10:
            mid = len(data) * 9 // 10  # a bad frame near the end
            data = data[:mid] + bytes(b ^ 0xFF for b in data[mid : mid + 8]) + data[mid + 8 :]
        (d / stream_filename(key.label, 0)).write_bytes(data)
    key = StreamId("p", "r", "rank-2", 1)  # rank 2 restarted: a second incarnation
    recs = make_stream(key, STEPS + 3, rank=2, world=11, values=_values(2), t0=2e9)
    (d / stream_filename("rank-2", 1)).write_bytes(body(recs))
    return d


def _same_columns(a: MetricColumns | None, b: MetricColumns | None) -> None:
    assert (a is None) == (b is None)
    if a is None or b is None:
        return
    for name in ("seq", "step", "time", "weight"):
        assert np.array_equal(getattr(a, name), getattr(b, name), equal_nan=True), name
    assert a.values.keys() == b.values.keys() and a.present.keys() == b.present.keys()
    for k in a.values:
        assert np.array_equal(a.values[k], b.values[k], equal_nan=True), k
        assert a.values[k].dtype == b.values[k].dtype
    for k in a.present:
        assert np.array_equal(a.present[k], b.present[k]), k
    assert (a.kinds, a.first, a.others, a.damage) == (b.kinds, b.first, b.others, b.damage)
    assert a.ascending == b.ascending and a._records is None and b._records is None


def test_what_a_worker_returns_pickles_whole(tmp_path: Path) -> None:
    d = _write_run(tmp_path)
    for name in ("rank-3.0.rwlog", "rank-9.0.rwlog", "rank-10.0.rwlog"):
        for keep in ("full", "tail", None):
            got = local.load_job((name, 0, str(d / name), keep, 5))
            back = pickle.loads(pickle.dumps(got, protocol=pickle.HIGHEST_PROTOCOL))
            facts, fold, cols, _ = got
            assert back[0] == facts and back[1] == fold and back[3] == got[3]
            # The facts share the fold's dicts: so do their copies (one pickle).
            assert back[0].config is back[1].config
            _same_columns(back[2], cols)
            assert (cols is None) == (keep is None)
    nan = local.load_job(("rank-3", 0, str(d / "rank-3.0.rwlog"), "full", 5))
    assert nan[1].first_nonfinite["loss"].value == "NaN"
    torn = local.load_job(("rank-9", 0, str(d / "rank-9.0.rwlog"), "tail", 5))
    assert torn[0].damage and torn[2] is not None and torn[2].damage is not None


def _load(root: Path, workers: int) -> Any:
    _forget_folds(root)
    return Api(str(root), workers=workers).run("r", project="p")


def _forget_folds(root: Path) -> None:
    """Every stream file read whole again: the fold checkpoints an earlier read kept
    (``rankwise.read.checkpoint``, tested in test_fold_checkpoint.py) removed."""
    shutil.rmtree(root / "p" / "r" / checkpoint.FOLDER, ignore_errors=True)


def _fields(run: Any) -> bytes:
    return msgspec.msgpack.encode(run)  # every field, NaN and dict order included


def test_a_parallel_read_gives_the_sequential_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    d = _write_run(tmp_path)
    # Small files: read in the pool all the same. The first 8 or so keep every column,
    # the others their last 5 rows (whole steps), as past KEEP_BYTES.
    monkeypatch.setattr(parallel, "MIN_BYTES", 0)
    monkeypatch.setattr(parallel, "MIN_FILES", 8)
    one = (d / "rank-0.0.rwlog").stat().st_size
    monkeypatch.setattr(local, "KEEP_BYTES", 9 * one)
    monkeypatch.setattr(local, "TAIL_ROWS", 5)
    monkeypatch.setattr(parallel, "cpus", lambda: 2)  # this machine's may be 1
    sizes = [p.stat().st_size for p in d.iterdir()]
    assert parallel.pool_size(4, sizes) == 2 and parallel.pool_size(1, sizes) == 1
    seq = _load(tmp_path, 1)
    with caplog.at_level(logging.WARNING, logger="rankwise"):
        par = _load(tmp_path, 4)
    assert not caplog.records  # the pool ran: no fallback
    assert _fields(par) == _fields(seq)
    assert par.n_streams == 12 and par.divergence and par.first_failure is not None
    assert [f.label for f in par.divergence[0].first] == ["rank-3"]  # NaN at step 12, then +Inf
    assert [f.label for f in par.divergence[0].then] == ["rank-5"]
    assert {s.label for s in par.streams if s.damage} == {"rank-9", "rank-10"}
    assert par.summary_ranks == seq.summary_ranks
    cross, cross_seq = par.summary_cross_rank, seq.summary_cross_rank
    assert msgspec.msgpack.encode(cross) == msgspec.msgpack.encode(cross_seq)
    assert cross["loss"].step == STEPS - 5 and cross["loss"].posinf == 1  # rank 6's step
    kept, kept_seq = par._from, seq._from
    assert kept._kept_columns.keys() == kept_seq._kept_columns.keys()
    # This process read about half the bytes (6 files); the pool the others, of which
    # some kept every column (sent back whole) and some their last rows only.
    assert len(kept._kept_columns) >= 8 and len(kept._tails) == 12 - len(kept._kept_columns)
    assert len(kept._tails) >= 2
    assert kept._tails.keys() == kept_seq._tails.keys()
    for path, cols in kept._kept_columns.items():
        _same_columns(cols, kept_seq._kept_columns[path])
    for path, cols in kept._tails.items():
        _same_columns(cols, kept_seq._tails[path])
    assert repr(par.history(keys=["loss", "lr"])) == repr(seq.history(keys=["loss", "lr"]))
    # A run list (no columns kept) folds the same too.
    listed = []
    for w in (1, 4):
        _forget_folds(tmp_path)
        listed.append(Api(str(tmp_path), workers=w).runs(project="p"))
    assert [_fields(r) for r in listed[1]] == [_fields(r) for r in listed[0]]
    assert len(listed[0]) == 1 and not caplog.records


def test_a_pool_that_cannot_start_reads_in_this_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _write_run(tmp_path)
    monkeypatch.setattr(parallel, "MIN_BYTES", 0)
    monkeypatch.setattr(parallel, "cpus", lambda: 2)
    seq = _load(tmp_path, 1)
    monkeypatch.setattr(parallel, "START_METHOD", "no-such-start-method")
    with caplog.at_level(logging.WARNING, logger="rankwise"):
        par = _load(tmp_path, 2)
    assert _fields(par) == _fields(seq)
    assert len(caplog.records) == 1
    # This process read the first 5 files (its share), the pool was to read the others.
    assert "1 worker process(es) reading 7 stream files failed (ValueError" in caplog.text


def _pid(_: int) -> int:
    return os.getpid()


def _die_in_a_worker(x: int) -> int:
    if multiprocessing.parent_process() is not None:
        os._exit(3)  # a worker killed mid-read (out of memory, a signal)
    return x


def test_workers_are_other_processes_and_one_dying_falls_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # This process reads the first files, its share of the bytes; the pool the others.
    pids = parallel.map_files(_pid, list(range(9)), 3, [1] * 9)
    assert pids[:3] == [os.getpid()] * 3 and os.getpid() not in pids[3:]
    assert parallel.map_files(_pid, list(range(4)), 2, [5, 1, 1, 1])[1:] != [os.getpid()] * 3
    with caplog.at_level(logging.WARNING, logger="rankwise"):
        got = parallel.map_files(_die_in_a_worker, list(range(8)), 2, [1] * 8)
    assert got == list(range(8))
    assert "1 worker process(es) reading 4 stream files failed (BrokenProcessPool" in caplog.text


def test_rankwise_show_reads_in_workers_and_prints_the_same(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    from rankwise.cli import main as cli

    _write_run(tmp_path)
    monkeypatch.setattr(parallel, "MIN_BYTES", 0)
    monkeypatch.setattr(parallel, "cpus", lambda: 2)
    outs = []
    for workers in ("1", "2"):
        for cmd in ("show", "runs"):
            assert cli([cmd, *(["r"] if cmd == "show" else []), "--dir", str(tmp_path),
                        "--workers", workers]) == 0  # fmt: skip
            outs.append(capsys.readouterr().out)
    assert outs[:2] == outs[2:] and "diverged" in outs[0] and not caplog.records
    assert cli(["show", "r", "--dir", str(tmp_path), "--workers", "0"]) == 2
    assert "--workers must be at least 1" in capsys.readouterr().err
