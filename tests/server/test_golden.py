"""Golden replies: what the server sends for a small fixed run, kept as JSON files that
the dashboard's Vitest tests read too (``ui/test/golden.test.js``).

So the dashboard is tested against the shape the server really sends: a reply that
changes (a field renamed, added, retyped) fails here first, naming the file; rewrite the
files with ``RANKWISE_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/server/test_golden.py``
and the dashboard's tests then run on the new shape.

The run: project ``p``, run ``r``, three ranks of six steps of ``loss`` (rank 1 logs NaN
at step 2, rank 2 +Inf at step 4) and ``tput`` (defined ``reduce="sum"``: its line is
the ranks' total), every record at a fixed time, so each reply is the
same on every machine. Times the server takes from its clock are replaced by ``"<time>"``.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rankwise.server import ServerSettings, create_app
from rankwise.store import open_store
from rankwise.stream import records as R
from rankwise.stream.identity import StreamId
from tests.helpers.servers import call
from tests.helpers.streams import start, value

GOLDEN = Path(__file__).parents[1] / "data" / "golden"
RUN = "/api/v1/projects/p/runs/r"
# name -> (path, query): the replies the dashboard's run list, run page and chart read.
REPLIES: dict[str, tuple[str, dict[str, Any]]] = {
    "runs": ("/api/v1/projects/p/runs", {}),
    "run": (RUN, {}),
    "metrics": (RUN + "/metrics", {}),
    "series": (RUN + "/series", {"key": "loss"}),
    "series_sum": (RUN + "/series", {"key": "tput"}),
    "health": (RUN + "/health", {}),
}
# Fields the server fills from its clock or its process, not from the records.
VOLATILE = {"now", "server_time", "age", "last_seen_ago"}


def _stream(rank: int) -> list[R.AnyRecord]:
    out: list[R.AnyRecord] = [start(label=f"rank-{rank}", world_size=3)]
    if rank == 0:
        out.append(R.DefineMetric(1, 999.0, "tput", reduce="sum"))
    for step in range(6):
        v = value(rank, step)
        if (rank, step) == (1, 2):
            v = math.nan
        elif (rank, step) == (2, 4):
            v = math.inf
        tput = 100.0 * (rank + 1) + step  # samples/s: the job's is the ranks' sum
        out.append(R.Metrics(len(out), 1000.0 + step, step, {"loss": v, "tput": tput}, None))
    out.append(R.Finish(len(out), 1006.0, "finished", last_step=5))
    return out


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    tmp = tmp_path_factory.mktemp("golden")
    store = open_store(f"sqlite:///{tmp / 'db.sqlite'}")
    store.migrate()
    store.ingest([(StreamId("p", "r", f"rank-{i}", 0), _stream(i)) for i in range(3)])
    yield create_app(store, ServerSettings(static_dir=tmp / "no-static"))
    store.close()


def _steady(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: "<time>" if k in VOLATILE else _steady(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_steady(v) for v in value]
    return value


@pytest.mark.parametrize("name", sorted(REPLIES))
def test_reply_is_the_golden_file(app: Any, name: str) -> None:
    path, query = REPLIES[name]
    r = call(app, "GET", path, params=query)
    assert r.status_code == 200, r.text
    got = _steady(r.json())
    file = GOLDEN / f"{name}.json"
    if os.environ.get("RANKWISE_UPDATE_GOLDEN") == "1":
        file.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    assert file.exists(), f"{file} is missing: run with RANKWISE_UPDATE_GOLDEN=1 to write it"
    want = json.loads(file.read_text())
    assert got == want, (
        f"GET {path} no longer sends what {file.name} holds (the dashboard's tests read "
        "that file): if the change is meant, rewrite the files with "
        "RANKWISE_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/server/test_golden.py and "
        "check ui/test/golden.test.js"
    )
