"""Blobs first: the cost of ``rankwise sync`` of a run with many blob files, twice.

    .venv/bin/python benchmarks/bench_blobs.py --blobs 64 --mib 1 --rounds 3

A run of ``--blobs`` images of ``--mib`` MiB each (plus a table and its cells), laid out as
the SDK writes it, is synced to a real uvicorn (in this process, authentication on, a
local blob store); then synced again, which must ask ``missing`` and send 0 blob bytes.
Each round uses a fresh server. Medians printed: seconds and MiB/s of the first sync,
seconds of the second.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rankwise.sdk.sync import sync
from rankwise.server import ServerSettings, create_app
from rankwise.store import open_store
from rankwise.store.blobs import LocalBlobStore
from tests.helpers.blobs import blob_run
from tests.helpers.servers import serve_in_thread


def one_round(blobs: int, mib: float) -> tuple[float, float, int, int]:
    tmp = Path(tempfile.mkdtemp(prefix="bench-blobs-"))
    run = blob_run(tmp / "data", "p", "r", steps=max(1, blobs // 2), images_per_step=2,
                   image_bytes=int(mib * 1024 * 1024))  # fmt: skip
    total = sum(len(b) for b in run.blobs.values())
    store = open_store(f"sqlite:///{tmp / 'server.db'}")
    store.migrate()
    settings = ServerSettings(static_dir=tmp / "none", blobs=LocalBlobStore(tmp / "server-blobs"))
    try:
        with serve_in_thread(create_app(store, settings)) as url:
            t0 = time.perf_counter()
            first = sync(tmp / "data", url, progress=False)
            t1 = time.perf_counter()
            second = sync(tmp / "data", url, progress=False)
            t2 = time.perf_counter()
    finally:
        store.close()
    assert first.blob_bytes == total and second.blob_bytes == 0
    return t1 - t0, t2 - t1, total, len(run.blobs)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--blobs", type=int, default=64)
    p.add_argument("--mib", type=float, default=1.0)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    results = [one_round(args.blobs, args.mib) for _ in range(args.rounds)]
    first = statistics.median(r[0] for r in results)
    second = statistics.median(r[1] for r in results)
    total, count = results[0][2], results[0][3]
    print(
        f"{count} blobs, {total / 2**20:.1f} MiB: first sync {first:.2f} s "
        f"({total / 2**20 / first:.0f} MiB/s); second sync {second:.2f} s, 0 blob bytes "
        f"(median of {args.rounds})"
    )


if __name__ == "__main__":
    main()
