"""Rich data in both stores: media items, tables, histograms and blob kinds (migration 7).

SQLite always; PostgreSQL with ``RANKWISE_TEST_POSTGRES`` (skipped without it, failing
under ``CI=true``). Expected values are computed from the records themselves
(``tests/helpers/rich.py``), never read back from the store under test.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rankwise.server import upload
from rankwise.store import migrations as M
from rankwise.store.sql import SQLStore
from rankwise.stream import records as R
from rankwise.stream.identity import StreamId
from tests.helpers.rich import digest, expected_histograms, expected_media, rich_stream
from tests.helpers.stores import open_sql_store, race

KEYS = [StreamId("p", "r", f"rank-{i}", 0) for i in range(4)]
STEPS = 12


def streams() -> dict[StreamId, list[R.AnyRecord]]:
    return {k: rich_stream(k, i, STEPS) for i, k in enumerate(KEYS)}


def _ingest_messily(st: SQLStore, recs: dict[StreamId, list[R.AnyRecord]]) -> None:
    """Prefixes, overlapping re-sends, the whole stream twice, and every stream of the
    run in one call (as group commit does): each record must still be applied once."""
    for k, r in recs.items():
        cut = len(r) // 3
        st.ingest([(k, r[:cut])])
        st.ingest([(k, r[cut // 2 : 2 * cut])])
    st.ingest([(k, r) for k, r in recs.items()])
    st.ingest([(k, r) for k, r in recs.items()])


def got_media(st: SQLStore, label: str | None = None, step: int | None = None) -> list[tuple]:
    reply = st.media("p", "r", "examples", label, step)
    assert reply is not None
    return [(i.step, i.label, i.index, i.digest, i.caption, i.width, i.height) for i in reply.items]


def test_every_item_is_read_back_once(store: SQLStore) -> None:
    recs = streams()
    _ingest_messily(store, recs)
    want = expected_media(recs)
    assert len(want) == 4 * STEPS * 3
    assert got_media(store) == want
    assert got_media(store, label="rank-2", step=7) == [
        w for w in want if w[1] == "rank-2" and w[0] == 7
    ]
    reply = store.media("p", "r", "examples", step=3)
    assert reply is not None and reply.steps == list(range(STEPS))
    assert {i.kind for i in reply.items} == {"image"} and {i.format for i in reply.items} == {"png"}
    hist = store.histograms("p", "r", "w")
    assert hist is not None
    exp = expected_histograms(recs)
    assert [s.label for s in hist] == sorted(exp)
    for s in hist:
        rows = exp[s.label]
        assert s.steps == [r[0] for r in rows]
        assert s.edges == [r[1] for r in rows] and s.counts == [r[2] for r in rows]
        assert (s.nan, s.posinf, s.neginf) == tuple([r[i] for r in rows] for i in (3, 4, 5))


def test_keys_of_a_run(store: SQLStore) -> None:
    store.ingest([(k, r) for k, r in streams().items()])
    keys = store.media_keys("p", "r")
    assert keys is not None
    labels = [k.label for k in KEYS]
    assert [(k.key, k.kind, k.steps, k.labels) for k in keys] == [
        ("examples", "image", list(range(STEPS)), labels),
        ("predictions", "table", list(range(0, STEPS, 5)), labels),
        ("w", "histogram", list(range(STEPS)), labels),
    ]
    assert store.media_keys("p", "nope") is None and store.media("p", "nope", "examples") is None
    assert store.histograms("p", "nope", "w") is None
    assert store.media("p", "r", "no-such-key") is not None
    assert store.media("p", "r", "no-such-key").items == []


def test_table_rows_and_blob_kinds(store: SQLStore) -> None:
    store.ingest([(k, r) for k, r in streams().items()])
    latest = store.table_row("p", "r", "predictions")
    assert latest is not None
    assert (latest.label, latest.step, latest.nrows) == ("rank-0", 10, 20)
    assert latest.digest == digest("rank-0/table/10")
    assert latest.columns == ["id", "image", "score"] and latest.types[1] == "image"
    assert latest.steps == [0, 5, 10] and latest.labels == [k.label for k in KEYS]
    at5 = store.table_row("p", "r", "predictions", label="rank-3", step=5)
    assert at5 is not None and at5.digest == digest("rank-3/table/5")
    assert store.table_row("p", "r", "predictions", step=4) is None
    assert store.blob_kind("p", digest("rank-1/3/2")) == ("image", "png")
    assert store.blob_kind("p", digest("rank-1/table/5")) == ("table", "parquet")
    assert store.blob_kind("p", digest("rank-1/cell/5")) == ("image", "png")
    assert store.blob_kind("other", digest("rank-1/3/2")) is None  # namespaced by project
    assert store.blob_kind("p", digest("never logged")) is None


def test_two_ingesters_apply_each_record_once(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    first = open_sql_store(kind, tmp_path, request)
    first.migrate()
    second = open_sql_store(kind, tmp_path, request) if kind == "sqlite" else None
    if second is None:  # PostgreSQL: a second store on the same schema
        from rankwise.store.postgres import PostgresStore

        second = PostgresStore(first.dsn)  # type: ignore[attr-defined]
    recs = streams()

    def run(st: SQLStore, _n: int) -> None:
        for k, r in recs.items():
            for a in range(0, len(r), 7):
                st.ingest([(k, r[: a + 7])])

    try:
        race(run, [first, second])
        assert got_media(first) == expected_media(recs)
        count = first._read(lambda tx: tx.one("SELECT COUNT(*) FROM histograms"))
        assert count is not None and int(count[0]) == 4 * STEPS
        count = first._read(lambda tx: tx.one("SELECT COUNT(*) FROM media_tables"))
        assert count is not None and int(count[0]) == 4 * len(range(0, STEPS, 5))
    finally:
        first.close()
        second.close()


def test_a_version_6_database_upgrades_to_7(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    st = open_sql_store(kind, tmp_path, request)
    try:
        st.migrate(target=6)
        assert st.schema_version() == 6
        plain = (R.Media, R.TableRec, R.HistogramRec)
        old = {
            k: [r for r in rich_stream(k, i, 3) if not isinstance(r, plain)]
            for i, k in enumerate(KEYS)
        }
        st.ingest(list(old.items()))
        st.migrate()
        assert st.schema_version() == M.LATEST >= 7
        assert [s.label for s in st.series("p", "r", "loss")] == [k.label for k in KEYS]
        assert st.media_keys("p", "r") == []
        # The same streams, continued past their marks with rich records, apply those.
        recs = streams()
        st.ingest(list(recs.items()))
        assert got_media(st) == expected_media(recs)
    finally:
        st.close()


def test_what_a_server_refuses() -> None:
    key = KEYS[0]
    good = rich_stream(key, 0, 6)
    upload.check_rich(good)
    table = next(r for r in good if isinstance(r, R.TableRec))
    with pytest.raises(upload.UploadRefused, match="over this server's limit") as big:
        upload.check_rich([table], max_table_cells=table.nrows * table.ncols - 1)
    assert big.value.status == 413
    wide = R.TableRec(
        seq=1, time=0.0, step=0, key="t", digest=digest("t"), size=1, nrows=1,
        ncols=100_000, columns=["c"] * 100_000, types=["int"] * 100_000,
    )  # fmt: skip
    with pytest.raises(upload.UploadRefused) as err:
        upload.check_rich([wide])
    assert err.value.status == 413
    media = next(r for r in good if isinstance(r, R.Media))
    for bad_item in (
        R.MediaItem(kind="image", digest="../../etc/passwd", size=1, format="png"),
        R.MediaItem(kind="image", digest=digest("x").upper(), size=1, format="png"),
        R.MediaItem(kind="svg", digest=digest("x"), size=1, format="svg"),
    ):
        bad = R.Media(seq=media.seq, time=0.0, step=0, key="k", items=[bad_item])
        with pytest.raises(upload.UploadRefused) as err:
            upload.check_rich([bad])
        assert err.value.status == 422
    hist = R.HistogramRec(seq=1, time=0.0, step=0, key="h", counts=[1.0], edges=[0.0])
    with pytest.raises(upload.UploadRefused, match="edges"):
        upload.check_rich([hist])


def test_a_key_logged_as_two_kinds_is_listed_once(store: SQLStore) -> None:
    key = KEYS[1]
    recs: list[R.AnyRecord] = rich_stream(key, 1, 1, tables=False)
    audio = R.MediaItem(kind="audio", digest=digest("a"), size=9, format="wav", sample_rate=8000)
    recs.append(R.Media(seq=len(recs), time=0.0, step=5, key="examples", items=[audio]))
    store.ingest([(key, recs)])
    keys = store.media_keys("p", "r")
    assert keys is not None
    got = [(k.key, k.kind, k.steps) for k in keys]
    assert got == [("examples", "image", [0, 5]), ("w", "histogram", [0])]
    reply = store.media("p", "r", "examples", step=5)
    assert reply is not None and [(i.kind, i.sample_rate) for i in reply.items] == [("audio", 8000)]
    assert store.blob_kind("p", digest("a")) == ("audio", "wav")
