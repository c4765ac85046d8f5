"""Pages of a big logged table over HTTP: DuckDB over the table's Parquet blob.

Builds a predictions table like the MNIST tutorial's (id, image digest, guess, truth, ten
class scores, a text note) of N rows (default 100,000) as one Parquet blob in a
``LocalBlobStore``, records it in a SQLite store, serves it with a real uvicorn, and
times what the dashboard's table panel asks for (``GET .../tables``): the first page, a
page deep in the table, a page sorted by a score, substring and range filters. Each
query is repeated; its median (p50) and p90 are printed, over HTTP (what the dashboard
waits for) and for the DuckDB query alone.

    python benchmarks/bench_tables.py [--rows 100000] [--repeats 15] [--limit 100]
"""

from __future__ import annotations

import argparse
import hashlib
import io
import socket
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import uvicorn

from rankwise.server import ServerSettings, create_app
from rankwise.server.tables import TablePager
from rankwise.store import open_store
from rankwise.store.blobs import LocalBlobStore
from rankwise.stream import records as R
from rankwise.stream.identity import StreamId


def table(rows: int) -> tuple[pa.Table, list[str]]:
    rng = np.random.default_rng(0)
    cols: dict[str, Any] = {
        "id": np.arange(rows),
        "image": [hashlib.sha256(str(i % 1000).encode()).hexdigest() for i in range(rows)],
        "guess": rng.integers(0, 10, rows),
        "truth": rng.integers(0, 10, rows),
    }
    for c in range(10):
        cols[f"score_{c}"] = rng.random(rows)
    cols["note"] = [f"sample {i} of batch {i // 64}" for i in range(rows)]
    types = ["int", "image", "int", "int", *["float"] * 10, "str"]
    return pa.table(cols), types


def timed(fn: Any, repeats: int) -> tuple[float, float]:
    fn()  # warm: the file's footer and pages in the OS cache, as on a used server
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    return statistics.median(times), times[int(0.9 * (len(times) - 1))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--limit", type=int, default=100)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-tables-"))
    t, types = table(args.rows)
    buf = io.BytesIO()
    pq.write_table(t, buf, row_group_size=8192)
    data = buf.getvalue()
    digest = hashlib.sha256(data).hexdigest()
    blobs = LocalBlobStore(tmp / "blobs")
    blobs.put("p", digest, io.BytesIO(data))
    store = open_store(tmp / "db.sqlite")
    store.migrate()
    key = StreamId("p", "r", "rank-0", 0)
    start = R.StreamStart(seq=0, time=0.0, project="p", run_id="r", label="rank-0",
                          incarnation=0, rank=0, world_size=1, is_primary=True)  # fmt: skip
    rec = R.TableRec(seq=1, time=1.0, step=0, key="predictions", digest=digest, size=len(data),
                     nrows=t.num_rows, ncols=t.num_columns, columns=t.column_names,
                     types=types)  # fmt: skip
    store.ingest([(key, [start, rec])])
    app = create_app(store, ServerSettings(static_dir=tmp / "none", blobs=blobs, auth=False))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    n, lim = args.rows, args.limit
    cases: list[tuple[str, dict[str, Any]]] = [
        ("first page", {}),
        ("page at 90 %", {"offset": int(n * 0.9)}),
        ("sorted by score_3, desc", {"sort": "score_3", "desc": "true"}),
        ("sorted by note (text)", {"sort": "note"}),
        ("filter note ~ 'batch 77'", {"filter_col": "note", "filter": "batch 77"}),
        (
            "filter score_0 0.5..0.51, sorted",
            {"filter_col": "score_0", "filter": "0.5..0.51", "sort": "score_1"},
        ),
    ]
    pager = TablePager()
    path = blobs.local_path("p", digest)
    assert path is not None
    print(f"{n:,} rows x {t.num_columns} columns, Parquet {len(data) / 1e6:.1f} MB, "
          f"pages of {lim}, p50 / p90 over {args.repeats}")  # fmt: skip
    print(f"{'query':36} {'HTTP (ms)':>16} {'DuckDB alone (ms)':>20}")
    with httpx.Client(base_url=f"http://127.0.0.1:{port}") as client:
        for name, params in cases:
            q = {"key": "predictions", "limit": lim, **params}

            def http(q: dict[str, Any] = q) -> None:
                r = client.get("/api/v1/projects/p/runs/r/tables", params=q)
                assert r.status_code == 200, r.text

            def direct(params: dict[str, Any] = params) -> None:
                pager.page(
                    path, t.column_names, types, limit=lim, nrows=n,
                    offset=int(params.get("offset", 0)), sort=params.get("sort"),
                    desc=params.get("desc") == "true", filter_col=params.get("filter_col"),
                    filter_text=params.get("filter"),
                )  # fmt: skip

            h50, h90 = timed(http, args.repeats)
            d50, d90 = timed(direct, args.repeats)
            print(f"{name:36} {h50:7.1f} / {h90:6.1f} {d50:11.1f} / {d90:6.1f}")
    server.should_exit = True
    thread.join(10)
    store.close()


if __name__ == "__main__":
    main()
