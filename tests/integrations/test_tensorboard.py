"""TensorBoard in: live capture of both SummaryWriters on 2 torchrun ranks
(``rankwise.init(tensorboard=True)``), and ``rankwise import tensorboard`` of the event
directories that job wrote, one per rank, read back exactly, twice, and truncated.

One torchrun job (``tests/scripts/tb_job.py``) serves every test of the module.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import rankwise
from rankwise.cli import main as cli
from tests.helpers.env import clean_env, need
from tests.helpers.jobs import FAST, SCRIPTS, torchrun

pytestmark = pytest.mark.torchrun
need("tensorboard")
need("tensorboardX")

STEPS = 6


def value(rank: int, step: int) -> float:
    return rank * 100 + step / 4


class Job:
    def __init__(self, folder: Path, out: str) -> None:
        self.folder, self.out = folder, out
        self.data, self.tb = folder / "data", folder / "tb"

    def run(self) -> rankwise.RunInfo:
        (run,) = rankwise.Api(dir=self.data).runs("tb")
        return run


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Job:
    folder = tmp_path_factory.mktemp("tb")
    cmd = [*torchrun(), "--standalone", "--nproc-per-node=2", str(SCRIPTS / "tb_job.py"),
           "--dir", str(folder / "data"), "--tb", str(folder / "tb")]  # fmt: skip
    out = subprocess.run(
        cmd, env=clean_env(**FAST), cwd=folder, capture_output=True, text=True, timeout=240
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return Job(folder, out.stdout + out.stderr)


def rows(run: rankwise.RunInfo, label: str, key: str) -> list[tuple[int, Any]]:
    return [(r["step"], r[key]) for r in run.history([key], label=label)]


def test_live_scalars_of_both_writers_per_rank(job: Job) -> None:
    run = job.run()
    assert sorted(s.label for s in run.streams) == ["rank-0", "rank-1"]
    assert run.state == "finished"
    for rank in (0, 1):
        label = f"rank-{rank}"
        want = [(s, value(rank, s)) for s in range(STEPS)]
        assert rows(run, label, "train/loss") == want
        # a tensor handed to add_scalar is read on the writer thread, same value
        assert rows(run, label, "train/tensor") == [(s, v + 1) for s, v in want]
        assert rows(run, label, "lr/a") == [(s, float(s)) for s in range(STEPS)]
        assert rows(run, label, "lr/b") == [(s, float(rank)) for s in range(STEPS)]
        # the second writer of the process: its log dir's name is the prefix
        assert rows(run, label, "tbx/acc") == [(s, v + 2) for s, v in want]
        assert rows(run, label, "hp/final") == [(STEPS, value(rank, STEPS))]
    assert run.config["lr"] == 0.5 and run.config["opt"] == "sgd"
    # add_hparams' own inner writer is not recorded a second time
    assert not [k for k in run.metric_keys if k.endswith("hp/final") and k != "hp/final"]


def test_live_histogram_image_and_text(job: Job) -> None:
    run = job.run()
    for rank in (0, 1):
        label = f"rank-{rank}"
        hist = run.histograms("weights", label=label)
        assert hist.steps == [STEPS]
        assert sum(hist.counts[0]) == 10
        assert hist.edges[0][0] == rank and hist.edges[0][-1] == rank + 9
        (text,) = run.media("note", label=label)
        assert text.step == STEPS and text.read() == f"rank {rank}".encode()
        (image,) = run.media("sample", label=label)
        assert (image.step, image.width, image.height) == (STEPS, 5, 4)
        (hwc,) = run.media("tbx/hwc", label=label)
        assert (hwc.width, hwc.height) == (5, 4)


def test_event_files_are_still_written(job: Job) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    for rank in (0, 1):
        acc = EventAccumulator(str(job.tb / f"rank_{rank}" / "torch")).Reload()
        loss = [(e.step, e.value) for e in acc.Scalars("train/loss")]
        assert loss == [(s, value(rank, s)) for s in range(STEPS)]
        acc = EventAccumulator(str(job.tb / f"rank_{rank}" / "tbx")).Reload()
        assert [e.value for e in acc.Scalars("acc")] == [value(rank, s) + 2 for s in range(STEPS)]


def import_tb(source: Path, data: Path, capsys: pytest.CaptureFixture[str], *more: str) -> str:
    code = cli(["import", "tensorboard", str(source), "--dir", str(data), *more])
    out = capsys.readouterr()
    assert code == 0, out.err
    return out.out


def test_import_reads_each_rank_back_exactly_and_twice_adds_nothing(
    job: Job, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    first = import_tb(job.tb, data, capsys, "--project", "imp", "--run", "tbrun")
    assert "record(s) added" in first and "skipped" not in first
    run = rankwise.Api(dir=data).run("tbrun", "imp")
    # one stream per event directory: add_scalars and add_hparams write their own
    ranks = {s.label: s.rank for s in run.streams}
    for rank in (0, 1):
        mine = {label for label, r in ranks.items() if r == rank}
        named = {f"rank_{rank}-{d}" for d in ("tbx", "torch", "torch-lr_a", "torch-lr_b")}
        (hparams,) = mine - named  # add_hparams' folder, named by the time
        assert named < mine and hparams.startswith(f"rank_{rank}-torch-")
    assert len(ranks) == 10 and run.state == "finished"

    def check() -> None:
        run = rankwise.Api(dir=data).run("tbrun", "imp")
        for rank in (0, 1):
            want = [(s, value(rank, s)) for s in range(STEPS)]
            assert rows(run, f"rank_{rank}-torch", "train/loss") == want
            assert rows(run, f"rank_{rank}-torch", "train/tensor") == [(s, v + 1) for s, v in want]
            assert rows(run, f"rank_{rank}-tbx", "acc") == [(s, v + 2) for s, v in want]
            assert rows(run, f"rank_{rank}-torch-lr_b", "lr") == [
                (s, float(rank)) for s in range(STEPS)
            ]
            times = [r["time"] for r in run.history(["train/loss"], label=f"rank_{rank}-torch")]
            assert times == sorted(times) and 1.6e9 < times[0] < 4e9  # the events' wall times

    check()
    files = sorted((data / "imp" / "tbrun" / "streams").iterdir())
    sizes = [f.stat().st_size for f in files]
    second = import_tb(job.tb, data, capsys, "--project", "imp", "--run", "tbrun")
    assert "0 record(s) added" in second and "nothing added" in second
    assert [f.stat().st_size for f in files] == sizes
    check()


def test_a_truncated_or_damaged_event_file_imports_what_is_readable(
    job: Job, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for rank in (0, 1):
        shutil.copytree(job.tb / f"rank_{rank}" / "tbx", tmp_path / "tb" / f"worker-{rank}")
    (cut,) = (tmp_path / "tb" / "worker-1").glob("*tfevents*")
    cut.write_bytes(cut.read_bytes()[: cut_in(cut, step=3)])  # truncated in step 3's event
    (bad,) = (tmp_path / "tb" / "worker-0").glob("*tfevents*")
    data = bytearray(bad.read_bytes())
    data[cut_in(bad, step=3)] ^= 0xFF  # one byte of step 3's event flipped
    bad.write_bytes(bytes(data))
    out = import_tb(tmp_path / "tb", tmp_path / "data", capsys, "--project", "imp")
    assert out.count("could not be read") == 2, out
    run = rankwise.Api(dir=tmp_path / "data").run("tb", "imp")
    assert sorted((s.label, s.rank) for s in run.streams) == [("worker-0", 0), ("worker-1", 1)]
    for rank in (0, 1):
        got = rows(run, f"worker-{rank}", "acc")
        assert got == [(s, value(rank, s) + 2) for s in range(3)]


def cut_in(path: Path, step: int) -> int:
    """An offset inside the record of ``path`` whose event is at ``step`` (TFRecord
    framing: u64 length, u32 crc, data, u32 crc)."""
    from tensorboard.compat.proto import event_pb2

    data = path.read_bytes()
    pos = 0
    while pos < len(data):
        n = int.from_bytes(data[pos : pos + 8], "little")
        event = event_pb2.Event.FromString(data[pos + 12 : pos + 12 + n])
        if event.step == step and event.HasField("summary"):
            return pos + 12 + n // 2
        pos += 16 + n
    raise AssertionError(f"no event at step {step} in {path}")


def test_import_of_a_folder_without_events_names_the_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli(["import", "tensorboard", str(tmp_path), "--dir", str(tmp_path / "d")]) == 2
    assert "no TensorBoard event files" in capsys.readouterr().err


def test_module_runs_from_the_command_line(job: Job, tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "rankwise.cli", "import", "tensorboard", str(job.tb / "rank_0"),
         "--dir", str(tmp_path)],
        capture_output=True, text=True, timeout=120, env=clean_env(),
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    run = rankwise.Api(dir=tmp_path).run("rank_0", "default")
    assert {"tbx", "torch"} < {s.label for s in run.streams}
    assert {s.rank for s in run.streams} == {0}  # no rank_N below the folder given


def test_a_lone_writer_in_a_train_folder_keeps_it_as_prefix(tmp_path: Path) -> None:
    """W&B's rule: one log directory gives no prefix unless it is named train or
    validation (in this pytest process, so no other writer was seen before)."""
    import tensorboardX

    from rankwise.sdk import tensorboard as tb

    assert not tb._logdirs  # the torchrun job's writers lived in other processes
    run = rankwise.init(project="lone", dir=tmp_path / "data", system=False, tensorboard=True)
    writer = tensorboardX.SummaryWriter(str(tmp_path / "tb" / "train"))
    writer.add_scalar("loss", 1.5, 3)
    writer.add_scalar("loss", 2.5)  # no global_step: the stream's last step
    writer.close()
    run.finish()
    writer = tensorboardX.SummaryWriter(str(tmp_path / "tb" / "after"))
    writer.add_scalar("loss", 9.0, 4)  # the run ended: only the event file has it
    writer.close()
    (got,) = rankwise.Api(dir=tmp_path / "data").runs("lone")
    assert got.metric_keys == ["train/loss"]
    assert [(r["step"], r["train/loss"]) for r in got.history()] == [(3, 1.5), (3, 2.5)]


@pytest.mark.parametrize("wrapper", ["made", "any"])
def test_add_scalar_lands_exactly_once_on_every_path(
    tmp_path: Path, wrapper: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The capture's fast path (a flat queue item, no dict: inlined in the ``add_scalar``
    made with the writer's own parameters, ``Run._log_one`` in the general wrapper for
    other signatures) and each case it hands to ``log()``: a queue bound far below the
    calls (the caller waits, nothing is dropped), a step that is not an int or goes back,
    a row held by ``log(commit=False)``, a rich value made meanwhile, arguments passed on
    to the writer. Mixed with ``log()`` calls, every value lands once, at its step. After
    the lone-writer test: this writer's key prefix depends on the log directories seen
    before."""
    import inspect

    import numpy as np
    import tensorboardX

    from rankwise.sdk import tensorboard as tb

    settings = {"max_queue_bytes": 1024, "flush_interval": 0.01}  # 16 units: 4 calls
    run = rankwise.init(project="paths", dir=tmp_path / "data", system=False,
                        tensorboard=True, settings=settings)  # fmt: skip
    cls = tensorboardX.SummaryWriter
    variadic = cls.add_scalar.__code__.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS)
    assert not variadic  # the writer's own parameters: calls to it are specialized
    if wrapper == "any":
        monkeypatch.setattr(cls, "add_scalar", tb._wrapped_scalar_any(cls.add_scalar.__wrapped__))
    writer = tensorboardX.SummaryWriter(str(tmp_path / "tb" / "paths"))
    n = 3000
    for i in range(n):
        writer.add_scalar("loss", float(i), i)
        if i % 100 == 0:
            run.log({"lr": i / 100}, step=i)  # log()'s own items between the flat ones
    writer.add_scalar("loss", float(n), np.int64(n))  # a step log() converts
    run.log({"lr": 99.0}, step=n + 1, commit=False)
    writer.add_scalar("loss", float(n + 1), n + 1)  # joins the held row
    rankwise.Histogram([1.0, 2.0])  # arms run.log()'s look for rich values
    writer.add_scalar("loss", float(n + 2), n + 2)
    writer.add_scalar("loss", float(n + 3), n + 3, walltime=1.0e9)  # passed on as given
    writer.add_scalar("loss", -1.0, 5)  # a step going back: kept, at 5
    writer.add_scalar("loss", -2.0)  # no global_step: the stream's last step (5)
    writer.close()
    run.finish()
    (got,) = rankwise.Api(dir=tmp_path / "data").runs("paths")
    (key,) = [k for k in got.metric_keys if k.endswith("loss")]
    want = [(i, float(i)) for i in range(n + 4)] + [(5, -1.0), (5, -2.0)]
    assert sorted((r["step"], r[key]) for r in got.history([key])) == sorted(want)
    lr = [(r["step"], r["lr"]) for r in got.history(["lr"])]
    assert lr == [(i, i / 100) for i in range(0, n, 100)] + [(n + 1, 99.0)]
    held = [r for r in got.history() if r["step"] == n + 1]
    assert len(held) == 1 and held[0][key] == n + 1 and held[0]["lr"] == 99.0
    (stream,) = got.streams
    assert stream.dropped == 0 and stream.last_step == n + 3
    events = [e for e in _events(tmp_path / "tb" / "paths") if e.step == n + 3]
    assert [e.wall_time for e in events] == [1.0e9]  # the writer's own call got walltime


