"""The record types: one schema for the stream file, the upload body and the store input.

Every record is a msgspec ``Struct`` encoded as a MessagePack array whose first element
is the record's tag (a small int) and whose second is ``seq``, the record's position in
its stream (0, 1, 2, ... with no gaps). Fields are only ever *appended* to a record type,
with a default, so an old reader skips what it does not know and a new reader fills in
the default for an old file; ``SCHEMA_VERSION`` (carried by every frame) says which
generation of this module wrote a frame.

Schema 2 added the rich records (``Media``, ``TableRec``, ``HistogramRec``, tags 11-13).
Their large payloads are not in the stream: they are content-addressed blob files
(``rankwise.stream.blobs``) named by sha256 digest, and a record's ``blob_digests()``
lists the blobs it names (the uploader sends those before the record; the server's
ingest refuses a record whose blobs it lacks). A blob is always written before the
record naming it, so a record never points at a missing file.

Schema 3 added ``DefineMetric`` (tag 14): ``run.define_metric(name, reduce=...)``, which
chooses a metric's cross-rank line (``rankwise.metric_defs``). A schema-1 or -2 file
reads as before (it holds no definitions: every line is the mean).

Schema 4 added ``Alert`` (tag 15): ``run.alert(title, text, level, wait_duration)``, an
event the server delivers to the project's alert destinations (``rankwise.alerting``).
Schema 4 also added two fields to ``Stall``: ``thread`` (which of ``stacks`` is the training
thread's) and ``flight`` (the process's last flight-recorder entries, ``Collective``),
from which readers tell which collective a hung job waits in (``rankwise.hang``). An
older ``Stall`` reads with neither: its hang report is told from ``where`` alone.

Schema 5 added ``RunEdit`` (tag 16): ``run.name = ...``, ``run.tags = ...``,
``run.notes = ...`` on the live run, merged by time with the edits made after the fact
(``rankwise.edits``). From schema 5 on, a frame holding a record of a tag this reader
does not know decodes without it (``decode_payload``), so a later record type is
skipped by readers of this generation rather than read as damage.

Schema 6 added ``Provenance`` (tag 17): what ran, recorded off the training thread after
``init()`` (``rankwise.sdk.provenance``): the primary's git state, program and packages
(``scope="run"``, the diff of tracked files a blob) and each node's host, versions and
GPUs (``scope="node"``).

Values that travel in ``Metrics.values`` have already been coerced to ``float`` / ``int``
/ ``bool`` by the writer thread (see ``rankwise.sdk.values``); NaN and ±Inf are kept.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

SCHEMA_VERSION = 6

# What a store can hold, checked by the decoder (in C, at no cost): integers within 64
# bits (msgpack goes up to 2**64 - 1) and finite times. A frame holding anything else
# does not decode, so it is damage to the local reader and a 422 to ingest, never a
# database error. The SDK writes nothing outside these (``sdk.values`` makes an int past
# 64 bits a float; ``log()`` refuses such a step).
Int = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]
_FLOAT_MAX = 1.7976931348623157e308
Time = Annotated[float, msgspec.Meta(ge=-_FLOAT_MAX, le=_FLOAT_MAX)]  # finite: NaN, ±Inf fail
Number = bool | Int | float
Json = Any  # config and summary values: str, number, bool, None, list, dict


class Record(msgspec.Struct, array_like=True, tag_field="t", omit_defaults=False):
    """Base of every record. ``seq`` is per stream; ``time`` is Unix seconds."""

    seq: Int
    time: Time

    def blob_digests(self) -> list[str]:
        """The sha256 digests of the blob files this record names (none for most)."""
        return []


class StreamStart(Record, tag=1):
    """First record of every stream: who is writing, into which run, and with what config."""

    project: str
    run_id: str
    label: str
    incarnation: Int
    name: str | None = None
    group: str | None = None
    job_type: str | None = None
    tags: list[str] = []
    notes: str | None = None
    run_mode: str = "auto"
    rank_scope: str = "global"
    base_id: str = ""
    is_primary: bool = True
    rank: Int = 0
    world_size: Int = 1
    local_rank: Int = 0
    local_world_size: Int = 1
    node_rank: Int = 0
    num_nodes: Int = 1
    launcher: str = "none"
    host: str = ""
    pid: Int = 0
    pid_start_time: Time = 0.0
    heartbeat_interval: Time = 5.0
    config: dict[str, Json] = {}
    python: str = ""
    platform: str = ""
    argv: list[str] = []
    rankwise_version: str = ""
    # The data directory (absolute) the file was written under: the ``rankwise sync``
    # command a server suggests for a crashed stream names it.
    data_dir: str = ""
    # The writing process's pid namespace (``pid:[4026531836]`` on Linux, else ""): a
    # reader on the same host and in the same namespace may trust a dead pid at once.
    pid_ns: str = ""
    # sha256 (hex) of the stream's secret (``rankwise.stream.streamkey``): a server
    # applies an upload of this stream only when it presents that secret. None: an older
    # SDK or another writer of the format; any holder of the project's ingest token may
    # append to such a stream.
    key_digest: str | None = None


class Metrics(Record, tag=2):
    """One ``run.log()`` call. ``weight`` applies to every value of the call."""

    step: Int
    values: dict[str, Number]
    weight: float | None = None


class ConfigUpdate(Record, tag=3):
    """Config keys set after ``init()``; later updates win."""

    items: dict[str, Json]


class SummaryUpdate(Record, tag=4):
    """Summary keys the user set explicitly; they win over the last logged value."""

    items: dict[str, Json]


class Heartbeat(Record, tag=5):
    """Written every ``heartbeat_interval`` seconds while the stream is open."""

    last_step: Int = -1
    dropped: Int = 0


class Finish(Record, tag=6):
    """Last record of a stream that ended on purpose (or by an exception or a signal)."""

    state: str  # finished | failed | killed
    exit_code: Int = 0
    signal: Int | None = None
    error_type: str | None = None
    error_message: str | None = None
    traceback: str | None = None
    last_step: Int = -1
    dropped: Int = 0
    # A stream ending with the job going down (not ``finished``) names the sibling
    # streams (labels, same run) whose process it saw dead on its host: a reader that
    # cannot check those pids itself (a server, another host) then knows they crashed.
    peers_gone: list[str] = []


class Console(Record, tag=7):
    """Lines a process printed. ``stream`` is ``stdout`` or ``stderr``.

    ``times[i]`` is when ``lines[i]`` was completed (Unix seconds); an empty ``times``
    (older writers) means every line has the record's ``time``. A line keeps its ANSI
    escapes; a carriage-return progress bar arrives as its last state only.
    """

    stream: str
    lines: list[str]
    times: list[Time] = []


class System(Record, tag=8):
    """One sample of system metrics; keys name the node / GPU (``node/cpu_percent``)."""

    values: dict[str, Number]


class Collective(msgspec.Struct, omit_defaults=True):
    """One entry of PyTorch's flight recorder: a collective this process entered.

    Encoded as a map, so fields can be added in any order later. ``pg`` names the
    process group (its name and description, "0 (default_pg)"), ``seq`` is the
    collective's number in that group (``collective_seq_id``: every rank of the group
    numbers its collectives alike), ``op`` the operation ("all_reduce"), ``state``
    scheduled | started | completed, ``sizes`` and ``dtypes`` its input tensors',
    ``time`` when it was entered (Unix seconds).
    """

    pg: str
    seq: int
    op: str
    state: str = ""
    sizes: list[list[int]] = []
    dtypes: list[str] = []
    time: float = 0.0


class Stall(Record, tag=9):
    """The watchdog saw no ``log()`` for ``idle_seconds``; ``stacks`` are per thread.

    ``where`` names the training thread's innermost relevant call ("all_reduce at
    train.py:88"); the stall began at ``time - idle_seconds``. A record with
    ``cleared=True`` says logging resumed after ``idle_seconds``. ``thread`` is the key
    of ``stacks`` that is the training thread's; ``flight`` the process's last
    flight-recorder entries (at most 64 per process group, oldest first), empty when the
    recorder is off or torch is not in use (schema 4).
    """

    idle_seconds: Time
    where: str = ""
    stacks: dict[str, str] = {}
    cleared: bool = False
    thread: str = ""
    flight: list[Collective] = []


class Dropped(Record, tag=10):
    """Values dropped because the client's memory bound was hit (cumulative count)."""

    count: Int


