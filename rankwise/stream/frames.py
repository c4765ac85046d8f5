"""The frame codec: how records sit in a stream file and in an upload body.

Grammar (all integers little-endian)::

    stream  := MAGIC frame*
    MAGIC   := b"RWLOG1\\r\\n"                      (8 bytes, once, at offset 0)
    frame   := length:u32 crc:u32 payload
    payload := msgpack [schema_version:int, [record, ...]]   (``length`` bytes)
    crc     := zlib.crc32(payload)

Invariants:

* A stream file has exactly one writer (one process), which only ever appends whole
  frames; a crash can leave at most one torn frame, at the tail.
* A reader takes every frame whose length fits and whose crc matches, in order, and
  stops at the first one that does not. What follows is reported as damage
  (offset and byte count), never guessed at. Every complete frame before a tear is
  therefore recovered, and a partially written frame is never half-applied.
* An upload body is the same bytes: ``MAGIC`` followed by whole frames cut from a file.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

import msgspec

from .records import AnyRecord, decode_payload, encode_payload

MAGIC = b"RWLOG1\r\n"
HEADER = struct.Struct("<II")
MAX_FRAME = 64 * 1024 * 1024  # a length above this is damage, not an allocation


def encode_frame(records: list[AnyRecord]) -> bytes:
    """One frame holding ``records``."""
    payload = encode_payload(records)
    return HEADER.pack(len(payload), zlib.crc32(payload)) + payload


@dataclass(frozen=True)
class Damage:
    """Bytes at the end of a buffer that do not form a complete, valid frame.

    ``torn``: the bytes are the start of a frame cut short by the end of the buffer (a
    write in progress, or the last frame of a crashed writer): a later read of a growing
    file may complete it. Otherwise they are corrupt (a bad checksum, an impossible
    length, a frame that does not decode, not a stream at all) and stay so.
    """

    offset: int
    length: int
    reason: str
    torn: bool = False

    def __str__(self) -> str:
        return f"{self.length} bytes at offset {self.offset} unreadable ({self.reason})"


@dataclass
class FrameScan:
    """The frames found in a buffer: their records, where each frame ends, and damage."""

    records: list[AnyRecord]
    end: int  # offset just past the last good frame
    frame_ends: list[int]
    damage: Damage | None


def iter_frames(buf: bytes | memoryview, start: int = 0) -> Iterator[tuple[int, int]]:
    """Yield ``(payload_start, payload_end)`` of each frame with a valid length and crc.

    Stops silently at the first invalid or incomplete frame; ``scan`` reports why.
    """
    view = memoryview(buf)
    pos, n = start, len(view)
    while pos + HEADER.size <= n:
        length, crc = HEADER.unpack_from(view, pos)
        body = pos + HEADER.size
        if length > MAX_FRAME or body + length > n:
            return
        if zlib.crc32(view[body : body + length]) != crc:
            return
        yield body, body + length
        pos = body + length


def scan(buf: bytes | memoryview, start: int | None = None) -> FrameScan:
    """Decode every complete frame of ``buf`` (a whole stream, or frames from ``start``).

    When ``start`` is None the buffer must begin with ``MAGIC`` (a stream file or an
    upload body); an empty buffer is an empty stream.
    """
    view = memoryview(buf)
    if start is None:
        if len(view) < len(MAGIC):
            if bytes(view) != MAGIC[: len(view)]:
                return FrameScan([], 0, [], Damage(0, len(view), "not a rankwise stream"))
            return FrameScan([], 0, [], None)
        if bytes(view[: len(MAGIC)]) != MAGIC:
            return FrameScan([], 0, [], Damage(0, len(view), "not a rankwise stream"))
        start = len(MAGIC)
    records: list[AnyRecord] = []
    ends: list[int] = []
    end = start
    reason = ""
    for body, stop in iter_frames(view, start):
        try:
            records.extend(decode_payload(view[body:stop]))
        except (msgspec.DecodeError, ValueError) as exc:
            reason = f"frame with a valid checksum failed to decode: {exc}"
            break
        end = stop
        ends.append(stop)
    damage = None
    if end < len(view):
        damage = Damage(end, len(view) - end, reason) if reason else damage_at(view, end)
    return FrameScan(records, end, ends, damage)


def damage_at(buf: bytes | memoryview, pos: int) -> Damage:
    """Why the bytes of ``buf`` from ``pos`` (where ``iter_frames`` stopped) are no frame."""
    view = memoryview(buf)
    n = len(view)
    length = n - pos
    if pos + HEADER.size > n:
        return Damage(pos, length, "torn frame header at the tail", torn=True)
    size, _crc = HEADER.unpack_from(view, pos)
    if size > MAX_FRAME:
        return Damage(pos, length, f"frame length {size} is implausible")
    if pos + HEADER.size + size > n:
        return Damage(pos, length, "torn frame at the tail", torn=True)
    return Damage(pos, length, "checksum mismatch")
