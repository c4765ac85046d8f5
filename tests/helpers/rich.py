"""Rich records (media, tables, histograms) for store and HTTP tests, and what each
reads back as, computed from the records themselves (never from the store under test)."""

from __future__ import annotations

import hashlib
from typing import Any

from rankwise.stream import records as R
from rankwise.stream.identity import StreamId

from .telemetry import T0, start


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def rich_stream(key: StreamId, rank: int, steps: int, tables: bool = True) -> list[R.AnyRecord]:
    """StreamStart, then per step: a metric, a 3-image gallery, a histogram, and every
    fifth step a table (whose second column holds image digests)."""
    recs: list[R.AnyRecord] = [start(key, rank, rank // 2)]

    def add(make: Any, **kw: Any) -> None:
        recs.append(make(seq=len(recs), time=T0 + len(recs), **kw))

    for s in range(steps):
        add(R.Metrics, step=s, values={"loss": 1.0 / (s + 1)})
        items = [
            R.MediaItem(
                kind="image",
                digest=digest(f"{key.label}/{s}/{i}"),
                size=100 + i,
                format="png",
                caption=f"{key.label} step {s} #{i}" if i else None,
                width=28,
                height=28 + i,
            )
            for i in range(3)
        ]
        add(R.Media, step=s, key="examples", items=items)
        bins = 4 + s % 3
        add(
            R.HistogramRec,
            step=s,
            key="w",
            counts=[float(rank + s + b) for b in range(bins)],
            edges=[b * 0.5 - 1.0 for b in range(bins + 1)],
            nan=s % 2,
            posinf=rank,
            neginf=0,
        )
        if tables and s % 5 == 0:
            add(
                R.TableRec,
                step=s,
                key="predictions",
                digest=digest(f"{key.label}/table/{s}"),
                size=1234,
                nrows=10 + s,
                ncols=3,
                columns=["id", "image", "score"],
                types=["int", "image", "float"],
                blobs=[digest(f"{key.label}/cell/{s}")],
            )
    return recs


def expected_media(streams: dict[StreamId, list[R.AnyRecord]]) -> list[tuple[Any, ...]]:
    """(step, label, index, digest, caption, width, height) of every media item."""
    out = []
    for key, recs in streams.items():
        for r in recs:
            if isinstance(r, R.Media):
                for i, it in enumerate(r.items):
                    out.append((r.step, key.label, i, it.digest, it.caption, it.width, it.height))
    return sorted(out)


def expected_histograms(
    streams: dict[StreamId, list[R.AnyRecord]],
) -> dict[str, list[tuple[int, list[float], list[float], int, int, int]]]:
    out: dict[str, list[tuple[int, list[float], list[float], int, int, int]]] = {}
    for key, recs in streams.items():
        for r in recs:
            if isinstance(r, R.HistogramRec):
                out.setdefault(key.label, []).append(
                    (r.step, list(r.edges), list(r.counts), r.nan, r.posinf, r.neginf)
                )
    return out


def predictions(n: int, seed: int = 0) -> Any:
    """A pyarrow table like the tutorial's predictions: id, image digest, guess, truth,
    a caption, and a score per class, with a few NULL scores."""
    import numpy as np
    import pyarrow as pa  # type: ignore[import-untyped]

    rng = np.random.default_rng(seed)
    score = rng.random(n)
    score[::97] = np.nan
    cols: dict[str, Any] = {
        "id": np.arange(n, dtype=np.int64),
        "image": [digest(f"img{i % 50}") for i in range(n)],
        "guess": rng.integers(0, 10, n),
        "truth": rng.integers(0, 10, n),
        "correct": rng.random(n) > 0.3,
        "note": [f"sample {i} {'odd' if i % 2 else 'even'}" for i in range(n)],
        "score": pa.array(score, from_pandas=True),
    }
    return pa.table(cols)


PREDICTION_TYPES = ["int", "image", "int", "int", "bool", "str", "float"]


def table_record(blobs: Any, project: str, seq: int, step: int, key: str, table: Any) -> R.TableRec:
    """``table`` as a Parquet blob put into ``blobs`` (a server ``BlobStore``), and the
    ``TableRec`` naming it."""
    import io

    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    buf = io.BytesIO()
    pq.write_table(table, buf, row_group_size=8192)
    data = buf.getvalue()
    d = hashlib.sha256(data).hexdigest()
    blobs.put(project, d, io.BytesIO(data))
    return R.TableRec(
        seq=seq, time=T0 + seq, step=step, key=key, digest=d, size=len(data),
        nrows=table.num_rows, ncols=table.num_columns, columns=list(table.column_names),
        types=PREDICTION_TYPES, blobs=sorted(set(table.column("image").to_pylist())),
    )  # fmt: skip
