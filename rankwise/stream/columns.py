"""Columns of a stream file's ``Metrics`` records, read without a Python object a row.

``read_columns(path)`` reads the file once and returns, for its ``Metrics`` records in
file order, numpy arrays of ``seq``, ``step``, ``time`` and ``weight`` and one float64
array per metric key (NaN where a record lacks the key), plus every other record decoded
as usual. It is what ``RunInfo.scan()``/``history_df()`` and the local reader's fold use.

How: each frame's payload is split into its records' offsets in the file, without
decoding them: with numpy where the frame holds only ``Metrics`` records in runs of one
layout (``_split_alike``: one ``log()`` call repeated, the common case), else by msgspec
as ``msgspec.Raw``. A record found by the numpy split has been checked byte for byte
against its layout (structure, integer widths, key bytes), so its fields are read at the
layout's fixed offsets (``_gather_layout``: one gather per field for a whole run of
records). The other ``Metrics`` records are read with numpy gathers at their offsets,
one field (or one map entry) for all records at a time. Both go through byte-strided
views that read a big-endian float or integer at any offset (MessagePack is
big-endian). Keys are told apart by their length and first and last 8 bytes, which is
exact for keys up to 16 bytes and checked byte by byte for longer ones. A record the
gathers cannot read (an encoding this writer never produces, a key that needs that check
and fails it) is decoded by msgspec instead, so the result is always what the record
holds; the columns are float64, which holds every
logged float exactly (NaN and ±Inf included), bools as 0/1, and integers exactly up to
2**53.

Only complete frames are read (``rankwise.stream.frames``): a torn tail or damage stops
the read there and is reported in ``damage``, as ``scan()`` does.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from . import records as R
from .frames import MAGIC, Damage, damage_at, iter_frames, scan

_BATCH = 1 << 17  # records gathered at a time
_PAD = 16  # zero bytes after the data, so 8-byte gathers near the end stay inside
_split = msgspec.msgpack.Decoder(tuple[int, list[msgspec.Raw]])
_record = msgspec.msgpack.Decoder(R.AnyRecord)
_value = msgspec.msgpack.Decoder(R.Number)


@dataclass
class MetricColumns:
    """The ``Metrics`` records of one stream file as columns, in file order."""

    seq: np.ndarray
    step: np.ndarray
    time: np.ndarray
    weight: np.ndarray  # NaN where the call had no weight
    values: dict[str, np.ndarray]  # float64, NaN where a record lacks the key
    present: dict[str, np.ndarray]  # every key, wanted or not: which records hold it
    kinds: dict[str, set[str]] = field(default_factory=dict)  # "float", "int", "bool"
    first: dict[str, tuple[int, int]] = field(default_factory=dict)  # (row, place in it)
    others: list[R.AnyRecord] = field(default_factory=list)  # every other record
    damage: Damage | None = None
    ascending: bool = True  # every record's seq above the one before it, in file order
    _records: tuple[memoryview, np.ndarray, np.ndarray] | None = None

    def __len__(self) -> int:
        return len(self.seq)

    def last_value(self, key: str) -> Any:
        """``key``'s last logged value as it was logged (an int stays an int)."""
        i = int(np.flatnonzero(self.present[key])[-1])
        assert self._records is not None
        buf, starts, lens = self._records
        rec = _record.decode(buf[starts[i] : starts[i] + lens[i]])
        return rec.values[key]


