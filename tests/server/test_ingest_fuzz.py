"""Hypothesis against the ingest decoder: random bytes, broken frames, odd msgpack, bombs.

Whatever the body, the answer is a 2xx or a 4xx in the one error shape, never a 500;
a refused body changes nothing in the store (no partial write); decoding a compressed
body never holds much more than the server's limit in memory.
"""

from __future__ import annotations

import gzip
import itertools
import struct
import tracemalloc
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rankwise.server import ServerSettings, create_app
from rankwise.server.bodies import decode_body
from rankwise.server.upload import UploadRefused
from rankwise.store import open_store
from rankwise.stream.frames import MAGIC
from rankwise.stream.identity import StreamId
from tests.helpers.env import need
from tests.helpers.servers import call
from tests.helpers.streams import body, records

LIMIT = 64 * 1024
FUZZ = settings(
    max_examples=60, deadline=None, database=None, suppress_health_check=list(HealthCheck)
)
_runs = itertools.count()


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Any]]:
    tmp: Path = tmp_path_factory.mktemp("fuzz")
    store = open_store(f"sqlite:///{tmp / 'db.sqlite'}")
    store.migrate()
    app = create_app(store, ServerSettings(static_dir=tmp / "none", max_body_bytes=LIMIT))
    yield app, store
    store.close()


def new_run() -> str:
    return f"r{next(_runs)}"


def post(
    target: tuple[Any, Any], data: bytes, encoding: str | None = None, run: str | None = None
) -> int:
    """Upload ``data`` as run ``run`` (a fresh one by default); asserts the no-500 and
    no-partial-write rules."""
    app, store = target
    run = run or new_run()
    key = StreamId("fuzz", run, "rank-0", 0)
    headers = {"Content-Encoding": encoding} if encoding else {}
    params = {"project": "fuzz", "run": run, "label": "rank-0", "incarnation": 0}
    r = call(app, "POST", "/api/v1/ingest", params=params, content=data, headers=headers)
    assert r.status_code in (200, 409, 413, 415, 422), r.text
    if r.status_code != 200:
        err = r.json()["error"]
        assert err["status"] == r.status_code and err["message"]
        assert store.acked(key) == -1  # nothing of a refused body was applied
        assert store.get_run("fuzz", run) is None
    else:  # what was accepted can be read back (no stored value poisons later reads)
        got = call(app, "GET", f"/api/v1/projects/fuzz/runs/{run}")
        assert got.status_code in (200, 404), got.text
    return r.status_code


def frame(payload: bytes) -> bytes:
    return struct.pack("<II", len(payload), zlib.crc32(payload)) + payload


msgpack_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)  # msgpack's range, u64 above int64 included
    | st.floats()
    | st.text()
    | st.binary(),
    lambda inner: (
        st.lists(inner, max_size=5)
        | st.dictionaries(st.text() | st.integers(-5, 5) | st.none(), inner, max_size=5)
    ),
    max_leaves=30,
)


@FUZZ
@given(data=st.binary(max_size=4096))
def test_random_bytes(target: tuple[Any, Any], data: bytes) -> None:
    post(target, data)
    post(target, MAGIC + data)


@FUZZ
@given(payload=msgpack_values)
def test_random_msgpack_in_well_formed_frames(target: tuple[Any, Any], payload: Any) -> None:
    post(target, MAGIC + frame(msgspec.msgpack.encode(payload)))
    post(target, MAGIC + frame(msgspec.msgpack.encode([payload])))


@FUZZ
@given(config=st.dictionaries(st.text(max_size=8), msgpack_values, max_size=4))
def test_odd_configs_in_valid_streams(target: tuple[Any, Any], config: dict[str, Any]) -> None:
    from rankwise.stream import records as R
    from rankwise.stream.frames import encode_frame

    run = new_run()
    start = R.StreamStart(0, 1000.0, "fuzz", run, "rank-0", 0, config=config)
    summary = R.SummaryUpdate(1, 1001.0, config)
    try:
        data = MAGIC + encode_frame([start, summary])
    except (TypeError, OverflowError):
        return  # not encodable as msgpack at all
    post(target, data, run=run)


@FUZZ
@given(
    cut=st.integers(min_value=0, max_value=2000),
    flips=st.lists(st.tuples(st.integers(min_value=0), st.integers(1, 255)), max_size=4),
    extra=st.binary(max_size=16),
)
def test_damaged_streams(
    target: tuple[Any, Any], cut: int, flips: list[tuple[int, int]], extra: bytes
) -> None:
    run = new_run()
    good = bytearray(body(records(steps=12, project="fuzz", run=run)))
    for at, xor in flips:
        good[at % len(good)] ^= xor
    data = bytes(good[: max(len(MAGIC), len(good) - cut)]) + extra
    post(target, data, run=run)


@FUZZ
@given(
    data=st.one_of(st.binary(max_size=2048), st.builds(lambda n: b"\0" * n, st.integers(0, 10**6))),
    encoding=st.sampled_from(["gzip", "deflate", "zstd", "br", "gzip, gzip", "x-gzip"]),
    compress=st.booleans(),
)
def test_compressed_bodies(
    target: tuple[Any, Any], data: bytes, encoding: str, compress: bool
) -> None:
    if compress and encoding in ("gzip", "x-gzip"):
        data = gzip.compress(data)
    elif compress and encoding == "deflate":
        data = zlib.compress(data)
    elif compress and encoding == "zstd":
        zstandard = need("zstandard")
        data = zstandard.ZstdCompressor().compress(data)
    if len(data) <= LIMIT:
        post(target, data, encoding)


