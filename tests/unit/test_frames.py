"""The frame codec and the record schema: round trips, torn tails, corruption."""

from __future__ import annotations

import math
import struct

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from rankwise.stream import records as R
from rankwise.stream.frames import HEADER, MAGIC, encode_frame, scan

finite = st.floats(allow_nan=False, allow_infinity=False)
numbers = st.one_of(st.booleans(), st.integers(-(2**63), 2**63 - 1), st.floats())
names = st.text(min_size=1, max_size=12)
json_like = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1), finite, st.text()),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(names, inner, max_size=3)),
    max_leaves=8,
)
seqs = st.integers(0, 2**40)
times = st.floats(0, 4e9)
digests = st.text("0123456789abcdef", min_size=64, max_size=64)

record_strategies = [
    st.builds(
        R.StreamStart,
        seq=seqs,
        time=times,
        project=names,
        run_id=names,
        label=names,
        incarnation=st.integers(0, 99),
        name=st.none() | names,
        tags=st.lists(names),
        config=st.dictionaries(names, json_like, max_size=4),
        rank=st.integers(0, 4096),
    ),
    st.builds(
        R.Metrics,
        seq=seqs,
        time=times,
        step=st.integers(-1, 2**40),
        values=st.dictionaries(names, numbers, max_size=6),
        weight=st.none() | finite,
    ),
    st.builds(R.ConfigUpdate, seq=seqs, time=times, items=st.dictionaries(names, json_like)),
    st.builds(R.SummaryUpdate, seq=seqs, time=times, items=st.dictionaries(names, json_like)),
    st.builds(
        R.Heartbeat,
        seq=seqs,
        time=times,
        last_step=st.integers(-1, 10**9),
        dropped=st.integers(0, 10**9),
    ),
    st.builds(
        R.Finish,
        seq=seqs,
        time=times,
        state=st.sampled_from(["finished", "failed", "killed"]),
        exit_code=st.integers(-255, 255),
        signal=st.none() | st.integers(1, 64),
        error_type=st.none() | names,
        traceback=st.none() | st.text(),
    ),
    st.builds(
        R.Console,
        seq=seqs,
        time=times,
        stream=st.sampled_from(["stdout", "stderr"]),
        lines=st.lists(st.text()),
    ),
    st.builds(R.System, seq=seqs, time=times, values=st.dictionaries(names, numbers)),
    st.builds(
        R.Stall,
        seq=seqs,
        time=times,
        idle_seconds=finite,
        where=st.text(),
        stacks=st.dictionaries(names, st.text()),
    ),
    st.builds(R.Dropped, seq=seqs, time=times, count=st.integers(0, 10**9)),
    st.builds(
        R.Media,
        seq=seqs,
        time=times,
        step=st.integers(-1, 2**40),
        key=names,
        items=st.lists(
            st.builds(
                R.MediaItem,
                kind=st.sampled_from(["image", "audio", "video", "html", "text"]),
                digest=digests,
                size=st.integers(0, 2**40),
                format=st.sampled_from(["png", "jpeg", "gif", "mp4", "wav", "html", "txt"]),
                caption=st.none() | st.text(),
                width=st.none() | st.integers(1, 65_500),
                fps=st.none() | finite,
            ),
            max_size=3,
        ),
    ),
    st.builds(
        R.TableRec,
        seq=seqs,
        time=times,
        step=st.integers(-1, 2**40),
        key=names,
        digest=digests,
        size=st.integers(0, 2**40),
        nrows=st.integers(0, 10**6),
        ncols=st.integers(0, 1000),
        columns=st.lists(names, max_size=4),
        types=st.lists(st.sampled_from(["str", "int", "float", "image", "list"]), max_size=4),
        blobs=st.lists(digests, max_size=3),
    ),
    st.builds(
        R.HistogramRec,
        seq=seqs,
        time=times,
        step=st.integers(-1, 2**40),
        key=names,
        counts=st.lists(finite, max_size=8),
        edges=st.lists(finite, max_size=9),
        nan=st.integers(0, 10**9),
    ),
    st.builds(
        R.DefineMetric,
        seq=seqs,
        time=times,
        name=names,
        reduce=st.sampled_from(["mean", "wmean", "sum", "min", "max"]),
        step_metric=st.one_of(st.none(), names),
        summary=st.one_of(st.none(), st.text(max_size=12)),
        goal=st.one_of(st.none(), st.sampled_from(["minimize", "maximize"])),
        hidden=st.booleans(),
    ),
    st.builds(
        R.Alert,
        seq=seqs,
        time=times,
        title=st.text(max_size=12),
        text=st.text(max_size=40),
        level=st.sampled_from(["INFO", "WARN", "ERROR"]),
        wait_duration=finite,
    ),
    st.builds(
        R.RunEdit,
        seq=seqs,
        time=times,
        field=st.sampled_from(["name", "tags", "notes"]),
        value=st.one_of(st.none(), st.text(max_size=20), st.lists(st.text(max_size=8))),
    ),
    st.builds(
        R.Provenance,
        seq=seqs,
        time=times,
        scope=st.sampled_from(["run", "node"]),
        info=st.dictionaries(names, st.one_of(st.text(max_size=12), st.booleans())),
        diff_digest=st.one_of(st.none(), st.text("0123456789abcdef", min_size=64, max_size=64)),
        diff_size=st.integers(0, 2**20),
    ),
]
any_record = st.one_of(*record_strategies)


