"""Fold checkpoints (``rankwise.read.checkpoint``): a finished stream file is read whole
once; later reads of its run take its fold and last rows from ``<run>/.folds/`` and come
out exactly as a whole read does. A checkpoint that is not its file's (the file grew, was
replaced, the checkpoint is damaged) is not used; a running or damaged stream gets none;
a checkpoint that cannot be written changes nothing but the speed.
"""

from __future__ import annotations

import os
import secrets
import shutil
from pathlib import Path
from typing import Any

import msgspec
import pytest

from rankwise import Api
from rankwise.read import checkpoint, local
from rankwise.stream import records as R
from rankwise.stream.files import stream_filename, streams_dir
from rankwise.stream.frames import MAGIC
from rankwise.stream.identity import StreamId
from tests.helpers.streams import body, make_stream

STEPS = 40


def _values(rank: int) -> Any:
    def values(s: int) -> dict[str, Any]:
        out: dict[str, Any] = {"loss": 1.0 / (s + 1) + rank, "acc": s * 0.01, "n": s}
        if rank == 2 and s == 7:
            out["loss"] = float("nan")
        if s % 4 == 0:
            out["lr"] = 0.1 / (s + 1)
        return out

    return values


def _write_run(root: Path) -> Path:
    """Ranks 0-3 finished, rank 4 running (no Finish), rank 5 torn (its writer died)."""
    d = streams_dir(root, "p", "r")
    d.mkdir(parents=True)
    for r in range(6):
        key = StreamId("p", "r", f"rank-{r}", 0)
        finish = None if r == 4 else ("failed" if r == 3 else "finished")
        data = body(make_stream(key, STEPS - r, rank=r, world=6, values=_values(r), finish=finish))
        if r == 5:
            data = data[:-5]
        (d / stream_filename(key.label, 0)).write_bytes(data)
    return d


def _fields(run: Any) -> bytes:
    """Every field of the run, its summaries and its cross-rank line, NaN included."""
    return msgspec.msgpack.encode(
        [run, run.summary_ranks, run.summary_cross_rank, run.history(keys=["loss", "lr"])]
    )


def _whole(root: Path) -> bytes:
    """The run as a read of every file gives it (no checkpoint there to use)."""
    folds = root / "p" / "r" / checkpoint.FOLDER
    saved = folds.with_name("saved-folds")
    if folds.exists():
        folds.rename(saved)
    try:
        return _fields(Api(str(root)).run("r", project="p"))
    finally:
        shutil.rmtree(folds, ignore_errors=True)
        if saved.exists():
            saved.rename(folds)


