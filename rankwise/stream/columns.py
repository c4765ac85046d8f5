"""Columns of a stream file's ``Metrics`` records, read without a Python object a row.

``read_columns(path)`` reads the file once and returns, for its ``Metrics`` records in
file order, numpy arrays of ``seq``, ``step``, ``time`` and ``weight`` and one float64
array per metric key (NaN where a record lacks the key), plus every other record decoded
as usual. It is what ``RunInfo.scan()``/``history_df()`` and the local reader's fold use.

How: each frame's payload is split into its records' offsets in the file, without
decoding them: with numpy where the frame holds only ``Metrics`` records in runs of one
layout (``split.split_alike``: one ``log()`` call repeated, the common case), else by msgspec
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
from .frames import MAGIC, Damage, damage_at, scan
from .split import PAD, Layout, Parts, Views, split_records

_BATCH = 1 << 17  # records gathered at a time
_MAX_RUNS = 4096  # runs of one layout read run by run; past that, layout by layout
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
        return self.last_values([key])[key]

    def last_values(self, keys: list[str]) -> dict[str, Any]:
        """Each of ``keys``' last logged value as it was logged, in the order given. A
        record is decoded once however many of the keys it last holds (a call of 20,000
        keys is one decode, not 20,000)."""
        assert self._records is not None
        buf, starts, lens = self._records
        decoded: dict[int, Any] = {}
        out: dict[str, Any] = {}
        for key in keys:
            i = int(np.flatnonzero(self.present[key])[-1])
            rec = decoded.get(i)
            if rec is None:
                rec = decoded[i] = _record.decode(buf[starts[i] : starts[i] + lens[i]])
            out[key] = rec.values[key]
        return out


def tail(cols: MetricColumns, rows: int) -> MetricColumns | None:
    """The last rows of ``cols``: every row whose step is at least the step ``rows``
    rows from the end (so a step's rows are never split), with the value and presence
    columns of every key and nothing else (no other records, no record bytes). None
    when its steps go back somewhere (then a later row may not be a later step)."""
    step = cols.step
    if len(step) > 1 and not bool((step[1:] >= step[:-1]).all()):
        return None
    cut = int(np.searchsorted(step, step[-rows], "left")) if len(step) > rows else 0
    return MetricColumns(
        seq=cols.seq[cut:].copy(),
        step=step[cut:].copy(),
        time=cols.time[cut:].copy(),
        weight=cols.weight[cut:].copy(),
        values={k: v[cut:].copy() for k, v in cols.values.items()},
        present={k: m[cut:].copy() for k, m in cols.present.items()},
        kinds=cols.kinds,
        damage=cols.damage,
        ascending=cols.ascending,
    )


def read_columns(path: Path, keys: list[str] | None = None) -> MetricColumns:
    """The file's ``Metrics`` records as columns (``keys``: only those value columns;
    ``present`` always covers every key). Raises ``OSError`` when unreadable."""
    with open(path, "rb") as f:
        size = f.seek(0, 2)
        f.seek(0)
        buf = bytearray(size + PAD)
        n = f.readinto(memoryview(buf)[:size]) or 0
    data = memoryview(buf)[:n]
    if bytes(data[: len(MAGIC)]) != MAGIC[: min(n, len(MAGIC))]:
        return _empty(Damage(0, n, "not a rankwise stream"))
    layouts: list[Layout] = []
    parts, end, reason = split_records(buf, n, layouts)
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


def _gather(
    buf: bytearray,
    n: int,
    parts: Parts,
    layouts: list[Layout],
    keys: list[str] | None,
) -> MetricColumns:
    v = Views(buf, n)
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
    v: Views,
    layout: Layout,
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


def _int_at(v: Views, pos: np.ndarray) -> np.ndarray:
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
    v: Views,
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
    v: Views,
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
    v: Views, kstart: np.ndarray, klen: np.ndarray, good: np.ndarray
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
