"""Finding stream files in a data directory and reading whole frames from them."""

from __future__ import annotations

from pathlib import Path

from rankwise.stream import records as R
from rankwise.stream.files import (
    has_finish,
    iter_run_dirs,
    iter_stream_files,
    offset_after,
    read_last_frame,
    read_stream_id,
    read_stream_start,
    read_whole_frames,
    records_naming_blobs,
    stream_files_under,
)
from rankwise.stream.frames import HEADER, MAGIC, encode_frame, scan
from rankwise.stream.identity import StreamId


def _start(seq: int = 0, label: str = "rank-0") -> R.StreamStart:
    return R.StreamStart(seq, 1.0, "p", "r", label, 0)


def _write(path: Path, frames: list[bytes]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(MAGIC + b"".join(frames))
    return path


def _tree(root: Path) -> dict[str, Path]:
    frame = encode_frame([_start()])
    made = {
        "a": _write(root / "proj" / "run1" / "streams" / "rank-0.0.rwlog", [frame]),
        "b": _write(root / "proj" / "run1" / "streams" / "rank-1.0.rwlog", [frame]),
        "c": _write(root / "proj" / "run2" / "streams" / "rank-0.1.rwlog", [frame]),
        "d": _write(root / "other" / "run1" / "streams" / "rank-0.0.rwlog", [frame]),
    }
    # Never streams: hidden folders (the index), names no run could have, other files.
    _write(root / ".rankwise" / "run1" / "streams" / "rank-0.0.rwlog", [frame])
    _write(root / "proj" / ".hidden" / "streams" / "rank-0.0.rwlog", [frame])
    _write(root / "proj" / "bad name" / "streams" / "rank-0.0.rwlog", [frame])
    _write(root / "proj" / "run1" / "streams" / ".rank-2.0.rwlog", [frame])
    _write(root / "proj" / "run1" / "streams" / "rank-3.x.rwlog", [frame])
    _write(root / "proj" / "run1" / "streams" / "notes.txt", [frame])
    (root / "proj" / "run1" / "streams" / "dir.0.rwlog").mkdir()
    (root / "proj" / "norun").mkdir()  # a folder without streams/ is no run
    (root / "stray.rwlog").write_bytes(MAGIC)
    return made


def test_walker_keeps_streams_and_skips_the_rest(tmp_path: Path) -> None:
    made = _tree(tmp_path)
    found = list(iter_stream_files(tmp_path))
    assert [tuple(f.id) for f in found] == [
        ("other", "run1", "rank-0", 0),
        ("proj", "run1", "rank-0", 0),
        ("proj", "run1", "rank-1", 0),
        ("proj", "run2", "rank-0", 1),
    ]
    assert [f.path for f in found] == [made["d"], made["a"], made["b"], made["c"]]
    assert [r.name for r in iter_run_dirs(tmp_path, "proj")] == ["run1", "run2"]
    assert list(iter_run_dirs(tmp_path / "missing")) == []


def test_files_under_every_level(tmp_path: Path) -> None:
    made = _tree(tmp_path)
    every = sorted(made.values())
    assert stream_files_under(tmp_path) == every
    assert stream_files_under(tmp_path / "proj") == sorted([made["a"], made["b"], made["c"]])
    assert stream_files_under(tmp_path / "proj" / "run1") == [made["a"], made["b"]]
    assert stream_files_under(tmp_path / "proj" / "run1" / "streams") == [made["a"], made["b"]]


def _frames(n: int) -> list[bytes]:
    return [encode_frame([R.Heartbeat(i, float(i), last_step=i)]) for i in range(n)]


def test_whole_frames_from_an_offset_in_mid_file(tmp_path: Path) -> None:
    frames = _frames(10)
    path = _write(tmp_path / "s.0.rwlog", frames)
    offset = len(MAGIC) + sum(map(len, frames[:4]))
    got = read_whole_frames(path, offset, 3 * len(frames[4]))
    assert got.data == b"".join(frames[4:7]) and got.damage is None
    assert got.offset == offset and got.end == offset + len(got.data)
    rest = read_whole_frames(path, got.end, 1 << 20)
    assert rest.data == b"".join(frames[7:]) and rest.damage is None


def test_a_cap_smaller_than_one_frame_returns_that_frame_alone(tmp_path: Path) -> None:
    big = encode_frame([R.Console(0, 1.0, "stdout", ["x" * 5000])])
    path = _write(tmp_path / "s.0.rwlog", [big, *_frames(2)])
    got = read_whole_frames(path, len(MAGIC), 100)
    assert got.data == big and got.damage is None
    assert read_whole_frames(path, len(MAGIC), 1).data == big


def test_a_torn_tail_is_torn_and_a_flipped_byte_is_not(tmp_path: Path) -> None:
    frames = _frames(3)
    whole = MAGIC + b"".join(frames)
    path = tmp_path / "s.0.rwlog"
    for cut in (1, HEADER.size - 1, HEADER.size + 1, len(frames[2]) - 1):
        path.write_bytes(whole[:-cut])
        got = read_whole_frames(path, len(MAGIC), 1 << 20)
        assert got.data == b"".join(frames[:2])
        assert got.damage is not None and got.damage.torn, cut
        assert got.damage.offset == len(MAGIC) + len(frames[0]) + len(frames[1])
        assert scan(whole[:-cut]).damage.torn
    flipped = bytearray(whole)
    flipped[-1] ^= 0x01
    path.write_bytes(bytes(flipped))
    got = read_whole_frames(path, len(MAGIC), 1 << 20)
    assert got.data == b"".join(frames[:2])
    assert got.damage is not None and not got.damage.torn
    assert got.damage.reason == "checksum mismatch"
    # A frame cut by the cap, with the file going on, is no damage at all.
    path.write_bytes(whole)
    assert read_whole_frames(path, len(MAGIC), len(frames[0]) + 3).damage is None


def test_not_a_stream_and_a_stream_being_born(tmp_path: Path) -> None:
    path = tmp_path / "s.0.rwlog"
    path.write_bytes(b"hello, not a stream at all")
    got = read_whole_frames(path, len(MAGIC), 1 << 20)
    assert got.data == b"" and got.damage is not None and not got.damage.torn
    path.write_bytes(MAGIC[:3])
    assert read_whole_frames(path, len(MAGIC), 1 << 20).damage is None


def test_stream_start_and_last_frame(tmp_path: Path) -> None:
    fin = encode_frame([R.Heartbeat(2, 3.0), R.Finish(3, 4.0, "finished")])
    path = _write(tmp_path / "s.0.rwlog", [encode_frame([_start()]), *_frames(2)[1:], fin])
    start = read_stream_start(path)
    assert start is not None and start.label == "rank-0"
    assert [type(r) for r in read_last_frame(path)] == [R.Heartbeat, R.Finish]
    path.write_bytes(path.read_bytes()[:-2])  # torn: the last whole frame is before it
    assert [type(r) for r in read_last_frame(path)] == [R.Heartbeat]
    assert read_stream_start(tmp_path / "missing.0.rwlog") is None
    assert read_last_frame(tmp_path / "missing.0.rwlog") == []


def test_where_an_upload_resumes_and_which_stream_a_file_is(tmp_path: Path) -> None:
    frames = [encode_frame([_start()]), *(encode_frame([R.Heartbeat(i, 1.0)]) for i in (1, 2))]
    path = _write(tmp_path / "s.0.rwlog", frames)
    at = [len(MAGIC) + sum(map(len, frames[:i])) for i in range(4)]
    assert [offset_after(path, acked) for acked in (-1, 0, 1, 2, 9)] == [
        at[0],
        at[1],
        at[2],
        at[3],
        at[3],
    ]
    assert read_stream_id(path) == StreamId("p", "r", "rank-0", 0)
    assert str(read_stream_id(path)) == "stream 'rank-0' (incarnation 0) of run p/r"
    junk = tmp_path / "junk.0.rwlog"
    junk.write_bytes(b"not a stream")
    assert offset_after(junk, 0) is None and read_stream_id(junk) is None


def test_only_records_naming_blobs_above_the_mark_are_decoded(tmp_path: Path) -> None:
    item = R.MediaItem(kind="image", digest="a" * 64, size=3, format="png")
    media = [R.Media(seq, 1.0, step=seq, key="img", items=[item]) for seq in (1, 3)]
    table = R.TableRec(4, 1.0, 4, "t", "b" * 64, 9, 1, 1, ["c"], ["image"], ["c" * 64])
    frames = encode_frame([_start(), media[0], R.Metrics(2, 1.0, 2, {"x": 1.0})])
    frames += encode_frame([media[1], table, R.Finish(5, 2.0, "finished")])
    assert records_naming_blobs(frames, 0) == [media[0], media[1], table]
    assert records_naming_blobs(frames, 1) == [media[1], table]
    assert [d for r in records_naming_blobs(frames, 3) for d in r.blob_digests()] == [
        "b" * 64,
        "c" * 64,
    ]
    assert has_finish(frames) and not has_finish(frames[: len(frames) // 2])


def test_record_tags_without_decoding() -> None:
    recs = [_start(), R.Metrics(1, 1.0, 1, {"x": 1.0}), R.Finish(2, 2.0, "finished")]
    raws = R.raw_records(R.encode_payload(recs))
    assert [R.record_tag(raw) for raw in raws] == [1, 2, 6]
    assert [R.decode_record(raw) for raw in raws] == recs
    assert R.record_tag(b"") == -1 and R.record_tag(b"\x01") == -1