def test_a_writer_method_of_another_signature_gets_the_general_wrapper() -> None:
    """The fast ``add_scalar`` is made from the writer's parameters only when they are
    plain ones starting ``self, tag, scalar_value, global_step`` and none shadows a name
    its body uses; any other method is wrapped by ``_wrapped_scalar_any``, still
    recording."""
    import inspect

    from rankwise.sdk import tensorboard as tb

    def plain(self: Any, tag: str, scalar_value: Any, global_step: Any = None,
              walltime: Any = None) -> None: ...  # fmt: skip

    def keyword_only(self: Any, tag: str, scalar_value: Any, global_step: Any = None,
                     *, walltime: Any = None) -> None: ...  # fmt: skip

    def other_names(self: Any, tag: str, value: Any, step: Any = None) -> None: ...

    def shadowing(self: Any, tag: str, scalar_value: Any, global_step: Any = None,
                  run: Any = None) -> None: ...  # fmt: skip

    variadic = inspect.CO_VARARGS | inspect.CO_VARKEYWORDS
    made = tb._wrapped_scalar(plain)
    assert not made.__code__.co_flags & variadic and made.__defaults__ == (None, None)
    assert inspect.signature(made) == inspect.signature(plain) and made.__wrapped__ is plain
    for method in (keyword_only, other_names, shadowing):
        assert tb._wrapped_scalar(method).__code__.co_flags & variadic, method.__name__


