"""Metric definitions on the server's stores (SQLite and PostgreSQL): kept with the run
through ingest (replays change nothing, the latest definition of a name wins whichever
rank wrote it), and honoured by the series, compare and run replies."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from rankwise.server import ServerSettings, create_app
from rankwise.store.sql import SQLStore
from rankwise.stream import records as R
from rankwise.stream.identity import StreamId
from tests.helpers.servers import call
from tests.helpers.streams import make_stream

RANKS, STEPS = 3, 5


def _value(rank: int, step: int) -> float:
    return 10.0 * (rank + 1) + step


def _streams() -> list[tuple[StreamId, list[R.AnyRecord]]]:
    out = []
    for rank in range(RANKS):
        key = StreamId("p", "defs", f"rank-{rank}", 0)
        recs = make_stream(
            key, STEPS, rank=rank, world=RANKS, run_mode="shared",
            values=lambda s, r=rank: {"thr": _value(r, s), "mem/gb": _value(r, s), "acc": 0.5},
        )  # fmt: skip
        defs: list[R.DefineMetric] = []
        if rank == 0:  # early: thr as the min, every mem/ key as the max
            defs = [R.DefineMetric(0, 1.0, "thr", "min"), R.DefineMetric(0, 2.0, "mem/*", "max")]
        if rank == 2:  # later than rank 0's: this definition of thr wins
            defs = [R.DefineMetric(0, 50.0, "thr", "sum", goal="maximize")]
        for d in defs:  # after the start record, renumbered
            recs.insert(1, d)
        for seq, rec in enumerate(recs):
            rec.seq = seq
        out.append((key, recs))
    return out


def test_definitions_are_kept_and_honoured(store: SQLStore, tmp_path: Path) -> None:
    batches = _streams()
    store.ingest(batches)
    store.ingest(batches)  # a replay changes nothing
    run = store.get_run("p", "defs")
    assert run is not None
    assert {k: d.reduce for k, d in run.defined_metrics.items()} == {"thr": "sum", "mem/*": "max"}
    assert run.defined_metrics["thr"].goal == "maximize"
    values = np.array([[_value(r, s) for s in range(STEPS)] for r in range(RANKS)])

    app = create_app(store, ServerSettings(static_dir=tmp_path / "no-static", auth=False))
    path = "/api/v1/projects/p/runs/defs/series"
    for key, how, want in (
        ("thr", "sum", values.sum(axis=0)),
        ("mem/gb", "max", values.max(axis=0)),
        ("acc", "mean", np.full(STEPS, 0.5)),
    ):
        band = call(app, "GET", path, params={"key": key, "streams": "none"}).json()["band"]
        assert band["reduce"] == how
        np.testing.assert_allclose(band[how], want, rtol=1e-12)
        cmp = call(app, "POST", "/api/v1/compare",
                   json={"runs": ["p/defs"], "key": key, "streams": "none"}).json()  # fmt: skip
        assert cmp["runs"][0]["band"]["reduce"] == how
    np.testing.assert_allclose(
        call(app, "GET", path, params={"key": "thr"}).json()["band"]["sum"], values.sum(axis=0)
    )
    reply = call(app, "GET", "/api/v1/projects/p/runs/defs").json()
    assert reply["defined_metrics"] == {
        "mem/*": {"reduce": "max"}, "thr": {"reduce": "sum", "goal": "maximize"}
    }  # fmt: skip
    cross = reply["summary_cross_rank"]
    assert cross["thr"]["reduce"] == "sum" and cross["thr"]["sum"] == values[:, -1].sum()
    assert cross["mem/gb"]["reduce"] == "max" and cross["mem/gb"]["max"] == values[:, -1].max()
    assert cross["acc"]["reduce"] == "mean" and math.isclose(cross["acc"]["mean"], 0.5)
