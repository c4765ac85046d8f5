"""Rich values in real processes: a 3-rank torchrun shared run read back per rank exactly
once, a SIGKILL never leaving a record that names a missing blob, schema-1 stream files
still read, and the encoder's memory bound (log() waits; drops only a stalled encoder's)."""

from __future__ import annotations

import hashlib
import io
import logging
import os
import signal
import struct
import subprocess
import sys
import threading
import time
import zlib
from pathlib import Path
from typing import Any

import msgspec
import pytest

from tests.helpers.env import clean_env, need

np = need("numpy")
PIL_Image = need("PIL.Image")
need("pyarrow")

import rankwise  # noqa: E402
from rankwise.stream import records as R  # noqa: E402
from rankwise.stream.blobs import blob_path  # noqa: E402
from rankwise.stream.frames import HEADER, MAGIC, scan  # noqa: E402

SCRIPT = Path(__file__).parents[1] / "scripts" / "media_job.py"
FAST_ENV = {
    "RANKWISE_FLUSH_INTERVAL": "0.05",
    "RANKWISE_HEARTBEAT_INTERVAL": "0.5",
    "RANKWISE_SYSTEM": "0",
    "RANKWISE_CONSOLE": "off",
    "RANKWISE_FINISH_TIMEOUT": "20",
}

from tests.scripts.media_job import image, values  # noqa: E402


def pixels(data: bytes) -> Any:
    with PIL_Image.open(io.BytesIO(data)) as im:
        return np.asarray(im)


@pytest.mark.torchrun
def test_three_rank_shared_run_reads_back_each_ranks_values_once(tmp_path: Path) -> None:
    world, steps = 3, 3
    env = clean_env(**FAST_ENV, RANKWISE_DIR=str(tmp_path), RANKWISE_RUN_ID="mr3")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    cmd += [f"--nproc-per-node={world}", str(SCRIPT), "--torch", "--steps", str(steps)]
    out = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "WARNING" not in out.stderr, out.stderr

    info = rankwise.Api(dir=tmp_path).run("mr3")
    assert info.state == "finished" and len(info.streams) == world
    labels = sorted(s.label for s in info.streams)
    keys = {k.key: k for k in info.media_keys()}
    assert sorted(keys) == ["predictions", "sample", "weights"]
    assert [(keys[k].kind, keys[k].labels, keys[k].steps) for k in sorted(keys)] == [
        ("table", labels, list(range(steps))),
        ("image", labels, list(range(steps))),
        ("histogram", labels, list(range(steps))),
    ]
    samples = info.media("sample")
    assert len(samples) == world * steps  # exactly once per rank and step
    for rank, label in enumerate(labels):
        mine = [m for m in samples if m.label == label]
        assert [m.step for m in mine] == list(range(steps))
        for m in mine:
            assert m.caption == f"r{rank}s{m.step}"
            np.testing.assert_array_equal(pixels(m.read()), image(rank, m.step))
        assert [m.step for m in info.media("sample", label=label)] == list(range(steps))

        for step in range(steps):
            table = info.table("predictions", step=step, label=label)
            assert table.label == label and len(table.data) == 3
            assert [row[:2] for row in table.data] == [[rank, step]] * 3
            for i, row in enumerate(table.data):
                np.testing.assert_array_equal(pixels(row[2].png()), image(rank, step + i))

        series = info.histograms("weights", label=label)
        assert series.steps.tolist() == list(range(steps))
        for step in range(steps):
            counts, edges = np.histogram(values(rank, step), bins=16)
            np.testing.assert_array_equal(series.counts[step], counts)
            np.testing.assert_allclose(series.edges[step], edges)
    assert sorted(info.histograms("weights")) == labels
    # the run's default table is the primary rank's latest
    assert info.table("predictions").label == labels[0]
    assert info.table("predictions").step == steps - 1
    assert len(info.history(keys=["loss"])) == world * steps


def _records(run_dir: Path) -> list[R.AnyRecord]:
    out: list[R.AnyRecord] = []
    for path in sorted((run_dir / "streams").glob("*.rwlog")):
        out += scan(path.read_bytes()).records
    return out