def _events(folder: Path) -> list[Any]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(folder))
    acc.Reload()
    return list(acc.Scalars("loss"))


@pytest.mark.browser
def test_the_imported_run_in_the_dashboard(
    job: Job, browser: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The imported run's charts draw one line per rank (docs/img/tensorboard-import.png,
    rewritten with RANKWISE_UPDATE_DOCS=1)."""
    from tests.helpers.browser import Page
    from tests.helpers.servers import ServerProcess

    data = tmp_path / "data"
    import_tb(job.tb, data, capsys, "--project", "tb-import", "--run", "pretrain")
    with ServerProcess.ui(data, tmp_path / "server.log") as server:
        p = Page(browser, width=1280, height=800)
        p.page.goto(f"{server.url}/#/p/tb-import/r/pretrain")
        card = p.page.locator('.chart-card[data-metric="train/loss"][data-state="drawn"]')
        card.wait_for()
        # 10 streams (one per event directory), of a job of 2 ranks (rank_0, rank_1)
        assert p.page.locator("[data-ranks]").inner_text() == "10 × 1 (job 2 × 1)"
        p.page.mouse.move(5, 5)
        shot = tmp_path / "tensorboard-import.png"
        p.page.screenshot(path=shot)
        if os.environ.get("RANKWISE_UPDATE_DOCS") == "1":
            docs = Path(__file__).parents[2] / "docs" / "img" / "tensorboard-import.png"
            docs.write_bytes(shot.read_bytes())
        p.check()
        p.close()