class MediaItem(msgspec.Struct, omit_defaults=True):
    """One image / audio clip / video / html or text panel of a ``Media`` record.

    Encoded as a map (not an array) so fields can be added in any order later.
    ``kind``: image | audio | video | html | text. ``format``: png | jpeg | gif | mp4 |
    wav | html | txt. ``digest`` is the sha256 hex of the blob, ``size`` its bytes.
    The kind-specific fields are None where they do not apply: ``width``/``height``
    (image, video), ``frames``/``fps`` (video), ``sample_rate``/``channels`` and
    ``duration`` seconds (audio; ``duration`` also video).
    """

    kind: str
    digest: str
    size: Int
    format: str
    caption: str | None = None
    width: Int | None = None
    height: Int | None = None
    frames: Int | None = None
    fps: float | None = None
    sample_rate: Int | None = None
    duration: float | None = None
    channels: Int | None = None


class Media(Record, tag=11):
    """One logged rich value at ``step`` under ``key``: an image, a gallery (a list of
    images logged under one key: one record, many items), audio, video, html or text."""

    step: Int
    key: str
    items: list[MediaItem]

    def blob_digests(self) -> list[str]:
        return [item.digest for item in self.items]


class TableRec(Record, tag=12):
    """One logged ``Table``: a Parquet blob (``digest``, ``size`` bytes).

    ``types[i]`` is column ``columns[i]``'s type: str | int | float | bool | image |
    list | null (only None seen). An image cell holds the image's digest (a string) in
    the Parquet file; each image is its own PNG blob, listed once in ``blobs``.
    """

    step: Int
    key: str
    digest: str
    size: Int
    nrows: Int
    ncols: Int
    columns: list[str]
    types: list[str]
    blobs: list[str] = []

    def blob_digests(self) -> list[str]:
        return [self.digest, *self.blobs]


