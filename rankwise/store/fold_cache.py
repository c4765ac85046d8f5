"""A stream's fold as stored (``streams.fold``: MessagePack of the ``StreamFold``), and
the decoded folds kept between reads, each beside the bytes it was decoded from.

Every read of a run (the run reply, each chart's band, ``/health``, the stalls) decodes
each of its streams' folds (``streams.fold``: the state ``rankwise.stream.fold`` keeps,
MessagePack): about 20-40 µs a stream, 20-40 ms for a 1,024-rank run, and a run page's
poll reads the run several times. A running run changes every second, so the run's fold
cannot be kept (``run_cache`` keeps only ended runs'); most of its streams' folds,
though, are byte for byte what the previous read decoded.

So the store keeps the last decoded fold of each stream it read, by stream id, with the
bytes it came from, and hands it out again only when the row's bytes are equal: the
answer is what decoding them gives, whatever changed meanwhile (an upload, a migration,
a purged run whose stream id was reused). At most ``size`` streams are kept, the least
recently read dropped first (about 12 KB each for a stream of 50 metrics: 2,048 streams
are 25 MB at most). The folds handed out are shared between reads: read-only.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import msgspec

from ..stream.fold import StreamFold

DEFAULT_SIZE = 2048

_enc = msgspec.msgpack.Encoder()
_dec = msgspec.msgpack.Decoder(StreamFold)


def encode_fold(fold: StreamFold) -> bytes:
    return _enc.encode(fold)


def decode_fold(blob: bytes | memoryview | None) -> StreamFold:
    return StreamFold() if blob is None else _dec.decode(blob)


class FoldCache:
    """The last decoded fold of up to ``size`` streams. Thread-safe (the server reads
    from a thread pool)."""

    def __init__(self, size: int = DEFAULT_SIZE) -> None:
        self.size = size
        self._folds: OrderedDict[int, tuple[bytes, StreamFold]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0  # for tests and benchmarks
        self.misses = 0

    def decode(self, stream: int, blob: bytes | memoryview | None) -> StreamFold:
        """``decode_fold(blob)`` of stream row ``stream``: the kept one when its bytes
        are ``blob``'s (shared: never change it)."""
        if blob is None:
            return decode_fold(None)
        with self._lock:
            kept = self._folds.get(stream)
            if kept is not None and kept[0] == blob:
                self._folds.move_to_end(stream)
                self.hits += 1
                return kept[1]
        data = bytes(blob)
        fold = decode_fold(data)
        with self._lock:
            self.misses += 1
            self._folds[stream] = (data, fold)
            self._folds.move_to_end(stream)
            while len(self._folds) > self.size:
                self._folds.popitem(last=False)
        return fold

    def clear(self) -> None:
        with self._lock:
            self._folds.clear()
