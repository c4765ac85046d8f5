"""Runs with blobs for the blob tests: stream files and blob files as the SDK lays them out.

The records are the media-sdk's own (``Media``, ``TableRec``), written with the stream
writer's frame encoding; the blob files go through ``rankwise.stream.blobs.write_blob``,
the SDK's own atomic writer. Contents are random so every blob has its own digest.
"""

from __future__ import annotations

import hashlib
import os
import random
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from rankwise.stream import records as R
from rankwise.stream.blobs import blob_path, write_blob
from rankwise.stream.identity import StreamId

from .env import free_port, need
from .streams import start
from .telemetry import write_stream_file


@dataclass
class BlobRun:
    root: Path
    project: str
    run: str
    stream: Path
    blobs: dict[str, bytes] = field(default_factory=dict)  # digest -> bytes
    last_seq: int = 0

    @property
    def run_dir(self) -> Path:
        return self.root / self.project / self.run

    def path(self, digest: str) -> Path:
        return blob_path(self.run_dir, digest)


def blob_run(
    root: Path,
    project: str = "p",
    run: str = "r",
    *,
    label: str = "rank-0",
    steps: int = 6,
    images_per_step: int = 2,
    image_bytes: int = 3000,
    seed: int = 1,
    shared: list[bytes] = (),  # type: ignore[assignment]
) -> BlobRun:
    """A finished stream whose steps log a gallery and a metric, plus one table whose
    Parquet blob and image cells are blobs; ``shared`` contents are logged too (the
    same digests another run or rank may have)."""
    rng = random.Random(seed)
    key = StreamId(project, run, label, 0)
    run_dir = root / project / run
    out = BlobRun(root, project, run, Path())
    recs: list[R.AnyRecord] = [start(project, run, label)]
    for step in range(steps):
        items = []
        contents = [rng.randbytes(image_bytes) for _ in range(images_per_step)]
        if step == 0:
            contents += list(shared)
        for data in contents:
            digest, size = write_blob(run_dir, data)
            out.blobs[digest] = data
            items.append(R.MediaItem("image", digest, size, "png", f"step {step}", 8, 8))
        recs.append(R.Media(len(recs), 1000.0 + step, step, "examples", items))
        metrics: dict[str, Any] = {"loss": 1.0 / (step + 1)}
        recs.append(R.Metrics(len(recs), 1000.0 + step, step, metrics, None))
    cells = [rng.randbytes(500) for _ in range(3)]
    cell_digests = []
    for cell in cells:
        d, _ = write_blob(run_dir, cell)
        out.blobs[d] = cell
        cell_digests.append(d)
    table = parquet(  # a real file: the server reads its footer at upload
        {"id": [rng.randrange(2**62) for _ in cells], "image": cell_digests}
    )
    table_digest, table_size = write_blob(run_dir, table)
    out.blobs[table_digest] = table
    recs.append(
        R.TableRec(
            len(recs), 1000.0 + steps, steps - 1, "predictions", table_digest, table_size,
            3, 2, ["id", "image"], ["int", "image"], cell_digests,
        )
    )  # fmt: skip
    recs.append(R.Finish(len(recs), 1000.0 + steps + 1, "finished", last_step=steps - 1))
    out.stream = write_stream_file(root, key, recs)
    out.last_seq = recs[-1].seq
    return out


def parquet(columns: dict[str, list[Any]]) -> bytes:
    """The bytes of a Parquet file holding ``columns``."""
    import io

    import pyarrow as pa  # type: ignore[import-untyped]
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    buf = io.BytesIO()
    pq.write_table(pa.table(columns), buf)
    return buf.getvalue()


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def stored_files(root: Path) -> list[Path]:
    """The blob files (not temporaries) under a LocalBlobStore's root."""
    return [
        Path(d) / f
        for d, _, files in os.walk(root)
        for f in files
        if not f.startswith(".tmp-") and Path(d).name != "lost"
    ]


@contextmanager
def moto_s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """moto's real S3 server on a free local port, with throwaway AWS credentials in the
    environment (and no ``AWS_ENDPOINT_URL``): yields its endpoint URL, stops it after.
    Skips the test where s3fs or moto is not installed (fails it under CI)."""
    need("s3fs")
    moto_server = need("moto.server")
    for name, value in (
        ("AWS_ACCESS_KEY_ID", "testing"),
        ("AWS_SECRET_ACCESS_KEY", "testing"),
        ("AWS_DEFAULT_REGION", "us-east-1"),
    ):
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    port = free_port()
    moto = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    moto.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        moto.stop()