class HistogramRec(Record, tag=13):
    """One logged ``Histogram``, inline (at most 512 bins): ``len(edges) == len(counts)
    + 1``. NaN, +Inf and -Inf values are left out of ``counts`` and counted here."""

    step: Int
    key: str
    counts: list[float]
    edges: list[float]
    nan: Int = 0
    posinf: Int = 0
    neginf: Int = 0


class DefineMetric(Record, tag=14):
    """``run.define_metric()``: how the metric ``name`` (a key, or a glob ending in
    ``*``) is shown. ``reduce`` is its cross-rank line (mean, wmean, sum, min, max);
    ``step_metric``, ``summary``, ``goal`` and ``hidden`` are kept as W&B's are. Any rank
    may write one; the run keeps the latest definition of each name."""

    name: str
    reduce: str = "mean"
    step_metric: str | None = None
    summary: str | None = None
    goal: str | None = None
    hidden: bool = False


class Alert(Record, tag=15):
    """``run.alert()``: a message for people, delivered by the server as an alert event
    (each record once). ``level`` is INFO, WARN or ERROR; ``wait_duration`` (seconds) is
    the least time between two alerts of one title from this process."""

    title: str
    text: str = ""
    level: str = "INFO"
    wait_duration: float = 0.0


class RunEdit(Record, tag=16):
    """A change of the run's ``field`` (name, tags or notes) made by the live run:
    ``value`` is the new whole value (tags: the list). The run's value is the latest of
    these and the edits kept outside the stream, by time (``rankwise.edits``)."""

    field: str
    value: Json = None


class Provenance(Record, tag=17):
    """What ran (``rankwise.sdk.provenance``). ``scope`` is ``run`` (the primary's: git,
    program, packages) or ``node`` (each node's local rank 0: host, OS, versions, GPUs);
    ``info`` holds the captured fields (``rankwise.wire.code`` spells them). The diff of
    tracked files, when captured, is the blob ``diff_digest`` (``diff_size`` bytes)."""

    scope: str
    info: dict[str, Json] = {}
    diff_digest: str | None = None
    diff_size: Int = 0

    def blob_digests(self) -> list[str]:
        return [self.diff_digest] if self.diff_digest else []