class _Views:
    """Typed big-endian views of a buffer at every byte offset (``view[pos]``)."""

    def __init__(self, buf: bytearray, n: int) -> None:
        self.u8 = np.frombuffer(buf, np.uint8)
        m = n + _PAD - 8

        def at(dtype: str) -> np.ndarray:
            return np.ndarray((m,), dtype, buffer=buf, strides=(1,))

        self.le64 = at("<u8")
        self.f64, self.f32 = at(">f8"), at(">f4")
        self.u16, self.u32, self.u64 = at(">u2"), at(">u4"), at(">u8")
        self.i8, self.i16, self.i32, self.i64 = at("i1"), at(">i2"), at(">i4"), at(">i8")

    def ints(self, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """MessagePack integers at ``pos``: (value as int64, size in bytes, readable)."""
        b = self.u8[pos]
        val = b.astype(np.int64)
        size = np.ones(len(pos), np.int64)
        neg = b >= 0xE0
        val[neg] = self.i8[pos[neg]]
        ok = (b < 0x80) | neg
        seen = np.bincount(b, minlength=256)  # look only for the tags that occur
        for tag, view, width in (
            (0xCC, self.u8, 1),
            (0xCD, self.u16, 2),
            (0xCE, self.u32, 4),
            (0xD0, self.i8, 1),
            (0xD1, self.i16, 2),
            (0xD2, self.i32, 4),
            (0xD3, self.i64, 8),
        ):
            if not seen[tag]:
                continue
            hit = np.flatnonzero(b == tag)
            if len(hit):
                val[hit] = view[pos[hit] + 1]
                size[hit] = 1 + width
                ok[hit] = True
        hit = np.flatnonzero(b == 0xCF) if seen[0xCF] else pos[:0]
        if len(hit):  # a uint64 above the int64 range is left to msgspec
            big = self.u64[pos[hit] + 1]
            fits = hit[big <= np.iinfo(np.int64).max]
            val[fits] = self.u64[pos[fits] + 1].astype(np.int64)
            size[hit] = 9
            ok[fits] = True
        return val, size, ok

    def numbers(self, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """MessagePack numbers and bools at ``pos`` as float64: (value, size, readable)."""
        b = self.u8[pos]
        fl = np.flatnonzero(b == 0xCB)
        if len(fl) == len(pos):  # the writer's floats: the common case, one gather
            return self.f64[pos + 1], np.full(len(pos), 9, np.int64), np.ones(len(pos), bool)
        ival, size, ok = self.ints(pos)
        val = ival.astype(np.float64)
        for tag, view, width in ((0xCB, self.f64, 8), (0xCA, self.f32, 4)):
            hit = np.flatnonzero(b == tag)
            val[hit] = view[pos[hit] + 1]
            size[hit] = 1 + width
            ok[hit] = True
        for tag, number in ((0xC2, 0.0), (0xC3, 1.0)):
            hit = np.flatnonzero(b == tag)
            val[hit] = number
            size[hit] = 1
            ok[hit] = True
        return val, size, ok


def read_columns(path: Path, keys: list[str] | None = None) -> MetricColumns:
    """The file's ``Metrics`` records as columns (``keys``: only those value columns;
    ``present`` always covers every key). Raises ``OSError`` when unreadable."""
    with open(path, "rb") as f:
        size = f.seek(0, 2)
        f.seek(0)
        buf = bytearray(size + _PAD)
        n = f.readinto(memoryview(buf)[:size]) or 0
    data = memoryview(buf)[:n]
    if bytes(data[: len(MAGIC)]) != MAGIC[: min(n, len(MAGIC))]:
        return _empty(Damage(0, n, "not a rankwise stream"))
    layouts: list[_Layout] = []
    parts, end, reason = _split_records(buf, n, layouts)
    damage = None
    if end < n:
        damage = Damage(end, n - end, reason) if reason else damage_at(data, end)
    try:
        cols = _gather(buf, n, parts, layouts, keys)
    except (msgspec.DecodeError, ValueError):
        # A record that does not decode in a frame with a valid checksum: stop at that
        # frame and report it, as scan() does for every other reader.
        found = scan(data)
        cols = _gather(buf, n, parts.before(found.end), layouts, keys)
        damage = found.damage
    cols.damage = damage
    return cols


def _empty(damage: Damage | None) -> MetricColumns:
    i, f = np.empty(0, np.int64), np.empty(0, np.float64)
    return MetricColumns(i, i, f, f, {}, {}, damage=damage)


@dataclass
class _Parts:
    """A file's records, split: the ``Metrics`` records' offsets, lengths and layouts
    (an index into the layouts found; -1: not known), and the other records' offsets
    and lengths, each in file order."""

    m_start: np.ndarray
    m_len: np.ndarray
    m_lid: np.ndarray
    o_start: np.ndarray
    o_len: np.ndarray

    def before(self, offset: int) -> _Parts:
        m, o = self.m_start < offset, self.o_start < offset
        return _Parts(self.m_start[m], self.m_len[m], self.m_lid[m], self.o_start[o], self.o_len[o])


def _split_records(buf: bytearray, n: int, layouts: list[_Layout]) -> tuple[_Parts, int, str]:
    """The file's records (``_Parts``; ``layouts`` is filled), the end of the last good
    frame, and why the frames stopped before the end ("" when not for a decode failure)."""
    data = memoryview(buf)[:n]
    m_start: list[np.ndarray] = []
    m_len: list[np.ndarray] = []
    m_lid: list[np.ndarray] = []
    o_start: list[np.ndarray] = []
    o_len: list[np.ndarray] = []
    end, reason = len(MAGIC), ""
    v = _Views(buf, n)
    known: dict[tuple[Any, ...], int] = {}
    for body, stop in iter_frames(data, len(MAGIC)):
        fast = _split_alike(v, body, stop, layouts, known)
        if fast is not None:
            m_start.append(fast[0])
            m_len.append(fast[1])
            m_lid.append(fast[2])
            end = stop
            continue
        try:
            raws = _split.decode(data[body:stop])[1]
        except (msgspec.DecodeError, ValueError) as exc:
            reason = f"frame with a valid checksum failed to decode: {exc}"
            break
        size = np.fromiter(map(len, raws), np.int64, len(raws))
        offsets = np.empty_like(size)
        if len(size):
            offsets[0] = 0
            np.cumsum(size[:-1], out=offsets[1:])
            offsets += stop - int(size.sum())  # the records end the payload
        head = v.u8[offsets]
        metric = (head >= 0x95) & (head <= 0x9F) & (v.u8[offsets + 1] == 2)
        m_start.append(offsets[metric])
        m_len.append(size[metric].astype(np.int32))  # a record is far below 2 GiB
        m_lid.append(np.full(int(metric.sum()), -1, np.int32))
        o_start.append(offsets[~metric])
        o_len.append(size[~metric])
        end = stop

    def joined(pieces: list[np.ndarray], dtype: type) -> np.ndarray:
        return np.concatenate(pieces) if pieces else np.empty(0, dtype)

    parts = _Parts(
        joined(m_start, np.int64),
        joined(m_len, np.int32),
        joined(m_lid, np.int32),
        joined(o_start, np.int64),
        joined(o_len, np.int64),
    )
    return parts, end, reason


@dataclass
class _Layout:
    """Where the fields of one ``Metrics`` record layout lie (offsets from its start).

    ``checks`` fix its length and structure; ``words`` are its key bytes (8 at a time:
    offset, little-endian word, mask), so a record that passes both holds exactly these
    keys, each a float64 at ``values[i][1] + 1``."""

    checks: list[tuple[int, str, int]]
    words: list[tuple[int, int, int]]
    length: int
    seq: int
    time: int
    step: int
    values: list[tuple[str, int]]  # (key, offset of its value's tag byte)
    weight: int | None  # offset of the weight's tag byte (0xCB or nil), or None

    def sig(self) -> tuple[Any, ...]:
        return (self.length, tuple(self.checks), tuple(self.words))

    def holds(self, v: _Views, cand: np.ndarray) -> np.ndarray:
        """Which records at ``cand`` have this layout (one gather per check: measured
        faster than one 2-D gather of them all)."""
        u8 = v.u8
        good = np.ones(len(cand), bool)
        for off, what, want in self.checks:
            if what == "int":
                good &= _INT_SIZE[u8[cand + off]] == want
            else:
                good &= u8[cand + off] == want
        for off, word, mask in self.words:
            good &= (v.le64[cand + off] & np.uint64(mask)) == np.uint64(word)
        return good


# The size in bytes of a MessagePack integer by its first byte (0: not an integer).
_INT_SIZE = np.zeros(256, np.int64)
_INT_SIZE[:0x80] = _INT_SIZE[0xE0:] = 1
for _tag, _size in ((0xCC, 2), (0xCD, 3), (0xCE, 5), (0xCF, 9)):
    _INT_SIZE[_tag] = _INT_SIZE[_tag + 4] = _size  # unsigned 0xCC.., signed 0xD0..
_MAX_LAYOUTS = 16  # layout changes in one frame before msgspec splits it instead
_MAX_RUNS = 4096  # runs of one layout read run by run; past that, layout by layout


def _split_alike(
    v: _Views, body: int, stop: int, layouts: list[_Layout], known: dict[tuple[Any, ...], int]
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The records of the frame payload ``u8[body:stop]`` as (offsets, lengths) when
    they are ``Metrics`` records in runs of one layout (one ``log()`` call repeated: the
    same key bytes, float64 values, seq and step of one integer width), found with numpy
    instead of a ``msgspec.Raw`` each; None otherwise (msgspec splits the frame).

    Each run's records are guessed at a fixed stride from its first record's length and
    every guessed record is checked byte by byte for that layout's structure (the
    headers, key bytes and value tags that fix its length), so a record is only taken
    where the walk msgspec does would find it; the first record that fails the check
    starts the next run. The payload must end exactly after the last record. The key
    bytes are checked too (8 at a time), so each run's records are known to hold its
    layout's keys: the gathers then read every field at a fixed offset. Returns the
    offsets, the lengths and each record's index in ``layouts`` (which this extends)."""
    u8 = v.u8
    if stop - body < 3 or u8[body] != 0x92 or not _INT_SIZE[u8[body + 1]]:
        return None
    p = body + 1 + int(_INT_SIZE[u8[body + 1]])
    h = int(u8[p])
    if 0x90 <= h <= 0x9F:
        count, p = h & 0x0F, p + 1
    elif h == 0xDC and p + 3 <= stop:
        count, p = int(u8[p + 1]) << 8 | int(u8[p + 2]), p + 3
    elif h == 0xDD and p + 5 <= stop:
        count, p = int.from_bytes(u8[p + 1 : p + 5].tobytes(), "big"), p + 5
    else:
        return None
    starts: list[np.ndarray] = []
    lens: list[np.ndarray] = []
    lids: list[np.ndarray] = []
    done = 0
    while done < count:
        if len(starts) >= _MAX_LAYOUTS:
            return None
        layout = _layout_at(u8, p, stop)
        if layout is None:
            return None
        length = layout.length
        k = min(count - done, (stop - p) // length)
        if k < 1:
            return None
        cand = p + length * np.arange(k, dtype=np.int64)
        good = layout.holds(v, cand)
        run = k if good.all() else int(np.argmin(good))
        if run < 1:
            return None  # cannot happen: the layout was read from this record
        lid = known.get(layout.sig())
        if lid is None:
            lid = known[layout.sig()] = len(layouts)
            layouts.append(layout)
        starts.append(cand[:run])
        lens.append(np.full(run, length, np.int32))
        lids.append(np.full(run, lid, np.int32))
        done += run
        p += run * length
    if p != stop:
        return None
    if not starts:
        none = np.empty(0, np.int64)
        return none, none, none
    return np.concatenate(starts), np.concatenate(lens), np.concatenate(lids)


def _layout_at(u8: np.ndarray, p: int, stop: int) -> _Layout | None:
    """The structure of the ``Metrics`` record at ``p``: every (offset, "int" or "byte",
    expected size or byte) that fixes its length, and its length; None when it is not a
    record the fast split knows (a non-float value, a map over 15 entries, ...)."""
    if p + 2 > stop:
        return None
    head = int(u8[p])
    if head not in (0x95, 0x96) or u8[p + 1] != 2:
        return None
    checks: list[tuple[int, str, int]] = [(0, "byte", head), (1, "byte", 2)]
    words: list[tuple[int, int, int]] = []
    values: list[tuple[str, int]] = []
    at: dict[str, int] = {}
    off = 2
    for slot in ("seq", "time", "step"):
        if p + off >= stop:
            return None
        at[slot] = off
        if slot == "time":
            if u8[p + off] != 0xCB:
                return None
            checks.append((off, "byte", 0xCB))
            off += 9
            continue
        tag = int(u8[p + off])
        size = int(_INT_SIZE[tag])
        if not size or tag == 0xCF:  # a uint64 (past int64 perhaps): msgspec reads it
            return None
        # A one-byte integer may be a positive or a negative fixint; a wider one keeps
        # its tag, so the gathers read it with one typed view.
        checks.append((off, "int", 1) if size == 1 else (off, "byte", tag))
        off += size
    if p + off >= stop:
        return None
    mh = int(u8[p + off])
    if not 0x80 <= mh <= 0x8F:
        return None
    checks.append((off, "byte", mh))
    off += 1
    for _ in range(mh & 0x0F):
        if p + off + 1 >= stop:
            return None
        kb = int(u8[p + off])
        if 0xA0 <= kb <= 0xBF:
            klen, hdr = kb & 0x1F, 1
        elif kb == 0xD9:
            klen, hdr = int(u8[p + off + 1]), 2
        else:
            return None
        # The key's header fixes the entry's size; its bytes name the value's column.
        checks.extend((off + i, "byte", int(u8[p + off + i])) for i in range(hdr))
        kstart = off + hdr
        if p + kstart + klen > stop:
            return None
        key = u8[p + kstart : p + kstart + klen].tobytes()
        try:
            name = key.decode()
        except UnicodeDecodeError:
            return None
        for c in range(0, klen, 8):
            piece = key[c : c + 8]
            words.append((kstart + c, int.from_bytes(piece, "little"), (1 << 8 * len(piece)) - 1))
        off = kstart + klen
        if p + off >= stop or u8[p + off] != 0xCB:
            return None
        checks.append((off, "byte", 0xCB))
        values.append((name, off))
        off += 9
    if len({name for name, _ in values}) != len(values):
        return None  # a key twice in one map: msgspec decides which value counts
    weight = None
    if head == 0x96:
        if p + off >= stop:
            return None
        wb = int(u8[p + off])
        if wb not in (0xC0, 0xCB):
            return None
        checks.append((off, "byte", wb))
        weight = off
        off += 1 if wb == 0xC0 else 9
    if p + off > stop:
        return None
    return _Layout(checks, words, off, at["seq"], at["time"], at["step"], values, weight)


def _gather(
    buf: bytearray,
    n: int,
    parts: _Parts,
    layouts: list[_Layout],
    keys: list[str] | None,
) -> MetricColumns:
    v = _Views(buf, n)
    o_start, o_len = parts.o_start, parts.o_len
    others = [_record.decode(buf[a : a + b]) for a, b in zip(o_start.tolist(), o_len.tolist())]
    m_start, m_len, m_lid = parts.m_start, parts.m_len, parts.m_lid
    count = len(m_start)
    cols = MetricColumns(
        seq=np.empty(count, np.int64),
        step=np.empty(count, np.int64),
        time=np.empty(count, np.float64),
        weight=np.full(count, np.nan),
        values={},
        present={},
        others=others,
    )
    cols._records = (memoryview(buf), m_start, m_len)
    want = set(keys) if keys is not None else None
    ok = np.ones(count, bool)
    # Records of a known layout come in runs (one log() call repeated): read each run
    # with contiguous slices, or, when the runs are many and short, each layout at once.
    cut = np.flatnonzero(m_lid[1:] != m_lid[:-1]) + 1
    bounds = np.concatenate(([0], cut, [count])).tolist() if count else []
    if len(bounds) <= _MAX_RUNS:
        for a, b in itertools.pairwise(bounds):
            i = int(m_lid[a])
            if i >= 0:
                _gather_layout(v, layouts[i], m_start[a:b], slice(a, b), cols, want)
    else:
        for i, layout in enumerate(layouts):
            rows = np.flatnonzero(m_lid == i)
            if len(rows):
                _gather_layout(v, layout, m_start[rows], rows, cols, want)
    rest = np.flatnonzero(m_lid < 0)
    # In batches, so the temporaries of a million-record file stay a few MB.
    for lo in range(0, len(rest), _BATCH):
        at = rest[lo : lo + _BATCH]
        ok[at] = _gather_batch(v, n, m_start[at], m_len[at], cols, at, want)
    slow = np.flatnonzero(~ok)
    if len(slow):
        _decode_slowly(cols, buf, slow, want)
    cols.ascending = _ascending(cols.seq, m_start, others, o_start)
    return cols


def _ascending(
    seq: np.ndarray, m_start: np.ndarray, others: list[R.AnyRecord], o_start: np.ndarray
) -> bool:
    """Every record's seq above the one before it in the file: the ``Metrics`` records'
    and the others' each ascending, and each other record's seq between those of the
    ``Metrics`` records around it."""
    if not bool(np.all(seq[1:] > seq[:-1])):
        return False
    if not others:
        return True
    o_seq = np.array([rec.seq for rec in others], np.int64)
    if not bool(np.all(o_seq[1:] > o_seq[:-1])):
        return False
    k = np.searchsorted(m_start, o_start)  # the Metrics records before each other one
    has_before, has_after = k > 0, k < len(seq)
    if not bool(np.all(seq[k[has_before] - 1] < o_seq[has_before])):
        return False
    return bool(np.all(seq[k[has_after]] > o_seq[has_after]))


def _gather_layout(
    v: _Views,
    layout: _Layout,
    base: np.ndarray,
    at: np.ndarray | slice,
    cols: MetricColumns,
    want: set[str] | None,
) -> None:
    """Read the records at ``base`` (rows ``at`` of ``cols``), all of ``layout`` (checked
    while splitting), each field at its fixed offset."""
    first_row = at.start if isinstance(at, slice) else int(at[0])
    cols.seq[at] = _int_at(v, base + layout.seq)
    cols.time[at] = v.f64[base + (layout.time + 1)]
    cols.step[at] = _int_at(v, base + layout.step)
    if layout.weight is not None:
        w = v.u8[base + layout.weight] == 0xCB
        if w.any():
            cols.weight[at] = np.where(w, v.f64[base + (layout.weight + 1)], np.nan)
    count = len(cols)
    for j, (name, off) in enumerate(layout.values):
        mask = cols.present.get(name)
        if mask is None:
            mask = cols.present[name] = np.zeros(count, bool)
        mask[at] = True
        cols.kinds.setdefault(name, set()).add("float")
        seen = (first_row, j)
        if name not in cols.first or seen < cols.first[name]:
            cols.first[name] = seen
        if want is None or name in want:
            col = cols.values.get(name)
            if col is None:
                col = cols.values[name] = np.full(count, np.nan)
            col[at] = v.f64[base + (off + 1)]


def _int_at(v: _Views, pos: np.ndarray) -> np.ndarray:
    """The MessagePack integers at ``pos``, which all share the first one's tag (or are
    all one-byte fixints): one typed gather."""
    if not len(pos):
        return np.empty(0, np.int64)
    tag = int(v.u8[pos[0]])
    if tag < 0x80 or tag >= 0xE0:
        out: np.ndarray = v.u8[pos].astype(np.int64)
        out[out >= 0xE0] -= 256
        return out
    view: np.ndarray = getattr(v, _TAG_VIEW[tag])
    out = view[pos + 1].astype(np.int64)
    return out


_TAG_VIEW = {0xCC: "u8", 0xCD: "u16", 0xCE: "u32", 0xD0: "i8", 0xD1: "i16", 0xD2: "i32"}
_TAG_VIEW[0xD3] = "i64"


def _gather_batch(
    v: _Views,
    n: int,
    m_start: np.ndarray,
    m_len: np.ndarray,
    cols: MetricColumns,
    at: np.ndarray,
    want: set[str] | None,
) -> np.ndarray:
    """Read ``Metrics`` records at ``m_start`` into rows ``at`` of ``cols`` (ascending);
    returns which of them were read (the others are left to msgspec)."""
    fields = v.u8[m_start].astype(np.int64) - 0x90
    # A record read wrong points past its end; clipping keeps its gathers in the buffer
    # (it is then found out, by its end or a field, and decoded by msgspec).
    last = max(n - 1, 0)
    pos = m_start + 2
    cols.seq[at], size, ok = v.ints(pos)
    pos = np.minimum(pos + size, last)
    ok &= v.u8[pos] == 0xCB
    cols.time[at] = v.f64[pos + 1]
    pos = np.minimum(pos + 9, last)
    cols.step[at], size, ok_step = v.ints(pos)
    ok &= ok_step
    pos = np.minimum(pos + size, last)
    mh = v.u8[pos]
    fixmap = (mh >= 0x80) & (mh <= 0x8F)
    map16 = mh == 0xDE
    entries = np.where(fixmap, mh.astype(np.int64) - 0x80, 0)
    entries[map16] = v.u16[pos[map16] + 1]
    ok &= fixmap | map16
    pos = np.minimum(pos + np.where(map16, 3, 1), last)
    del size, ok_step, mh, fixmap, map16

    count = len(cols)
    done = _same_layout(v, pos, ok, entries, cols, at, want)
    rest = ok.copy()
    rest[done] = False
    most = int(entries[rest].max()) if rest.any() else 0
    for j in range(most):
        rows = np.flatnonzero(rest & (entries > j))
        p = pos[rows]
        kb = v.u8[p]
        fix = (kb >= 0xA0) & (kb <= 0xBF)
        klen = np.where(fix, kb.astype(np.int64) & 0x1F, v.u8[p + 1].astype(np.int64))
        kstart = p + np.where(fix, 1, 2)
        s16 = kb == 0xDA
        klen[s16] = v.u16[p[s16] + 1]
        kstart[s16] = p[s16] + 3
        vpos = np.minimum(kstart + klen, last)
        klen = vpos - kstart
        val, vsize, good = v.numbers(vpos)
        good &= fix | (kb == 0xD9) | s16
        pos[rows] = np.minimum(vpos + vsize, last)
        for name, sel in _key_groups(v, kstart, klen, good):
            r = at[rows[sel]]
            mask = cols.present.get(name)
            if mask is None:
                mask = cols.present[name] = np.zeros(count, bool)
            mask[r] = True
            seen = (int(r[0]), j)
            if seen < cols.first.get(name, seen):
                cols.first[name] = seen
            cols.first.setdefault(name, seen)
            tags = v.u8[vpos[sel]]
            kinds = cols.kinds.setdefault(name, set())
            if ((tags == 0xCB) | (tags == 0xCA)).any():
                kinds.add("float")
            if ((tags | 1) == 0xC3).any():
                kinds.add("bool")
            if ((tags < 0xC0) | (tags > 0xCB)).any():
                kinds.add("int")
            if want is None or name in want:
                col = cols.values.get(name)
                if col is None:
                    col = cols.values[name] = np.full(count, np.nan)
                col[r] = val[sel]
        ok[rows[~good]] = False
        rest[rows[~good]] = False

    weighted = fields >= 6
    wb = v.u8[pos]
    wf = weighted & (wb == 0xCB)
    cols.weight[at[wf]] = v.f64[pos[wf] + 1]
    ok &= (fields >= 5) & (~weighted | (wb == 0xC0) | wf)
    stop = pos + np.where(weighted, np.where(wf, 9, 1), 0)
    ok &= (stop == m_start + m_len) | (fields > 6)  # later fields: not read here
    return ok


def _same_layout(
    v: _Views,
    pos: np.ndarray,
    ok: np.ndarray,
    entries: np.ndarray,
    cols: MetricColumns,
    at: np.ndarray,
    want: set[str] | None,
) -> np.ndarray:
    """Read the records whose values map has the first one's layout (the same keys in
    the same order, every value a float64: one ``log()`` call repeated), each entry at a
    fixed offset; returns their rows. Their key bytes are compared in full, so this is
    exact; the other records go through the entry-by-entry path."""
    idx = np.flatnonzero(ok)
    if not len(idx):
        return idx
    t = int(idx[0])
    p = start = int(pos[t])
    layout: list[tuple[bytes, str, int]] = []  # (header and key bytes, key, offset)
    for _ in range(int(entries[t])):
        b = int(v.u8[p])
        if 0xA0 <= b <= 0xBF:
            klen, kstart = b & 0x1F, p + 1
        elif b == 0xD9:
            klen, kstart = int(v.u8[p + 1]), p + 2
        else:
            return idx[:0]
        if kstart + klen >= len(v.u8) or int(v.u8[kstart + klen]) != 0xCB:
            return idx[:0]
        enc = v.u8[p : kstart + klen].tobytes()
        try:
            name = enc[kstart - p :].decode()
        except UnicodeDecodeError:
            return idx[:0]
        layout.append((enc, name, p - start))
        p = kstart + klen + 9
    rows = idx[entries[idx] == len(layout)]
    base = pos[rows]
    match = np.ones(len(rows), bool)
    # A shorter record near the end of the file would be read past the buffer: clip (a
    # clipped read is found out here, or by the record's end in ``_gather_batch``).
    top = len(v.le64) - 1
    for enc, _name, off in layout:
        for c in range(0, len(enc), 8):
            chunk = enc[c : c + 8]
            mask = np.uint64((1 << (8 * len(chunk))) - 1)
            word = np.uint64(int.from_bytes(chunk, "little"))
            match &= (v.le64[np.minimum(base + (off + c), top)] & mask) == word
        match &= v.u8[np.minimum(base + (off + len(enc)), top)] == 0xCB
    rows, base = rows[match], base[match]
    if not len(rows):
        return idx[:0]
    count = len(cols)
    r = at[rows]
    for j, (enc, name, off) in enumerate(layout):
        if name not in cols.present:
            cols.present[name] = np.zeros(count, bool)
        cols.present[name][r] = True
        cols.kinds.setdefault(name, set()).add("float")
        seen = (int(r[0]), j)
        if seen < cols.first.get(name, seen) or name not in cols.first:
            cols.first[name] = seen
        if want is None or name in want:
            if name not in cols.values:
                cols.values[name] = np.full(count, np.nan)
            cols.values[name][r] = v.f64[base + (off + len(enc) + 1)]
    pos[rows] = base + (p - start)
    found: np.ndarray = rows
    return found


def _key_groups(
    v: _Views, kstart: np.ndarray, klen: np.ndarray, good: np.ndarray
) -> list[tuple[str, np.ndarray]]:
    """The distinct keys among these map entries and where each is; an entry whose key
    cannot be told exactly this way is marked not ``good`` (msgspec reads its record)."""
    mask = np.where(
        klen >= 8,
        ~np.uint64(0),
        (np.uint64(1) << (8 * np.minimum(klen, 7)).astype(np.uint64)) - np.uint64(1),
    )
    a = v.le64[kstart] & mask
    b = np.where(klen > 8, v.le64[np.maximum(kstart + klen - 8, 0)], np.uint64(0))
    c = klen.astype(np.uint64)
    idx = np.flatnonzero(good)
    if not len(idx):
        return []
    first = idx[0]
    same = (a == a[first]) & (b == b[first]) & (c == c[first])
    if same[idx].all():
        groups = [idx]
    else:
        h = a * np.uint64(0x9E3779B97F4A7C15) ^ b * np.uint64(0xC2B2AE3D27D4EB4F) ^ c
        uniq, inverse = np.unique(h[idx], return_inverse=True)
        order = np.argsort(inverse, kind="stable")
        bounds = np.searchsorted(inverse[order], np.arange(len(uniq) + 1))
        groups = [idx[order[bounds[g] : bounds[g + 1]]] for g in range(len(uniq))]
    out = []
    for group in groups:
        rep = int(group[0])
        length = int(klen[rep])
        start = int(kstart[rep])
        exact = (a[group] == a[rep]) & (b[group] == b[rep]) & (c[group] == c[rep])
        if length > 16:  # first and last 8 bytes do not cover it: compare every byte
            body = v.u8[kstart[group][:, None] + np.arange(length)]
            exact &= (body == v.u8[start : start + length]).all(axis=1)
        good[group[~exact]] = False
        try:
            name = v.u8[start : start + length].tobytes().decode()
        except UnicodeDecodeError:
            good[group] = False
            continue
        out.append((name, group[exact]))
    return out


def _decode_slowly(
    cols: MetricColumns, buf: bytearray, slow: np.ndarray, want: set[str] | None
) -> None:
    """Records the gathers could not read, decoded by msgspec into their rows."""
    assert cols._records is not None
    _, starts, lens = cols._records
    for mask in cols.present.values():
        mask[slow] = False
    for col in cols.values.values():
        col[slow] = np.nan
    count = len(cols)
    for i in slow.tolist():
        rec = _record.decode(buf[starts[i] : starts[i] + lens[i]])
        assert isinstance(rec, R.Metrics)
        cols.seq[i], cols.step[i], cols.time[i] = rec.seq, rec.step, rec.time
        cols.weight[i] = np.nan if rec.weight is None else rec.weight
        for j, (key, value) in enumerate(rec.values.items()):
            if (i, j) < cols.first.get(key, (i, j)) or key not in cols.first:
                cols.first[key] = (i, j)
            if key not in cols.present:
                cols.present[key] = np.zeros(count, bool)
            cols.present[key][i] = True
            kind = "bool" if type(value) is bool else "int" if type(value) is int else "float"
            cols.kinds.setdefault(key, set()).add(kind)
            if want is None or key in want:
                if key not in cols.values:
                    cols.values[key] = np.full(count, np.nan)
                cols.values[key][i] = float(value)