def test_a_valid_stream_still_goes_in(target: tuple[Any, Any]) -> None:
    """The fuzzing above is not vacuous: the same path accepts a real upload."""
    app, store = target
    data = gzip.compress(body(records(steps=5, project="fuzz", run="real")))
    params = {"project": "fuzz", "run": "real", "label": "rank-0", "incarnation": 0}
    r = call(
        app,
        "POST",
        "/api/v1/ingest",
        params=params,
        content=data,
        headers={"Content-Encoding": "gzip"},
    )
    assert r.status_code == 200 and store.acked(StreamId("fuzz", "real", "rank-0", 0)) == 6


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "zstd"])
def test_decoding_a_bomb_holds_about_the_limit_in_memory(encoding: str) -> None:
    limit = 4 * 1024 * 1024
    plain = b"\0" * (256 * 1024 * 1024)  # 256 MiB of zeros: a few hundred KiB compressed
    if encoding == "zstd":
        zstandard = need("zstandard")
        bomb = zstandard.ZstdCompressor().compress(plain)
    else:
        bomb = gzip.compress(plain) if encoding == "gzip" else zlib.compress(plain)
    del plain
    tracemalloc.start()
    try:
        with pytest.raises(UploadRefused) as refused:
            decode_body(bomb, encoding, limit)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert refused.value.status == 413
    assert peak < 3 * limit + len(bomb), f"peak {peak} bytes decoding a bomb with limit {limit}"


EXTREMES = [2**63, 2**64 - 1, -(2**63), float("nan"), float("inf"), -1e308]


def _numeric_slots(rec: Any) -> list[tuple[str, ...]]:
    """Paths to every number in ``rec`` but its free-form JSON (config, summary items)."""
    out: list[tuple[str, ...]] = []
    for name in rec.__struct_fields__:
        value = getattr(rec, name)
        if name in ("config", "items") and not isinstance(value, list):
            continue
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out.append((name,))
        elif isinstance(value, list) and value and isinstance(value[0], msgspec.Struct):
            out += [(name, "0", *sub) for sub in _numeric_slots(value[0])]
        elif isinstance(value, list) and value and isinstance(value[0], (int, float)):
            out.append((name, "0"))
        elif isinstance(value, dict) and value and isinstance(next(iter(value.values())), float):
            out.append((name, next(iter(value))))
    return out


def _with(rec: Any, path: tuple[str, ...], value: Any) -> Any:
    head, *rest = path
    current = getattr(rec, head)
    if not rest:
        return msgspec.structs.replace(rec, **{head: value})
    if isinstance(current, dict):
        return msgspec.structs.replace(rec, **{head: {**current, rest[0]: value}})
    first = _with(current[0], tuple(rest[1:]), value) if rest[1:] else value
    return msgspec.structs.replace(rec, **{head: [first, *current[1:]]})


def test_extreme_numbers_in_every_record_field(target: tuple[Any, Any]) -> None:
    """Every number of every record type, set to what msgpack carries past the stores'
    range (2**63 and up, NaN, infinities, -1e308): a 2xx or a 4xx, never a 500, and
    what was accepted reads back on every read of the run, JSON and msgpack alike."""
    import hashlib
    import io

    from rankwise.stream import records as R
    from rankwise.stream.frames import encode_frame

    app, _ = target
    png = b"\x89PNG fuzz"
    digest = hashlib.sha256(png).hexdigest()
    app.state.blobs.put("fuzz", digest, io.BytesIO(png))
    item = R.MediaItem(kind="image", digest=digest, size=len(png), format="png", width=2,
                       height=2)  # fmt: skip
    templates: list[Any] = [
        R.Metrics(1, 1001.0, 3, {"loss": 1.5}, 2.0),
        R.Heartbeat(1, 1001.0, last_step=3, dropped=1),
        R.Finish(1, 1001.0, "finished", exit_code=1, signal=9, last_step=3, dropped=1),
        R.Console(1, 1001.0, "stdout", ["x"], [1001.0]),
        R.System(1, 1001.0, {"gpu/0/util_percent": 5.0}),
        R.Stall(1, 1001.0, 30.0),
        R.Dropped(1, 1001.0, 3),
        R.Media(1, 1001.0, 3, "img", [item]),
        R.HistogramRec(1, 1001.0, 3, "h", [1.0, 2.0], [0.0, 1.0, 2.0], 1, 1, 1),
    ]
    reads = ["", "/series?key=loss", "/system", "/console", "/stalls", "/media?key=img",
             "/histograms?key=h", "/history", "/health"]  # fmt: skip
    tried = 0
    for template in templates:
        for path in _numeric_slots(template):
            for value in EXTREMES:
                run = new_run()
                recs = [
                    R.StreamStart(0, 1000.0, "fuzz", run, "rank-0", 0),
                    _with(template, path, value),
                ]
                try:
                    data = MAGIC + encode_frame(recs)
                except (TypeError, OverflowError, ValueError):
                    continue  # not msgpack at all
                tried += 1
                if post(target, data, run=run) != 200:
                    continue
                for read in reads:
                    for accept in ("application/json", "application/msgpack"):
                        got = call(app, "GET", f"/api/v1/projects/fuzz/runs/{run}{read}",
                                   headers={"Accept": accept})  # fmt: skip
                        assert got.status_code < 500, (template, path, value, read, got.text)
    assert tried > 100
