"""The run and stream rows of streams uploaded for the first time, created together.

A job's start is every rank's first upload at once: a thousand new streams per server
process within a second or two. Created a key at a time, each cost four statements
(insert the run, read its id, insert the stream, read its id): on PostgreSQL four round
trips, and at 4,096 ranks through four processes most of the start's group commits were
those round trips while the uploads waited (and were refused). Here a call's new keys
cost a statement per distinct run, the stream inserts as one pipelined batch (one
multi-row statement per hundred on SQLite) and a read of their ids per ``_PER_READ``
labels: about the same number of statements for one stream as for a thousand.

Rows are inserted in the keys' sorted order (runs first, then streams), so two ingesters
creating the same rows at once wait for each other in one order and never deadlock; an
existing row is kept (``ON CONFLICT DO NOTHING``) and its id read back.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..stream.identity import StreamId
from .tx import Tx, insert_rows

# Labels per read of the created streams' ids.
_PER_READ = 400


def ensure_stream_rows(tx: Tx, keys: Sequence[StreamId]) -> list[tuple[int, int]]:
    """``(stream id, run id)`` of each of ``keys`` (sorted, distinct), in their order,
    creating the run and stream rows that do not exist yet."""
    runs: dict[tuple[str, str], int] = {}
    for project, run_id in sorted({(k.project, k.run_id) for k in keys}):
        tx.run(
            "INSERT INTO runs (project, run_id) VALUES (?, ?) ON CONFLICT DO NOTHING",
            (project, run_id),
        )
        row = tx.one("SELECT id FROM runs WHERE project = ? AND run_id = ?", (project, run_id))
        assert row is not None
        runs[(project, run_id)] = int(row[0])
    wanted = [(runs[(k.project, k.run_id)], k.label, k.incarnation) for k in keys]
    insert_rows(
        tx,
        "INSERT INTO streams (run, label, incarnation) VALUES",
        3,
        wanted,
        " ON CONFLICT DO NOTHING",
    )
    labels: dict[int, list[str]] = {}
    for run, label, _ in wanted:
        labels.setdefault(run, []).append(label)
    ids: dict[tuple[int, str, int], int] = {}
    for run, names in labels.items():
        names = sorted(set(names))
        for a in range(0, len(names), _PER_READ):
            where, params = tx.any_of("label", names[a : a + _PER_READ])
            for sid, label, incarnation in tx.all(
                f"SELECT id, label, incarnation FROM streams WHERE run = ? AND {where}",
                [run, *params],
            ):
                ids[(run, label, int(incarnation))] = int(sid)
    return [(ids[(run, label, inc)], run) for run, label, inc in wanted]
