"""The encoder thread: turns logged rich values into blob files and records.

One per recording run, made on the first rich value and attached through
``Run.handle()`` as a component (stopped, and drained within the finish deadline, before
the run's Finish record is written). Invariants:

* The training thread only calls ``submit`` (a deque append after ``reserve`` admitted the
  value's bytes); the thread looks at the queue every ``flush_interval``, like the writer,
  and at once when ``reserve`` waits or the run ends. Encoding (PNG, WAV, GIF, Parquet),
  hashing (sha256) and writing the blob all happen on this thread.
* A blob is written whole (temp + fsync + ``os.replace``, ``rankwise.stream.blobs``)
  BEFORE the record naming it is handed to the stream writer (``put_control``), so a
  crash at any moment never leaves a record naming a missing blob.
* Memory is bounded in bytes: ``put_bytes`` (training thread) and ``done_bytes`` (this
  thread) count the bytes of the copies queued and of those encoded (the queue's
  reference is then dropped: the copy is freed unless the program still holds the
  value); each counter has one writer, so no increment is lost to a race. ``reserve``
  waits while more than ``max_media_queue_bytes`` would be pending, and refuses (the
  value is dropped and counted) only when this thread made no progress for
  ``writer_stall_timeout`` — the same rules as ``log()``'s own backpressure.
* Nothing here raises into training: a value that cannot be encoded (NaN pixels, a cell
  of an unknown type put into ``table.data`` by hand, a full disk) is skipped with one
  warning per key, and the rest of the call, and of the run, is kept.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .. import _log
from ..errors import MediaError
from ..media.base import MediaValue, Rich
from ..media.histogram import Histogram
from ..media.table import Table
from ..names import KEY_RULE, is_key
from ..stream import records as R
from ..stream.blobs import write_blob

if TYPE_CHECKING:
    from .handle import RunHandle

# (log time, step, key, value or list of values, reserved bytes)
Item = tuple[float, int, str, Any, int]


def rich_value(value: Any) -> bool:
    """True for what the encoder takes: a rich value, or a non-empty list of media."""
    if isinstance(value, Rich):
        return True
    cls = value.__class__
    return (cls is list or cls is tuple) and bool(value) and isinstance(value[0], MediaValue)


def split_rich(data: Mapping[Any, Any], prefix: str = "") -> tuple[dict[Any, Any], list[Any]]:
    """``data`` without its rich values, and those as ``[(key, value)]``; a nested
    mapping's are found too, under the ``/``-joined key ``coerce`` would give them (the
    mapping is copied, never changed). A Table is frozen as logged (``Table._frozen``)."""
    rest: dict[Any, Any] = {}
    found: list[Any] = []
    for key, value in data.items():
        if rich_value(value) and isinstance(key, str):
            found.append((prefix + key, value._frozen() if isinstance(value, Table) else value))
        elif isinstance(value, Mapping) and isinstance(key, str):
            sub_rest, sub_found = split_rich(value, prefix + key + "/")
            if sub_found:
                found += sub_found
                if sub_rest:
                    rest[key] = sub_rest
            else:
                rest[key] = value
        else:
            rest[key] = value
    return rest, found


def nbytes_of(value: Any) -> int:
    if isinstance(value, Rich):
        return int(value._nbytes)
    return sum(int(getattr(v, "_nbytes", 0)) for v in value)


class MediaEncoder:
    """See the module docstring. ``handle`` is the run's ``RunHandle``."""

    def __init__(self, handle: RunHandle) -> None:
        self._handle = handle
        settings = handle.settings
        self._max_bytes = int(settings.max_media_bytes)
        self._max_queue = int(settings.max_media_queue_bytes)
        self._max_gallery = int(settings.max_gallery_items)
        self._stall_timeout = float(settings.writer_stall_timeout)
        self._interval = float(settings.flush_interval)
        self.queue: deque[Item] = deque()
        self.put_bytes = 0  # training thread only
        self.done_bytes = 0  # encoder thread only
        self.done_items = 0  # encoder thread only
        self.progress = threading.Event()
        self._stalled_at = -1
        self._wake = threading.Event()
        self._stop = threading.Event()
        self.warn_once = _log.Once()  # warn_once(key, message)
        self._keys: set[str] = set()  # keys found valid (names.is_key), checked once
        self._thread = threading.Thread(target=self._run, name="rankwise-media", daemon=True)
        self._thread.start()

    # -- training thread --------------------------------------------------------------
    def reserve(self, nbytes: int) -> bool:
        """Admit ``nbytes`` of copies to the queue, waiting while it is over its bound;
        False: the encoder is stalled (or stopped), drop the value."""
        if self._stop.is_set() or not self._thread.is_alive():
            return False
        limit = max(0, self._max_queue - nbytes)  # a value over the bound waits for 0
        if self.put_bytes - self.done_bytes > limit:
            if self._stalled_at >= 0 and self.done_items == self._stalled_at:
                return False
            self._stalled_at = -1
            while self.put_bytes - self.done_bytes > limit:
                seen = self.done_items
                self.progress.clear()
                self._wake.set()
                if self.put_bytes - self.done_bytes <= limit:
                    break
                if not self.progress.wait(self._stall_timeout) and self.done_items == seen:
                    self._stalled_at = seen
                    return False
                if not self._thread.is_alive():
                    return False
        self.put_bytes += nbytes
        return True

    def submit(self, t: float, step: int, key: str, value: Any, nbytes: int) -> None:
        """Queue a value ``reserve`` admitted (``nbytes`` of it), logged at ``step``."""
        self.queue.append((t, step, key, value, nbytes))
        # No wake-up here (an Event.set() is a syscall, ~10 us): the thread looks every
        # flush_interval, as the writer does, and at once when reserve() must wait.

    def log(self, t: float, step: int, key: str, value: Any) -> bool:
        """``reserve`` + ``submit``; False when the value was dropped (the caller counts
        it). A key that breaks ``rankwise.names``' rule is skipped with a warning."""
        if key not in self._keys and not self._new_key(key):
            return True
        nbytes = nbytes_of(value)
        if not self.reserve(nbytes):
            self.warn_once(
                "stalled",
                f"the media encoder made no progress for {self._stall_timeout:g}s with "
                f"{self._max_queue / 2**20:g} MiB waiting (a hung or failing disk?): "
                f"dropping rich values instead of hanging training. Check the filesystem "
                f"of {self._handle.dir}, or raise settings writer_stall_timeout.",
            )
            return False
        self.submit(t, step, key, value, nbytes)
        return True

    def _new_key(self, key: str) -> bool:
        if is_key(key):
            if len(self._keys) < 10_000:
                self._keys.add(key)
            return True
        self.warn_once(
            f"name:{key!r}",
            f"log() key {key[:80]!r} cannot be stored, skipped (shown once per key): {KEY_RULE}.",
        )
        return False

    def pending_bytes(self) -> int:
        return self.put_bytes - self.done_bytes

    # -- lifecycle ----------------------------------------------------------------------
    def stop(self, deadline: float) -> None:
        """Encode what is queued (by ``deadline``), then stop; called before Finish."""
        self._stop.set()
        self._wake.set()
        self._thread.join(max(0.0, deadline - time.monotonic()))
        if self._thread.is_alive() or self.queue:
            _log.warn(
                f"{len(self.queue) + 1} rich value(s) of {self._handle.who} were not encoded "
                "before finish_timeout: they are not recorded"
            )

    # -- encoder thread -----------------------------------------------------------------
    def _run(self) -> None:
        try:
            while True:
                self._wake.wait(self._interval)
                self._wake.clear()
                while self.queue:
                    item = self.queue.popleft()
                    try:
                        self._encode(item)
                    finally:
                        self.done_bytes += item[4]
                        self.done_items += 1
                        self.progress.set()
                if self._stop.is_set() and not self.queue:
                    return
        except Exception as exc:  # never let the thread die silently
            _log.warn(f"media encoder stopped: {exc!r}; rich values logged after this are lost")

    def _put(self, data: bytes) -> tuple[str, int]:
        if len(data) > self._max_bytes:
            raise MediaError(
                f"its encoded file is {len(data)} bytes, over the {self._max_bytes}-byte cap "
                "(settings max_media_bytes): log something smaller"
            )
        return write_blob(self._handle.dir, data)

    def _encode(self, item: Item) -> None:
        t, step, key, value, nbytes = item
        try:
            if nbytes > self._max_bytes:
                raise MediaError(
                    f"it holds {nbytes} bytes, over the {self._max_bytes}-byte cap "
                    "(settings max_media_bytes): log something smaller"
                )
            record = self._record(t, step, key, value)
        except MediaError as exc:
            self.warn_once(
                f"bad:{key}", f"log() value for key {key!r} at step {step} skipped: {exc}"
            )
            return
        except OSError as exc:
            self.warn_once(
                "oserror",
                f"cannot write media blobs under {self._handle.dir} ({exc}): rich values are "
                "skipped while it fails",
            )
            return
        except Exception as exc:
            self.warn_once(
                f"error:{key}:{type(exc).__name__}",
                f"log() value for key {key!r} at step {step} could not be encoded ({exc!r}): "
                "skipped",
            )
            return
        self._handle.put_control(lambda seq, _t: _with_seq(record, seq))

    def _record(self, t: float, step: int, key: str, value: Any) -> R.Record:
        if isinstance(value, MediaValue):
            return R.Media(0, t, step, key, [value._encode_item(self._put)])
        if isinstance(value, Table):
            digest, size, nrows, ncols, columns, types, blobs = value._encode_table(self._put)
            return R.TableRec(0, t, step, key, digest, size, nrows, ncols, columns, types, blobs)
        if isinstance(value, Histogram):
            counts, edges, nan, posinf, neginf = value._encode_histogram()
            return R.HistogramRec(0, t, step, key, counts, edges, nan, posinf, neginf)
        values = list(value)
        if not all(isinstance(v, MediaValue) for v in values):
            raise MediaError(
                "a list under one key is a gallery of Image/Audio/Video/Text/Html values; "
                "log each Table or Histogram under its own key"
            )
        if len(values) > self._max_gallery:
            self.warn_once(
                f"gallery:{key}",
                f"log() key {key!r}: a gallery of {len(values)} items keeps the first "
                f"{self._max_gallery} (settings max_gallery_items; shown once per key)",
            )
            values = values[: self._max_gallery]
        items = []
        for v in values:
            try:
                items.append(v._encode_item(self._put))
            except MediaError as exc:
                self.warn_once(
                    f"bad:{key}", f"log() key {key!r} at step {step}: a gallery item skipped: {exc}"
                )
        if not items:
            raise MediaError("no item of the gallery could be encoded")
        return R.Media(0, t, step, key, items)


def _with_seq(record: R.Record, seq: int) -> R.Record:
    record.seq = seq
    return record