@pytest.mark.slow
def test_sigkill_never_leaves_a_record_naming_a_missing_blob(tmp_path: Path) -> None:
    for attempt, delay in enumerate((0.0, 0.3, 0.8)):
        data = tmp_path / f"d{attempt}"
        env = clean_env(**FAST_ENV, RANKWISE_DIR=str(data), RANKWISE_RUN_ID="k")
        proc = subprocess.Popen(
            [sys.executable, str(SCRIPT), "--steps", "100000"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        run_dir = data / "media" / "k"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any(
            isinstance(r, R.Media) for r in (_records(run_dir) if run_dir.exists() else [])
        ):
            time.sleep(0.05)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        records = _records(run_dir)
        named = [d for r in records for d in r.blob_digests()]
        assert any(isinstance(r, R.Media) for r in records) and named
        for digest in set(named):
            body = blob_path(run_dir, digest).read_bytes()  # exists, and is whole
            assert hashlib.sha256(body).hexdigest() == digest


def test_self_kill_right_after_log(tmp_path: Path) -> None:
    env = clean_env(**FAST_ENV, RANKWISE_DIR=str(tmp_path), RANKWISE_RUN_ID="s")
    cmd = [sys.executable, str(SCRIPT), "--steps", "5", "--kill-after", "2"]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == -signal.SIGKILL
    for digest in {d for r in _records(tmp_path / "media" / "s") for d in r.blob_digests()}:
        body = blob_path(tmp_path / "media" / "s", digest).read_bytes()
        assert hashlib.sha256(body).hexdigest() == digest


def test_a_schema_1_stream_file_still_reads(tmp_path: Path) -> None:
    """A file written before the rich records (schema 1): same frames, version 1."""
    run_dir = tmp_path / "old" / "r1" / "streams"
    run_dir.mkdir(parents=True)
    start = R.StreamStart(0, 1000.0, "old", "r1", "rank-0", 0, world_size=1)
    recs = [
        start,
        R.Metrics(1, 1001.0, 0, {"loss": 1.0}),
        R.Metrics(2, 1002.0, 1, {"loss": 0.5}),
        R.Finish(3, 1003.0, "finished", last_step=1),
    ]
    payload = msgspec.msgpack.encode((1, recs))
    frame = HEADER.pack(len(payload), zlib.crc32(payload)) + payload
    (run_dir / "rank-0.0.rwlog").write_bytes(MAGIC + frame)
    info = rankwise.Api(dir=tmp_path).run("r1")
    assert info.state == "finished"
    assert [(r["step"], r["loss"]) for r in info.history()] == [(0, 1.0), (1, 0.5)]
    assert info.media_keys() == [] and info.media("x") == [] and info.histograms("x") == {}
    # No metric definitions before schema 3: every line is the mean.
    assert info.defined_metrics == {} and info.summary_cross_rank["loss"].reduce == "mean"
    assert R.SCHEMA_VERSION >= 3
    assert struct.unpack("<I", frame[:4])[0] == len(payload)


def test_log_waits_for_the_encoder_and_keeps_every_image(tmp_path: Path) -> None:
    """A 1 MiB bound and 40 images of 192 KiB: log() waits; nothing is dropped."""
    run = rankwise.init(
        project="bp",
        dir=tmp_path,
        settings={"system": False, "console": "off", "max_media_queue_bytes": 2**20},
    )
    for step in range(40):
        run.log({"img": rankwise.Image(np.full((256, 256, 3), step, np.uint8))}, step=step)
        assert run._media.pending_bytes() <= 2**20
    run.finish()
    info = rankwise.Api(dir=tmp_path).run(run.id)
    assert [m.step for m in info.media("img")] == list(range(40))
    assert info.streams[0].dropped == 0


def test_a_stalled_encoder_costs_one_wait_then_drops_and_counts(
    tmp_path: Path, caplog: Any
) -> None:
    """A blob write that hangs (a dead disk, faked at the filesystem boundary): log()
    waits writer_stall_timeout once, then drops rich values at once, counting them; the
    scalars of the same calls are all kept."""
    import rankwise.sdk.encoder as enc

    gate = threading.Event()
    real = enc.write_blob  # type: ignore[attr-defined]

    def hung(run_dir: Any, data: bytes) -> Any:
        gate.wait(30)
        return real(run_dir, data)

    run = rankwise.init(
        project="st",
        dir=tmp_path,
        settings={
            "system": False,
            "console": "off",
            "max_media_queue_bytes": 100_000,
            "writer_stall_timeout": 0.5,
        },
    )
    enc.write_blob = hung  # type: ignore[attr-defined, assignment]
    try:
        with caplog.at_level(logging.WARNING, logger="rankwise"):
            times = []
            for step in range(6):
                t0 = time.monotonic()
                img = rankwise.Image(np.zeros((150, 150, 3), np.uint8))  # 67,500 bytes
                run.log({"img": img, "loss": float(step)}, step=step)
                times.append(time.monotonic() - t0)
        assert max(times) < 3.0 and sorted(times)[-2] < 0.2  # one wait, not one per call
        gate.set()
        run.finish()
    finally:
        enc.write_blob = real  # type: ignore[attr-defined]
        gate.set()
    info = rankwise.Api(dir=tmp_path).run(run.id)
    assert [r["loss"] for r in info.history()] == [float(s) for s in range(6)]
    kept = [m.step for m in info.media("img")]
    assert kept[0] == 0 and len(kept) < 6
    assert info.streams[0].dropped == 6 - len(kept)
    assert sum("media encoder made no progress" in r.message for r in caplog.records) == 1


def test_training_thread_pays_no_encoding(tmp_path: Path) -> None:
    """log() of a 512x512x3 image returns well before its PNG could have been made."""
    big = np.random.default_rng(0).integers(0, 255, (512, 512, 3), dtype=np.uint8)
    encode = 0.0
    for _ in range(3):
        t1 = time.perf_counter()
        rankwise.Image(big).png()
        encode += time.perf_counter() - t1
    run = rankwise.init(project="c", dir=tmp_path, settings={"system": False, "console": "off"})
    spent = 0.0
    for step in range(3):
        img = rankwise.Image(big)
        t1 = time.perf_counter()
        run.log({"img": img}, step=step)
        spent += time.perf_counter() - t1
    run.finish()
    assert spent < encode / 5, (spent, encode)
    assert len(rankwise.Api(dir=tmp_path).run(run.id).media("img")) == 3
    assert os.path.isdir(tmp_path / "c" / run.id / "blobs")