def same(a: object, b: object) -> bool:
    """Equality that treats NaN as equal to itself (NaN is a value users log)."""
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, msgspec.Struct) and isinstance(b, msgspec.Struct):
        return type(a) is type(b) and same(msgspec.structs.asdict(a), msgspec.structs.asdict(b))
    return a == b


def test_every_record_type_has_a_strategy() -> None:
    assert len(record_strategies) == len(R.RECORD_TYPES)


@given(st.lists(st.lists(any_record, min_size=1, max_size=4), max_size=5))
def test_frames_round_trip(frames: list[list[R.AnyRecord]]) -> None:
    data = MAGIC + b"".join(encode_frame(f) for f in frames)
    result = scan(data)
    assert result.damage is None
    assert same(result.records, [r for f in frames for r in f])
    assert result.end == len(data)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.lists(any_record, min_size=1, max_size=3), min_size=1, max_size=4))
def test_cut_at_every_byte_recovers_exactly_the_complete_frames(
    frames: list[list[R.AnyRecord]],
) -> None:
    encoded = [encode_frame(f) for f in frames]
    data = MAGIC + b"".join(encoded)
    ends = []
    pos = len(MAGIC)
    for e in encoded:
        pos += len(e)
        ends.append(pos)
    for cut in range(len(data) + 1):
        result = scan(data[:cut])
        complete = sum(1 for e in ends if e <= cut)
        assert same(result.records, [r for f in frames[:complete] for r in f])
        good_end = ends[complete - 1] if complete else len(MAGIC)
        if cut < len(MAGIC):
            assert result.records == []
            assert result.damage is None  # a prefix of MAGIC is an empty stream being born
        elif cut == good_end:
            assert result.damage is None
        else:
            assert result.damage is not None
            assert result.damage.offset == good_end
            assert result.damage.length == cut - good_end
            assert "torn" in result.damage.reason


def test_checksum_mismatch_stops_and_reports() -> None:
    a = encode_frame([R.Heartbeat(0, 1.0)])
    b = bytearray(encode_frame([R.Heartbeat(1, 2.0)]))
    b[-1] ^= 0xFF
    c = encode_frame([R.Heartbeat(2, 3.0)])
    result = scan(MAGIC + a + bytes(b) + c)
    assert [r.seq for r in result.records] == [0]
    assert result.damage is not None and result.damage.reason == "checksum mismatch"


def test_implausible_length_is_damage_not_an_allocation() -> None:
    bogus = HEADER.pack(2**31, 0) + b"x" * 16
    result = scan(MAGIC + bogus)
    assert result.records == [] and result.damage is not None
    assert "implausible" in result.damage.reason


def test_not_a_stream() -> None:
    result = scan(b"hello world, not a stream")
    assert result.records == [] and result.damage is not None
    assert "not a rankwise stream" in result.damage.reason


def test_frame_with_valid_crc_but_bad_payload_is_reported() -> None:
    import zlib

    payload = b"\xc1"  # never-used msgpack byte
    frame = struct.pack("<II", len(payload), zlib.crc32(payload)) + payload
    result = scan(MAGIC + encode_frame([R.Heartbeat(0, 1.0)]) + frame)
    assert [r.seq for r in result.records] == [0]
    assert result.damage is not None and "decode" in result.damage.reason


def test_nan_and_infinities_survive() -> None:
    rec = R.Metrics(0, 1.0, 0, {"nan": math.nan, "inf": math.inf, "-inf": -math.inf})
    (back,) = scan(MAGIC + encode_frame([rec])).records
    assert isinstance(back, R.Metrics)
    assert math.isnan(back.values["nan"])
    assert back.values["inf"] == math.inf and back.values["-inf"] == -math.inf


def test_newer_writer_fields_are_ignored_by_this_reader() -> None:
    # A later schema may append fields to a record; an array with extra trailing items
    # must still decode here.
    enc = msgspec.msgpack.Encoder()
    payload = enc.encode((R.SCHEMA_VERSION + 1, [[5, 7, 1.5, 3, 0, "future-field"]]))
    import zlib

    frame = struct.pack("<II", len(payload), zlib.crc32(payload)) + payload
    (back,) = scan(MAGIC + frame).records
    assert isinstance(back, R.Heartbeat) and back.seq == 7 and back.last_step == 3