AnyRecord = (
    StreamStart
    | Metrics
    | ConfigUpdate
    | SummaryUpdate
    | Heartbeat
    | Finish
    | Console
    | System
    | Stall
    | Dropped
    | Media
    | TableRec
    | HistogramRec
    | DefineMetric
    | Alert
    | RunEdit
    | Provenance
)

RECORD_TYPES: tuple[type[Record], ...] = (
    StreamStart,
    Metrics,
    ConfigUpdate,
    SummaryUpdate,
    Heartbeat,
    Finish,
    Console,
    System,
    Stall,
    Dropped,
    Media,
    TableRec,
    HistogramRec,
    DefineMetric,
    Alert,
    RunEdit,
    Provenance,
)

# The payload of one frame: [schema version, [record, record, ...]].
Payload = tuple[int, list[AnyRecord]]

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(Payload)


def encode_payload(records: list[AnyRecord]) -> bytes:
    """Encode records as one frame payload."""
    return _encoder.encode((SCHEMA_VERSION, records))


_raw_decoder = msgspec.msgpack.Decoder(tuple[int, list[msgspec.Raw]])
_one_decoder = msgspec.msgpack.Decoder(AnyRecord)
_known_tags = frozenset(t.__struct_config__.tag for t in RECORD_TYPES)


def decode_payload(data: bytes | memoryview) -> list[AnyRecord]:
    """Decode one frame payload; raises ``msgspec.DecodeError`` on bad input.

    A record of a tag this module does not know (a later schema's) is skipped, the rest
    of the frame kept; anything else that does not decode is an error."""
    try:
        _version, records = _decoder.decode(data)
        return records  # type: ignore[no-any-return]
    except msgspec.DecodeError:
        _version, raws = _raw_decoder.decode(data)  # not a payload at all: raises
        out: list[AnyRecord] = []
        for raw in raws:
            try:
                out.append(_one_decoder.decode(raw))
            except msgspec.DecodeError:
                tag = _tag_of(raw)
                if tag is None or tag in _known_tags:
                    raise
        return out


def _tag_of(raw: msgspec.Raw) -> int | None:
    """The tag of an encoded record (an array whose first item is an int), else None."""
    try:
        head = msgspec.msgpack.decode(raw)
    except msgspec.DecodeError:
        return None
    if isinstance(head, list) and head and type(head[0]) is int:
        return head[0]
    return None


_raw_decoder = msgspec.msgpack.Decoder(tuple[int, list[msgspec.Raw]])
_one_decoder = msgspec.msgpack.Decoder(AnyRecord)


def raw_records(data: bytes | memoryview) -> list[msgspec.Raw]:
    """One frame payload's records, each still encoded (``decode_record`` decodes one):
    for readers that look at a few records or at their bytes. Raises
    ``msgspec.DecodeError`` on bad input."""
    _version, raws = _raw_decoder.decode(data)
    return raws


def decode_record(raw: msgspec.Raw | bytes) -> AnyRecord:
    """One record of ``raw_records``."""
    return _one_decoder.decode(raw)  # type: ignore[no-any-return]


def record_tag(raw: msgspec.Raw | bytes | memoryview) -> int:
    """An encoded record's type tag (``Record`` subclasses' ``tag=``) without decoding it:
    the first element of its MessagePack array, a positive fixint; -1 when the bytes do
    not start that way."""
    data = memoryview(raw)
    head = data[0] if len(data) else 0
    skip = 1 if 0x90 <= head <= 0x9F else 3 if head == 0xDC else 5 if head == 0xDD else -1
    if skip < 0 or len(data) <= skip:
        return -1
    return int(data[skip])


STATES = ("running", "finished", "failed", "killed", "crashed")
END_STATES = ("finished", "failed", "killed")  # what a Finish record may say
CONSOLE_STREAMS = ("stdout", "stderr")  # what a Console record's ``stream`` may be
