"""Each closed chunk's sums per block of steps (``chunk_sums``): the heatmap's cells
without reading the points.

A heatmap cell is the mean of the finite values a rank logged in a bucket of steps
(``rankwise.store.heatmap_reads``). From the points that is the whole chunk row: SQLite
reads a row's columns in order, so reaching ``ys`` reads ``head``, ``subs`` and ``xs``
first, about 19 bytes a point. A 1,024-rank run of 10,000 steps is 190 MB a metric, most
of it from the disk the first time (1.35 s measured on this project's 10 GB index).

So every *closed* chunk (at least ``MERGE_BELOW`` points: never rewritten, see
``rankwise.store.chunks``) also stores one ``chunk_sums`` row (same id): for each block
``b`` of ``W = 2 ** wlog`` steps (steps ``b * W`` to ``b * W + W - 1``) from block
``b0`` on, the sum (float64) and the count (uint16) of its finite values, as one blob
(all the sums, then all the counts). ``W`` is the smallest power of two giving blocks of
about ``TARGET`` points on average, so a metric logged at every step costs 2.5 bytes a
point, and one logged every 10 steps gets blocks of 64 steps (about 6 points each).

A heatmap whose buckets are whole multiples of ``W`` steps and start at a multiple of
``W`` adds the blocks' sums and counts into its cells: every block lies in one bucket, so
the cell is the same mean. ``heatmap_reads`` picks such buckets (see ``quantum``) and
reads the points of the rest: the open tail's chunks (written often: they get no row),
chunks written before this table existed (version 19), and rows whose blocks are wider
than the buckets allow.
"""

from __future__ import annotations

import numpy as np

from .chunks import CHUNK, MERGE_BELOW, Points
from .migrations import SUMS
from .tx import Tx, delete_ids, insert_rows, schema_in

TARGET = 4  # points a block, on average, that ``wlog`` aims for
COLS = "id, stream, metric, step_lo, step_hi, wlog, b0, sums"
assert CHUNK < 2**16  # a block's count fits its uint16


def block_width(step_lo: int, step_hi: int, n: int) -> int:
    """``wlog``: the smallest with at most about ``n / TARGET`` blocks over the steps."""
    wlog = 0
    while ((step_hi >> wlog) - (step_lo >> wlog)) * TARGET > n and wlog < 62:
        wlog += 1
    return wlog


def encode(p: Points) -> tuple[int, int, bytes]:
    """(``wlog``, ``b0``, blob) of a chunk's points."""
    step = p.step.astype(np.int64, copy=False)
    wlog = block_width(int(step.min()), int(step.max()), len(p))
    block = step >> wlog
    b0 = int(block.min())
    nb = int(block.max()) - b0 + 1
    value = p.fvalue()
    fin = np.isfinite(value)
    at = (block - b0)[fin]
    sums = np.bincount(at, value[fin], nb)
    counts = np.bincount(at, minlength=nb)
    return wlog, b0, sums.astype("<f8").tobytes() + counts.astype("<u2").tobytes()


def decode(blob: bytes) -> tuple[np.ndarray, np.ndarray]:
    """(sums, counts) of a row's blob."""
    nb = len(blob) // 10
    return np.frombuffer(blob, "<f8", nb), np.frombuffer(blob, "<u2", nb, 8 * nb)


def wanted(metric: int, p: Points) -> bool:
    """Whether a chunk gets a row: a closed chunk of a logged metric (ids from 1; the
    step-progress series is 0 and system metrics are negative: no heatmap reads them)."""
    return metric > 0 and len(p) >= MERGE_BELOW


def has_sums(tx: Tx) -> bool:
    """Whether the schema has ``chunk_sums`` (a store migrated to an older version for a
    test or a data migration has not)."""
    return schema_in(tx) >= SUMS


def store_sums(tx: Tx, stream: int, rows: list[tuple[int, int, Points]]) -> None:
    """The ``chunk_sums`` rows of closed chunks ``rows`` (id, metric, points). A row its
    id may still have goes first: SQLite hands the ids of deleted chunks out again, and
    the first chunk of a merge keeps its id (only open chunks, which have no row, are
    deleted or merged, but a stale row would double a cell, and this runs once per
    ``MERGE_BELOW`` points of a series)."""
    if not rows or not has_sums(tx):
        return
    delete_ids(tx, "chunk_sums", [cid for cid, _, _ in rows])
    out = []
    for cid, metric, p in rows:
        wlog, b0, blob = encode(p)
        out.append((cid, stream, metric, int(p.step.min()), int(p.step.max()), wlog, b0, blob))
    insert_rows(tx, f"INSERT INTO chunk_sums ({COLS}) VALUES", 8, out)