class Reads:
    """Which stream files were read whole (``local.load_stream``)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.labels: list[str] = []
        real = local.load_stream

        def counted(label: str, *args: Any, **kw: Any) -> Any:
            self.labels.append(label)
            return real(label, *args, **kw)

        monkeypatch.setattr(local, "load_stream", counted)

    def take(self) -> list[str]:
        out, self.labels = sorted(self.labels), []
        return out


def test_finished_streams_are_read_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = _write_run(tmp_path)
    whole = _whole(tmp_path)
    reads = Reads(monkeypatch)
    first = _fields(Api(str(tmp_path)).run("r", project="p"))
    assert reads.take() == [f"rank-{r}" for r in range(6)]
    kept = sorted(p.name for p in (tmp_path / "p" / "r" / checkpoint.FOLDER).iterdir())
    # finished and failed streams alike; not the running one, not the torn one
    assert kept == [f"rank-{r}.0.fold" for r in range(4)]
    for again in range(2):
        got = _fields(Api(str(tmp_path)).run("r", project="p"))
        assert reads.take() == ["rank-4", "rank-5"], again
        assert got == first == whole
    # A run list folds them the same (no columns kept there).
    listed = Api(str(tmp_path)).runs(project="p")
    assert reads.take() == ["rank-4", "rank-5"]
    assert msgspec.msgpack.encode(listed) == msgspec.msgpack.encode(
        [Api(str(tmp_path)).run("r", project="p")]
    )
    reads.take()
    # No reader takes the folder for a stream, a run or a project.
    assert Api(str(tmp_path)).projects() == ["p"]
    assert [s.label for s in Api(str(tmp_path)).run("r", project="p").streams] == [
        f"rank-{r}" for r in range(6)
    ]
    assert (d / stream_filename("rank-0", 0)).exists()


def test_a_checkpoint_not_of_its_file_is_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    d = _write_run(tmp_path)
    Api(str(tmp_path)).run("r", project="p")  # keeps ranks 0-3
    reads = Reads(monkeypatch)
    # rank 0's file grew (a record after its Finish): read whole, and kept anew
    f0 = d / stream_filename("rank-0", 0)
    late = R.Metrics(seq=10_000, time=2e9, step=STEPS, values={"late": 1.0})
    with open(f0, "ab") as f:
        f.write(body([late])[len(MAGIC) :])
    # rank 1's file replaced by one of the same size and mtime: its first and last bytes
    # differ (another rank's values)
    f1 = d / stream_filename("rank-1", 0)
    st = f1.stat()
    other = body(
        make_stream(StreamId("p", "r", "rank-1", 0), STEPS - 1, rank=1, world=6,
                    values=_values(7), t0=1.5e9)
    )  # fmt: skip
    assert len(other) == st.st_size
    f1.write_bytes(other)
    os.utime(f1, ns=(st.st_atime_ns, st.st_mtime_ns))
    # rank 2's checkpoint damaged, rank 3's of another version
    folds = tmp_path / "p" / "r" / checkpoint.FOLDER
    (folds / "rank-2.0.fold").write_bytes(b"\x93not a checkpoint")
    three = folds / "rank-3.0.fold"
    ck = msgspec.msgpack.decode(three.read_bytes(), type=checkpoint.Checkpoint)
    three.write_bytes(msgspec.msgpack.encode(msgspec.structs.replace(ck, version=ck.version + 1)))
    got = _fields(Api(str(tmp_path)).run("r", project="p"))
    assert reads.take() == [f"rank-{r}" for r in range(6)]
    assert got == _whole(tmp_path)
    # all four kept again, of the files as they are now
    reads.take()
    assert _fields(Api(str(tmp_path)).run("r", project="p")) == got
    assert reads.take() == ["rank-4", "rank-5"]


def test_a_checkpoint_that_cannot_be_written_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write_run(tmp_path)
    (tmp_path / "p" / "r" / checkpoint.FOLDER).write_text("a file where the folder goes")
    reads = Reads(monkeypatch)
    first = _fields(Api(str(tmp_path)).run("r", project="p"))
    second = _fields(Api(str(tmp_path)).run("r", project="p"))
    assert first == second
    assert reads.take() == sorted([f"rank-{r}" for r in range(6)] * 2)


def test_checkpoints_go_with_their_run(tmp_path: Path) -> None:
    _write_run(tmp_path)
    api = Api(str(tmp_path))
    api.run("r", project="p")
    folds = tmp_path / "p" / "r" / checkpoint.FOLDER
    assert len(list(folds.iterdir())) == 4
    api.delete_runs(["r"], project="p")
    assert not folds.exists() and api.runs(project="p") == []
    api.restore_runs(["r"], project="p")
    assert len(list(folds.iterdir())) == 4


def test_stale_checkpoints_are_read_as_files_without_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run whose checkpoints no longer hold (another version's here) is read as one
    without any: its files count at their size towards ``KEEP_BYTES`` and the worker
    pool. Counted as empty, every such file kept all its columns: a 1,024-rank run of
    10,000 steps took 4.9 GB and one process again."""
    d = _write_run(tmp_path)
    Api(str(tmp_path)).run("r", project="p")  # keeps ranks 0-3
    one = (d / stream_filename("rank-0", 0)).stat().st_size
    monkeypatch.setattr(local, "KEEP_BYTES", 2 * one)
    monkeypatch.setattr(checkpoint, "VERSION", checkpoint.VERSION + 1)
    reads = Reads(monkeypatch)
    run = Api(str(tmp_path)).run("r", project="p")
    assert reads.take() == [f"rank-{r}" for r in range(6)]
    assert len(run._from._kept_columns) == 2  # type: ignore[attr-defined]
    assert _fields(run) == _whole(tmp_path)


def test_nothing_is_read_or_written_through_a_link(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A shared data directory: someone else's ``.folds`` that is a link to a folder of
    the reader's, a checkpoint that is a link to a file of theirs, a FIFO where a
    checkpoint goes (a read would block). Nothing is written through a link, nothing read
    through one, nothing blocks; the run reads as a whole read gives it."""
    _write_run(tmp_path)
    whole = _whole(tmp_path)
    run_dir = tmp_path / "p" / "r"
    mine = tmp_path / "mine"
    mine.mkdir()
    (run_dir / checkpoint.FOLDER).symlink_to(mine, target_is_directory=True)
    assert _fields(Api(str(tmp_path)).run("r", project="p")) == whole
    assert list(mine.iterdir()) == []  # nothing written there
    (run_dir / checkpoint.FOLDER).unlink()
    Api(str(tmp_path)).run("r", project="p")  # keeps ranks 0-3
    folds = run_dir / checkpoint.FOLDER
    # rank 0's checkpoint a link to a good checkpoint of another file: not followed
    elsewhere = tmp_path / "elsewhere.fold"
    (folds / "rank-0.0.fold").rename(elsewhere)
    (folds / "rank-0.0.fold").symlink_to(elsewhere)
    # rank 1's a FIFO: not opened to block on
    (folds / "rank-1.0.fold").unlink()
    os.mkfifo(folds / "rank-1.0.fold")
    # a link planted under a name a write might take: never written through
    target = tmp_path / "bashrc"
    target.write_text("mine\n")
    monkeypatch.setattr(secrets, "token_hex", lambda n: "0" * (2 * n))
    (folds / "rank-2.0.fold").unlink()
    (folds / f".rank-2.0.fold.{'0' * 16}.tmp").symlink_to(target)
    reads = Reads(monkeypatch)
    assert _fields(Api(str(tmp_path)).run("r", project="p")) == whole
    assert reads.take() == ["rank-0", "rank-1", "rank-2", "rank-4", "rank-5"]
    assert target.read_text() == "mine\n"
    assert not (folds / "rank-2.0.fold").exists()  # its write was refused, not forced
