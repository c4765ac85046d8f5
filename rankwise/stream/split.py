"""Splitting a stream file's frames into records, without decoding them.

``split_records`` finds each record's offset and length: with numpy where a frame holds
only ``Metrics`` records in runs of one layout (``split_alike``: one ``log()`` call
repeated), else by msgspec as ``msgspec.Raw``. A record the numpy split takes has been
checked byte for byte against its ``Layout`` (structure, integer widths, tags, key
bytes), so ``rankwise.stream.columns`` reads its fields at the layout's fixed offsets.
``Views`` reads big-endian numbers at any byte offset of the file's buffer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec
import numpy as np

from .frames import MAGIC, iter_frames
from .records import raw_records

PAD = 16  # zero bytes after the data, so 8-byte gathers near the end stay inside


class Views:
    """Typed big-endian views of a buffer at every byte offset (``view[pos]``)."""

    def __init__(self, buf: bytearray, n: int) -> None:
        self.u8 = np.frombuffer(buf, np.uint8)
        m = n + PAD - 8

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


@dataclass
class Parts:
    """A file's records, split: the ``Metrics`` records' offsets, lengths and layouts
    (an index into the layouts found; -1: not known), and the other records' offsets
    and lengths, each in file order."""

    m_start: np.ndarray
    m_len: np.ndarray
    m_lid: np.ndarray
    o_start: np.ndarray
    o_len: np.ndarray

    def before(self, offset: int) -> Parts:
        m, o = self.m_start < offset, self.o_start < offset
        return Parts(self.m_start[m], self.m_len[m], self.m_lid[m], self.o_start[o], self.o_len[o])


def split_records(buf: bytearray, n: int, layouts: list[Layout]) -> tuple[Parts, int, str]:
    """The file's records (``Parts``; ``layouts`` is filled), the end of the last good
    frame, and why the frames stopped before the end ("" when not for a decode failure)."""
    data = memoryview(buf)[:n]
    m_start: list[np.ndarray] = []
    m_len: list[np.ndarray] = []
    m_lid: list[np.ndarray] = []
    o_start: list[np.ndarray] = []
    o_len: list[np.ndarray] = []
    end, reason = len(MAGIC), ""
    v = Views(buf, n)
    known: dict[tuple[Any, ...], int] = {}
    # The records of the frames msgspec splits, gathered over consecutive such frames
    # (small frames are the common case: numpy calls per frame would cost more than the
    # records), and sorted into Metrics and others when a fast frame or the end comes.
    slow_start: list[int] = []
    slow_len: list[int] = []

    def sort_slow() -> None:
        if not slow_start:
            return
        offsets = np.array(slow_start, np.int64)
        size = np.array(slow_len, np.int64)
        head = v.u8[offsets]
        metric = (head >= 0x95) & (head <= 0x9F) & (v.u8[offsets + 1] == 2)
        m_start.append(offsets[metric])
        m_len.append(size[metric].astype(np.int32))  # a record is far below 2 GiB
        m_lid.append(np.full(int(metric.sum()), -1, np.int32))
        o_start.append(offsets[~metric])
        o_len.append(size[~metric])
        slow_start.clear()
        slow_len.clear()

    for body, stop in iter_frames(data, len(MAGIC)):
        fast = split_alike(v, body, stop, layouts, known)
        if fast is not None:
            sort_slow()
            m_start.append(fast[0])
            m_len.append(fast[1])
            m_lid.append(fast[2])
            end = stop
            continue
        try:
            raws = raw_records(data[body:stop])
        except (msgspec.DecodeError, ValueError) as exc:
            reason = f"frame with a valid checksum failed to decode: {exc}"
            break
        sizes = list(map(len, raws))
        at = stop - sum(sizes)  # the records end the payload
        for size in sizes:
            slow_start.append(at)
            slow_len.append(size)
            at += size
        end = stop
    sort_slow()

    def joined(pieces: list[np.ndarray], dtype: type) -> np.ndarray:
        return np.concatenate(pieces) if pieces else np.empty(0, dtype)

    parts = Parts(
        joined(m_start, np.int64),
        joined(m_len, np.int32),
        joined(m_lid, np.int32),
        joined(o_start, np.int64),
        joined(o_len, np.int64),
    )
    return parts, end, reason


@dataclass
class Layout:
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

    def holds(self, v: Views, cand: np.ndarray) -> np.ndarray:
        """Which records at ``cand`` have this layout (one gather per check: measured
        faster than one 2-D gather of them all)."""
        u8 = v.u8
        good = np.ones(len(cand), bool)
        for off, what, want in self.checks:
            if what == "int":
                good &= INT_SIZE[u8[cand + off]] == want
            else:
                good &= u8[cand + off] == want
        for off, word, mask in self.words:
            good &= (v.le64[cand + off] & np.uint64(mask)) == np.uint64(word)
        return good


# The size in bytes of a MessagePack integer by its first byte (0: not an integer).
INT_SIZE = np.zeros(256, np.int64)
INT_SIZE[:0x80] = INT_SIZE[0xE0:] = 1
for _tag, _size in ((0xCC, 2), (0xCD, 3), (0xCE, 5), (0xCF, 9)):
    INT_SIZE[_tag] = INT_SIZE[_tag + 4] = _size  # unsigned 0xCC.., signed 0xD0..
MAX_LAYOUTS = 16  # layout changes in one frame before msgspec splits it instead


def split_alike(
    v: Views, body: int, stop: int, layouts: list[Layout], known: dict[tuple[Any, ...], int]
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
    if stop - body < 3 or u8[body] != 0x92 or not INT_SIZE[u8[body + 1]]:
        return None
    p = body + 1 + int(INT_SIZE[u8[body + 1]])
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
        if len(starts) >= MAX_LAYOUTS:
            return None
        layout = layout_at(u8, p, stop)
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


def layout_at(u8: np.ndarray, p: int, stop: int) -> Layout | None:
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
        size = int(INT_SIZE[tag])
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
    return Layout(checks, words, off, at["seq"], at["time"], at["step"], values, weight)
