"""A series' open tail (``rankwise.store.ingest.append_series``): points that arrive a
few at a time are kept as a binary counter of small chunks, merged as they grow. Every
read must be what one batch of the same points gives, the chunk ids must still ascend in
``seq`` order, and the tail must stay short. On SQLite and PostgreSQL.

Each upload is compacted on its own here (``store.compact()`` after it), the most
fragmented way the compactor can meet a series (it folds whatever is pending at once).
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator

from rankwise.store.chunks import MERGE_BELOW
from rankwise.store.sql import SQLStore
from rankwise.stream import records as R
from rankwise.stream.identity import StreamId

T0 = 1_700_000_000.0
STEPS = 2 * MERGE_BELOW + 300  # two chunks close, a tail is left open


def _records(label: str) -> list[R.AnyRecord]:
    rng = random.Random(7)
    recs: list[R.AnyRecord] = [R.StreamStart(0, T0, "p", "r", label, 0, rank=0, world_size=1)]
    for s in range(STEPS):
        values: dict[str, object] = {"loss": rng.random(), "n": s}
        if s % 3 == 0:
            values["sparse"] = math.nan if s % 9 == 0 else rng.random()
        recs.append(R.Metrics(len(recs), T0 + s, s, values))
    return recs


def _batches(recs: list[R.AnyRecord]) -> Iterator[list[R.AnyRecord]]:
    rng = random.Random(11)
    i = 0
    while i < len(recs):
        n = rng.choice([1, 1, 1, 2, 3, 7, 40])
        yield recs[i : i + n]
        i += n


def test_small_batches_read_as_one_batch(store: SQLStore) -> None:
    whole, bits = StreamId("p", "r", "whole", 0), StreamId("p", "r", "bits", 0)
    store.ingest([(whole, _records("whole"))])
    store.compact()
    for batch in _batches(_records("bits")):
        store.ingest([(bits, batch)])
        store.compact()
    assert store.acked(bits) == store.acked(whole) == STEPS

    def strip(rows: list[dict[str, object]]) -> list[dict[str, object]]:
        return [{k: v for k, v in r.items() if k != "label"} for r in rows]

    got = store.history("p", "r", label="bits")
    want = store.history("p", "r", label="whole")
    assert len(got) == STEPS
    assert repr(strip(got)) == repr(strip(want))  # repr: NaN equals NaN
    assert [r["n"] for r in got] == list(range(STEPS)) and type(got[5]["n"]) is int
    for key in ("loss", "sparse", "n"):
        for x in ("step", "time"):
            for lo, hi in ((None, None), (700, 1900)):
                if x == "time" and lo is not None:
                    lo, hi = T0 + lo, T0 + hi  # type: ignore[assignment, operator]
                a, b = (
                    store.series(
                        "p", "r", key, labels=[lab], x=x, lo=lo, hi=hi, max_points=100_000
                    )[0]
                    for lab in ("bits", "whole")
                )
                assert not a.downsampled and (repr(a.x), repr(a.y)) == (repr(b.x), repr(b.y))
                # Downsampled, the picks depend on the chunk layout; each is a true point,
                # and the extremes and the ends are kept (M4).
                small = store.series("p", "r", key, labels=["bits"], x=x, lo=lo, hi=hi,
                                     max_points=40)[0]  # fmt: skip
                truth = dict(zip(a.x, map(repr, a.y)))
                assert small.downsampled and len(small.x) < len(a.x)
                assert all(truth[px] == repr(py) for px, py in zip(small.x, small.y))
                finite = [v for v in a.y if v is not None and not math.isnan(v)]
                kept = [v for v in small.y if v is not None and not math.isnan(v)]
                assert (min(kept), max(kept)) == (min(finite), max(finite)), (key, x)
                assert (small.x[0], small.x[-1]) == (a.x[0], a.x[-1])

    def chunks(label: str, metric: str) -> list[tuple[int, int, int]]:
        return [
            (int(i), int(n), int(lo))
            for i, n, lo in store._read(
                lambda tx: tx.all(
                    "SELECT c.id, c.n, c.step_lo FROM chunks c JOIN streams s ON s.id = c.stream "
                    "JOIN metrics m ON m.id = c.metric WHERE s.label = ? AND m.name = ? "
                    "ORDER BY c.id",
                    (label, metric),
                )
            )
        ]

    rows = chunks("bits", "loss")
    assert sum(n for _, n, _ in rows) == STEPS
    starts = [lo for _, _, lo in rows]
    assert starts == sorted(starts)  # ids ascend in seq (here: step) order
    closed = [n for _, n, _ in rows if n >= MERGE_BELOW]
    tail = [n for _, n, _ in rows if n < MERGE_BELOW]
    assert closed and sum(closed) + sum(tail) == STEPS
    assert rows[-len(tail) :] == [r for r in rows if r[1] < MERGE_BELOW]  # the tail is last
    assert tail == sorted(tail, reverse=True) and len(tail) <= 11  # a binary counter


def test_one_point_batches_make_a_binary_counter(store: SQLStore) -> None:
    """Thirteen one-point batches leave chunks of 8, 4 and 1 points (13 in binary): each
    batch rewrote only chunks no larger than itself plus what it merged, never the whole
    open chunk."""
    key = StreamId("p", "r", "one", 0)
    store.ingest([(key, [R.StreamStart(0, T0, "p", "r", "one", 0, rank=0, world_size=1)])])
    for s in range(13):
        store.ingest([(key, [R.Metrics(s + 1, T0 + s, s, {"loss": float(s)})])])
        store.compact()
    sizes = [
        int(n)
        for (n,) in store._read(
            lambda tx: tx.all(
                "SELECT c.n FROM chunks c JOIN metrics m ON m.id = c.metric "
                "WHERE m.name = 'loss' ORDER BY c.id"
            )
        )
    ]
    assert sizes == [8, 4, 1]
    assert [r["loss"] for r in store.history("p", "r", label="one")] == [
        float(s) for s in range(13)
    ]
