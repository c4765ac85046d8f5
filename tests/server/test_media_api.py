"""``Api(server=)`` reads media, tables and histograms back as ``Api(dir=)`` does.

A real SDK run logs a gallery, audio, a table with image cells and histograms; the
``rankwise ui`` indexer ingests its files into a store (the same ingest as uploads), a
real uvicorn serves it with the run folders' blobs, and both readers must give equal
objects, bytes included.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import msgspec
import numpy as np
import pytest

import rankwise
from rankwise.server import ServerSettings, create_app
from rankwise.server.indexer import DirectoryTailer
from rankwise.store import open_store
from rankwise.store.blobs import LocalBlobStore, RunDirBlobStore
from tests.helpers.env import need
from tests.helpers.servers import serve_in_thread

need("PIL")
need("pyarrow")

FAST = {"flush_interval": 0.02}
STEPS = 4


def _log_a_run(server: str | None = None) -> str:
    settings = {**FAST, "upload_interval": 0.02, "upload_timeout": 30} if server else FAST
    run = rankwise.init(project="media", settings=settings, server=server)
    rng = np.random.default_rng(1)
    for step in range(STEPS):
        gallery = [
            rankwise.Image(rng.integers(0, 255, (8, 8, 3), dtype=np.uint8), caption=f"{step}/{i}")
            for i in range(3)
        ]
        table = rankwise.Table(columns=["id", "image", "guess", "score", "note"])
        for i in range(20):
            img = rankwise.Image(rng.random((8, 8)))
            table.add_data(i, img, int(i % 10), float(rng.random()), f"row {i}")
        run.log(
            {
                "examples": gallery,
                "predictions": table,
                "w": rankwise.Histogram(rng.normal(size=500), num_bins=16 + step),
                "loss": 1.0 / (step + 1),
            },
            step=step,
        )
    run_id = run.id
    run.finish()
    return run_id


@pytest.mark.parametrize("how", ["indexed", "uploaded", "uploaded-postgres"])
def test_server_reads_back_what_the_files_hold(
    data_dir: Path, tmp_path: Path, how: str, request: pytest.FixtureRequest
) -> None:
    """``indexed``: ``rankwise ui``'s indexer reads the run folder (blobs served from it);
    ``uploaded``: the run logs to the server (blobs PUT before their records), whose
    store is SQLite or PostgreSQL."""
    db = request.getfixturevalue("pg_dsn") if how.endswith("postgres") else tmp_path / "s.db"
    store = open_store(db)
    store.migrate()
    try:
        if how == "indexed":
            run_id = _log_a_run()
            tailer = DirectoryTailer(data_dir, store)
            while tailer.poll():
                pass
            blobs: object = RunDirBlobStore(data_dir)
        else:
            blobs = LocalBlobStore(tmp_path / "blobs")
        settings = ServerSettings(static_dir=tmp_path / "no-static", blobs=blobs)
        with serve_in_thread(create_app(store, settings)) as url:
            if how != "indexed":
                run_id = _log_a_run(server=url)
            local = rankwise.Api(dir=data_dir).run(run_id, project="media")
            remote = rankwise.Api(server=url).run(run_id, project="media")
            assert remote.media_keys() == local.media_keys()
            assert [k.key for k in local.media_keys()] == ["examples", "predictions", "w"]

            lm, rm = local.media("examples"), remote.media("examples")
            assert len(lm) == STEPS * 3

            def fields(m: object) -> dict[str, object]:
                return {**msgspec.structs.asdict(m), "path": None}

            assert [fields(m) for m in rm] == [fields(m) for m in lm]
            assert all(m.path and not r.path for m, r in zip(lm, rm))
            for a, b in zip(lm, rm):
                assert a.read() == b.read()
                assert hashlib.sha256(b.read()).hexdigest() == b.digest

            for step in (None, 0, STEPS - 1):
                lt, rt = (
                    local.table("predictions", step=step),
                    remote.table("predictions", step=step),
                )
                assert (rt.step, rt.label, rt.columns) == (lt.step, lt.label, lt.columns)
                assert len(rt.data) == len(lt.data) == 20
                for lrow, rrow in zip(lt.data, rt.data):
                    assert [c for c in rrow if not isinstance(c, rankwise.Image)] == [
                        c for c in lrow if not isinstance(c, rankwise.Image)
                    ]
                    assert rrow[1].png() == lrow[1].png()
                assert (
                    rt.get_dataframe()
                    .drop(columns="image")
                    .equals(lt.get_dataframe().drop(columns="image"))
                )
            with pytest.raises(KeyError):
                remote.table("predictions", step=99)

            lh, rh = local.histograms("w"), remote.histograms("w")
            assert isinstance(lh, dict) and isinstance(rh, dict) and lh.keys() == rh.keys()
            for label in lh:
                a, b = lh[label], rh[label]  # type: ignore[assignment]
                assert (a.key, a.label) == (b.key, b.label)
                for field in ("steps", "nan", "posinf", "neginf"):
                    assert np.array_equal(getattr(a, field), getattr(b, field))
                for field in ("edges", "counts"):
                    assert np.array_equal(getattr(a, field), getattr(b, field), equal_nan=True)
    finally:
        store.close()


def test_a_100k_row_table_logged_by_the_sdk_pages_over_http(data_dir: Path, tmp_path: Path) -> None:
    """The SDK logs a 100,000-row table to a real server (its Parquet blob PUT first);
    the tables route pages, sorts and filters it as pandas does the local reader's copy."""
    import httpx
    import pandas as pd

    n = 100_000
    rng = np.random.default_rng(4)
    df = pd.DataFrame(
        {
            "id": np.arange(n),
            "guess": rng.integers(0, 10, n),
            "score": rng.random(n),
            "note": [f"row {i}" for i in range(n)],
        }
    )
    store = open_store(tmp_path / "server.db")
    store.migrate()
    try:
        settings = ServerSettings(
            static_dir=tmp_path / "no-static", blobs=LocalBlobStore(tmp_path / "blobs")
        )
        with serve_in_thread(create_app(store, settings)) as url:
            run = rankwise.init(
                project="media", server=url, settings={**FAST, "upload_timeout": 60}
            )
            run.log({"predictions": rankwise.Table(dataframe=df)}, step=3)
            run_id = run.id
            run.finish()
            local = rankwise.Api(dir=data_dir).run(run_id, project="media")
            want = local.table("predictions").get_dataframe()
            assert len(want) == n
            path = f"/api/v1/projects/media/runs/{run_id}/tables"
            with httpx.Client(base_url=url, headers=_auth()) as client:

                def page(**params: object) -> dict[str, object]:
                    r = client.get(path, params={"key": "predictions", **params})
                    assert r.status_code == 200, r.text
                    return r.json()

                got = page(offset=50_000, limit=1000)
                assert got["total"] == n and got["step"] == 3
                assert got["rows"] == want.iloc[50_000:51_000].values.tolist()
                got = page(sort="score", desc="true", limit=100)
                top = want.sort_values("score", ascending=False, kind="stable").head(100)
                assert got["rows"] == top.values.tolist()
                got = page(filter_col="guess", filter=">=8", sort="id", desc="true", limit=50)
                sel = want[want["guess"] >= 8].sort_values("id", ascending=False)
                assert got["total"] == len(sel) and got["rows"] == sel.head(50).values.tolist()
                got = page(filter_col="note", filter="ROW 9999", limit=1000)
                sel = want[want["note"].str.contains("row 9999")]
                assert got["total"] == len(sel) and got["rows"] == sel.values.tolist()
    finally:
        store.close()


def _auth() -> dict[str, str]:
    import os

    return {"Authorization": f"Bearer {os.environ['RANKWISE_TOKEN']}"}
