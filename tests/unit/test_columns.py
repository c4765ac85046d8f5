"""The columnar local reader: ``read_columns``, ``RunInfo.scan()`` and ``history_df()``.

Every value read back as a column must be what was logged (NaN and ±Inf included), a
torn tail must give exactly the complete frames, and ``history_df()`` must equal the
frame pandas builds from ``history()``'s rows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rankwise
from rankwise.stream import records as R
from rankwise.stream.columns import read_columns
from rankwise.stream.fold import StreamFold
from rankwise.stream.frames import MAGIC, encode_frame, scan
from rankwise.stream.history import fold_columns

Item = tuple[int, float, dict[str, Any], float | None]
KEYS = ["a", "loss", "x" * 8, "y" * 9, "train/loss_accum", "train/loss_accumX", "κλειδί", "k" * 40]
KEYS.append("k" * 39 + "j")  # same length, first and last 8 bytes as another key's but one
floats = st.floats(allow_nan=True, allow_infinity=True, width=64)
numbers = st.one_of(
    floats,
    st.integers(-(2**63), 2**63 - 1),
    st.integers(0, 200),
    st.booleans(),
)
metrics = st.builds(
    lambda step, time, values, weight: (step, time, values, weight),
    st.integers(-5, 2**40),
    st.floats(0, 2e9),
    st.dictionaries(st.sampled_from(KEYS), numbers, max_size=6),
    st.one_of(st.none(), st.floats(allow_nan=False)),
)


def _stream(items: Sequence[Item]) -> list[R.AnyRecord]:
    records: list[R.AnyRecord] = [R.StreamStart(0, 1.0, "p", "r", "rank-0", 0)]
    for step, time, values, weight in items:
        seq = len(records)
        records.append(R.Metrics(seq, time, step, values, weight))
        if seq % 7 == 3:
            records.append(R.Heartbeat(seq + 1, time, last_step=step))
    return records


def _write(path: Path, records: list[R.AnyRecord], per_frame: int) -> bytes:
    frames = [encode_frame(records[i : i + per_frame]) for i in range(0, len(records), per_frame)]
    data = MAGIC + b"".join(frames)
    path.write_bytes(data)
    return data


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b


def _check(path: Path, data: bytes) -> None:
    found = scan(data)
    mets = [r for r in found.records if type(r) is R.Metrics]
    cols = read_columns(path)
    assert len(cols) == len(mets)
    assert cols.seq.tolist() == [r.seq for r in mets]
    assert cols.step.tolist() == [r.step for r in mets]
    assert cols.time.tolist() == [r.time for r in mets]
    assert [None if math.isnan(w) else w for w in cols.weight.tolist()] == [r.weight for r in mets]
    assert cols.others == [r for r in found.records if type(r) is not R.Metrics]
    assert (cols.damage is None) == (found.damage is None)
    if found.damage is not None:
        assert cols.damage == found.damage
    keys = {k for r in mets for k in r.values}
    assert set(cols.present) == keys
    for key in keys:
        assert cols.present[key].tolist() == [key in r.values for r in mets]
        got = cols.values[key]
        for i, r in enumerate(mets):
            if key in r.values:
                assert _same(got[i].item(), float(r.values[key])), (key, r)
            else:
                assert math.isnan(got[i])
    want = StreamFold()
    want.apply(found.records)
    fold, _ = fold_columns(path)
    for f in fields(StreamFold):
        a, b = getattr(fold, f.name), getattr(want, f.name)
        if f.name == "last_values":
            assert list(a) == list(b) and all(_same(a[k], b[k]) for k in b)
        else:
            assert a == b, f.name


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(metrics, max_size=40), st.integers(1, 9), st.integers(0, 30))
def test_columns_are_the_records(
    tmp_path: Path, items: list[Item], per_frame: int, tear: int
) -> None:
    path = tmp_path / "rank-0.0.rwlog"
    data = _write(path, _stream(items), per_frame)
    _check(path, data)
    if tear and len(data) > len(MAGIC) + tear:  # a torn tail: only the complete frames
        path.write_bytes(data[:-tear])
        _check(path, data[:-tear])


def test_a_flipped_byte_stops_at_the_frame_before(tmp_path: Path) -> None:
    path = tmp_path / "rank-0.0.rwlog"
    items: list[Item] = [(i, float(i), {"a": float(i)}, None) for i in range(50)]
    data = bytearray(_write(path, _stream(items), 10))
    data[-5] ^= 0x40
    path.write_bytes(bytes(data))
    cols = read_columns(path)
    assert cols.damage is not None and not cols.damage.torn
    assert cols.values["a"].tolist() == [float(i) for i in range(len(cols))]
    _check(path, bytes(data))


def test_replays_fold_record_by_record(tmp_path: Path) -> None:
    path = tmp_path / "rank-0.0.rwlog"
    recs: list[R.AnyRecord] = [R.StreamStart(0, 1.0, "p", "r", "rank-0", 0)]
    recs += [R.Metrics(i, float(i), i, {"a": i}) for i in range(1, 5)]
    recs += [R.Metrics(3, 9.0, 3, {"a": 99})]  # a replay: the fold skips it
    data = _write(path, recs, 2)
    _check(path, data)
    assert fold_columns(path)[0].last_values == {"a": 4}


def _log_run(
    fast: dict[str, float], values: list[dict[str, Any]], label: str | None = None
) -> None:
    run = rankwise.init(project="p", id="cols", settings=fast)
    for step, row in enumerate(values):
        run.log(row, step=step)
    run.finish()


def test_scan_reads_back_what_was_logged(data_dir: Path, fast: dict[str, float]) -> None:
    specials = [float("nan"), float("inf"), float("-inf"), -0.0, 5e-324, 1.7976931348623157e308]
    rows: list[dict[str, Any]] = []
    for i in range(3000):
        row: dict[str, Any] = {"series": specials[i % 6] if i % 97 == 0 else i * 0.1}
        if i % 3 == 0:
            row["sparse"] = float(i)  # a key in every third row only
        rows.append(row)
    _log_run(fast, rows)
    run = rankwise.Api().run("cols")
    got = run.scan(["series", "sparse"])["rank-0"]
    assert got.step.tolist() == list(range(3000))
    for i, row in enumerate(rows):
        assert _same(got["series"][i].item(), row["series"])
        assert _same(got["sparse"][i].item(), row.get("sparse", float("nan")))
        assert got.present["sparse"][i] == ("sparse" in row)
    only = run.scan(["sparse"], step_range=(10, 20))["rank-0"]
    assert only.step.tolist() == [12, 15, 18]
    assert run.scan(["nope"])["rank-0"].step.tolist() == []
    assert run.scan(label="rank-9") == {}


def _labelled_run(root: Path) -> None:
    """Three streams (two labels, one with a second incarnation) written as files."""
    streams = root / "p" / "multi" / "streams"
    streams.mkdir(parents=True)
    for label, inc, offset in (("rank-0", 0, 0), ("rank-0", 1, 50), ("rank-1", 0, 0)):
        recs: list[R.AnyRecord] = [R.StreamStart(0, 1.0, "p", "multi", label, inc)]
        for i in range(60):
            step = i + offset
            values: dict[str, Any] = {"loss": 1.0 / (step + 1), "epoch": step // 10}
            if i % 4 == 0:
                values["acc"] = float("nan") if i % 8 == 0 else 0.5
            if label == "rank-1" and i % 5 == 0:
                values["flag"] = i % 2 == 0
            recs.append(
                R.Metrics(
                    len(recs), 100.0 + step + 0.5 * inc, step, values, 2.0 if i == 7 else None
                )
            )
        recs.append(R.Finish(len(recs), 500.0, "finished"))
        _write(streams / f"{label}.{inc}.rwlog", recs, 9)


@pytest.mark.parametrize(
    ("keys", "label"),
    [(None, None), (["loss"], None), (["acc", "epoch"], None), (None, "rank-1"), (["flag"], None)],
)
def test_history_df_equals_the_rows(
    tmp_path: Path, keys: list[str] | None, label: str | None
) -> None:
    _labelled_run(tmp_path)
    run = rankwise.Api(dir=tmp_path).run("multi")
    rows = pd.DataFrame(run.history(keys=keys, label=label))
    pd.testing.assert_frame_equal(run.history_df(keys=keys, label=label), rows)
    again = rankwise.Api(dir=tmp_path).runs()[0]  # nothing kept from the fold: read anew
    pd.testing.assert_frame_equal(again.history_df(keys=keys, label=label), rows)


def test_history_df_with_no_rows(tmp_path: Path) -> None:
    _labelled_run(tmp_path)
    run = rankwise.Api(dir=tmp_path).run("multi")
    assert run.history_df(keys=["nope"]).empty


def test_history_df_polars_needs_polars(tmp_path: Path) -> None:
    _labelled_run(tmp_path)
    run = rankwise.Api(dir=tmp_path).run("multi")
    try:
        import polars  # type: ignore[import-not-found]  # noqa: F401
    except ImportError:
        with pytest.raises(rankwise.UsageError, match="needs polars"):
            run.history_df(polars=True)
        return
    df = run.history_df(keys=["loss"], polars=True)
    assert df["loss"].to_list() == [r["loss"] for r in run.history(keys=["loss"])]


def test_scan_arrays_are_float64_columns(tmp_path: Path) -> None:
    _labelled_run(tmp_path)
    got = rankwise.Api(dir=tmp_path).run("multi").scan()
    assert sorted(got) == ["rank-0", "rank-1"]
    r0 = got["rank-0"]
    assert len(r0) == 120 and r0["loss"].dtype == np.float64 and r0.step.dtype == np.int64
    assert np.all(np.diff(r0.step) >= 0)


def test_a_record_that_does_not_decode_stops_at_its_frame(tmp_path: Path) -> None:
    import msgspec

    path = tmp_path / "rank-0.0.rwlog"
    items: list[Item] = [(i, float(i), {"a": float(i)}, None) for i in range(20)]
    good = _stream(items)
    bad = msgspec.msgpack.encode((1, [[2, 99, 1.0, 5, {"a": "not a number"}, None]]))
    import struct
    import zlib

    frame = struct.pack("<II", len(bad), zlib.crc32(bad)) + bad
    data = _write(path, good, 5) + frame + encode_frame([R.Heartbeat(100, 2.0)])
    path.write_bytes(data)
    cols = read_columns(path)
    assert cols.damage is not None and "decode" in cols.damage.reason
    _check(path, data)


def test_records_off_the_common_layout(tmp_path: Path) -> None:
    """Most calls log the same keys; some differ in a value's type, the key order, a
    key of the same length, or a key missing: each reads as logged."""
    path = tmp_path / "rank-0.0.rwlog"
    items: list[Item] = []
    for i in range(400):
        values: dict[str, Any] = {"train/loss": i * 0.5, "k" * 20: -i * 0.25, "b": 1.5}
        if i % 17 == 5:
            values["b"] = i  # an int where floats are usual
        elif i % 17 == 6:
            values = {"b": 2.5, "train/loss": 1.0, "k" * 20: 3.0}  # another order
        elif i % 17 == 7:
            values = {"train/loss": 1.0, "k" * 19 + "j": 3.0, "b": 2.5}  # same length
        elif i % 17 == 8:
            values = {"train/loss": float("nan"), "b": float("-inf")}
        items.append((i, float(i), values, 2.0 if i % 5 == 0 else None))
    data = _write(path, _stream(items), 13)
    _check(path, data)


BOUNDS = [0, 127, 128, 255, 256, 65535, 65536, 2**32 - 1, 2**32, 2**53]
alike = st.builds(
    lambda step, values, weight: (step, values, weight),
    st.one_of(
        st.sampled_from([b + d for b in BOUNDS for d in (-1, 0, 1)] + [-1, -32, -33, -129]),
        st.integers(-(2**40), 2**40),
    ),
    st.one_of(
        st.just({"loss": 0.5}),  # the usual call, repeated: runs of one layout
        st.dictionaries(st.sampled_from(KEYS), numbers, max_size=4),
    ),
    st.sampled_from([None, None, 2.0, -0.5]),
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(alike, min_size=1, max_size=60),
    st.sampled_from(sorted({max(1, b + d) for b in BOUNDS for d in (-3, 0)})),  # seq 0: StreamStart
    st.integers(1, 30),
    st.integers(0, 12),
)
def test_frames_of_metrics_only(
    tmp_path: Path,
    items: list[tuple[int, dict[str, Any], float | None]],
    seq0: int,
    per_frame: int,
    tear: int,
) -> None:
    """Frames holding only ``Metrics`` records (the fast split): seq and step crossing
    MessagePack integer widths, negative steps, layouts mixed within a frame."""
    path = tmp_path / "rank-0.0.rwlog"
    records: list[R.AnyRecord] = [
        R.Metrics(seq0 + i, float(i), step, values, weight)
        for i, (step, values, weight) in enumerate(items)
    ]
    data = _write(path, records, per_frame)
    _check(path, data)
    if tear and len(data) > len(MAGIC) + tear:
        path.write_bytes(data[:-tear])
        _check(path, data[:-tear])


def test_keys_of_one_length_in_one_frame(tmp_path: Path) -> None:
    """Runs of records whose keys differ only in their bytes (same lengths, same
    structure): each record's values land under its own keys."""
    path = tmp_path / "rank-0.0.rwlog"
    names = ["ab", "cd", "k" * 12 + "X" + "k" * 7, "k" * 20, "k" * 19 + "j", "j" + "k" * 19]
    records: list[R.AnyRecord] = []
    for i in range(300):
        key = names[(i // 7) % len(names)]  # runs of 7 records, then the next key
        records.append(R.Metrics(1 + i, float(i), i, {key: i * 0.5, "b": -1.0 * i}, None))
    data = _write(path, records, 60)
    _check(path, data)


@pytest.mark.parametrize("where", [0, 3, 6])
def test_another_record_out_of_order_among_metrics(tmp_path: Path, where: int) -> None:
    """A record that is not ``Metrics`` with a seq out of order against the ``Metrics``
    records around it (a replayed heartbeat): the fold goes record by record, as the
    frames say, wherever it sits."""
    path = tmp_path / "rank-0.0.rwlog"
    mets: list[R.AnyRecord] = [
        R.Metrics(10 + i, float(i), i, {"loss": 0.5 * i}, None) for i in range(6)
    ]
    replayed = R.Heartbeat(12, 3.0, last_step=99)  # seq 12 was a Metrics record already
    records = [R.StreamStart(0, 1.0, "p", "r", "rank-0", 0), *mets]
    records.insert(1 + where, replayed)
    data = _write(path, records, 2)
    _check(path, data)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(st.lists(metrics, max_size=12), min_size=1, max_size=4),
    st.one_of(st.none(), st.integers(-5, 2**40)),
    st.integers(1, 5),
)
def test_cross_rank_last_from_columns_is_from_records(
    tmp_path: Path, streams: list[list[Item]], upto: int | None, per_frame: int
) -> None:
    """``CrossRankLast.add_columns`` (what ``rankwise show`` folds the cross-rank summary
    from) gives what ``add()`` of each record gives, or declines (a key of bools and
    numbers), as ``LocalRun.summaries`` then reads the records."""
    from rankwise.read.summary import CrossRankLast

    # Steps from a few values, so that streams share last steps and upto cuts them.
    streams = [[(s % 4 if s > 3 else s, t, v, w) for s, t, v, w in items] for items in streams]
    want, got = CrossRankLast(upto), CrossRankLast(upto)
    for i, items in enumerate(streams):
        path = tmp_path / f"rank-{i}.0.rwlog"
        records = _stream(items)
        _write(path, records, per_frame)
        for r in records:
            if type(r) is R.Metrics:
                want.add(r.step, r.values, r.weight)
        if not got.add_columns(read_columns(path)):
            assert any(
                isinstance(v, bool) for _, _, vals, _ in items for v in vals.values()
            )  # declined only for a stream that logged a bool
            for r in records:
                if type(r) is R.Metrics:
                    got.add(r.step, r.values, r.weight)
    assert repr(got.result()) == repr(want.result())


def test_cross_rank_values_past_the_largest_float_are_infinite_not_an_error() -> None:
    """Ranks whose values sum past the largest float: the cross-rank sum and mean are
    +Inf (as the store's aggregates hold them), where ``math.fsum`` raises."""
    from rankwise.read.summary import CrossRankLast

    summary = CrossRankLast(None)
    for rank in range(3):
        summary.add(7, {"big": 1e308, "w": 1e308 * (-1) ** rank}, 2.0)
    got = summary.result()
    assert got["big"].sum == got["big"].mean == got["big"].wmean == math.inf
    assert (got["big"].n, got["big"].max) == (3, 1e308)
    assert got["w"].sum == 1e308 and math.isfinite(got["w"].mean)


@pytest.mark.parametrize("per_frame", [1, 3, 4])
def test_small_frames_of_many_keys(tmp_path: Path, per_frame: int) -> None:
    """A log() call of more than 15 keys is a map16, which msgspec splits: frames of a
    few such records (a flush every 0.25 s), heartbeats among them, and a frame of
    fixmap records the fast split takes in between."""
    many = [f"m{k:02d}" for k in range(20)]
    items: list[Item] = [
        (s, 1.0 + s, {k: s * 0.5 + j for j, k in enumerate(many)}, None) for s in range(30)
    ]
    items[12:16] = [(s, 1.0 + s, {"a": float(s)}, None) for s in range(12, 16)]
    path = tmp_path / "rank-0.0.rwlog"
    data = _write(path, _stream(items), per_frame)
    _check(path, data)
    cols = read_columns(path)
    assert cols.values["m07"][:3].tolist() == [7.0, 7.5, 8.0]
    assert np.isnan(cols.values["m07"][12:16]).all() and cols.values["a"][13] == 13.0
