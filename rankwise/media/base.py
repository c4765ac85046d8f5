"""What every rich value shares: the base class, lazy imports, and the array copy.

A rich value (``Image``, ``Table``, ``Histogram``, ``Audio``, ``Video``, ``Text``,
``Html``) is built on the training thread, where it only checks shapes and dtypes and
takes its own copy of the data (``HostArray``): the program may change its array after
``log()``. Everything costly (normalising, encoding PNG/WAV/GIF/Parquet, hashing, writing
the blob) happens later on the run's encoder thread (``rankwise.sdk.encoder``), which
calls the value's ``_encode*`` method.

numpy, Pillow and pyarrow are imported here lazily, when a value is built or encoded, so
``import rankwise`` stays light; without them a clear ``MediaError`` says to install
``rankwise[media]``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, ClassVar

from ..errors import MediaError
from ..stream import records as R

# Writes one blob of the run and returns (digest, size); given to the _encode methods.
PutBlob = Callable[[bytes], tuple[str, int]]

INSTALL_HINT = "install the media extra: pip install 'rankwise[media]'"
DEFAULT_MAX_BYTES = 256 * 2**20  # settings.max_media_bytes' default

# Process-wide state the recording run sets (rankwise.sdk.run): the per-value byte cap
# from its settings, and the callbacks that tell it a rich value was made, so its next
# log() looks for rich values (see Run._arm_rich); a log() of numbers alone never does.
_max_bytes = [DEFAULT_MAX_BYTES]
ARMS: set[Callable[[], None]] = set()
_made = [0]  # rich values made in this process so far


def made() -> int:
    """How many rich values this process has made (a run made later arms itself)."""
    return _made[0]


def max_media_bytes() -> int:
    """The most bytes one rich value may hold (``settings.max_media_bytes``)."""
    return _max_bytes[0]


def set_max_media_bytes(n: int) -> None:
    _max_bytes[0] = int(n)


def too_big(what: str, size: int, fix: str) -> MediaError:
    cap = _max_bytes[0]
    return MediaError(
        f"{what} holds {size} bytes, over the {cap}-byte cap (settings max_media_bytes): {fix}"
    )


def need(module: str, what: str) -> Any:
    """Import ``module`` (numpy, PIL.Image, pyarrow...) or raise a MediaError saying how."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MediaError(f"{what} needs {module.split('.')[0]}: {INSTALL_HINT}") from exc


def np_() -> Any:
    return need("numpy", "rankwise media")


def is_torch_tensor(data: Any) -> bool:
    """True for a torch.Tensor, without importing torch when the program did not."""
    cls = type(data)
    return cls.__module__.startswith("torch") and hasattr(data, "detach")


def dtype_kind(data: Any) -> str:
    """numpy's one-letter kind of an array's or tensor's dtype: b, u, i, f, c, or another
    (str(dtype) of a numpy array costs microseconds: this is the training thread)."""
    dt = data.dtype
    kind = getattr(dt, "kind", None)
    if kind is not None:
        return str(kind)
    if dt.is_floating_point:
        return "f"
    if dt.is_complex:
        return "c"
    name = str(dt)
    return "b" if name == "torch.bool" else "u" if name.startswith("torch.uint") else "i"


def dtype_name(data: Any) -> str:
    return str(data.dtype).replace("torch.", "")


def is_array_like(data: Any) -> bool:
    return is_torch_tensor(data) or (
        type(data).__module__ == "numpy" and hasattr(data, "shape") and hasattr(data, "dtype")
    )


class HostArray:
    """A private host copy of an array, taken on the training thread.

    numpy: a plain copy. A CPU tensor: ``detach().clone()``. A CUDA (or other device)
    tensor: a non-blocking copy into pinned host memory is started and an event recorded;
    ``get()`` (on the encoder thread) waits for that event, so the training thread never
    waits for the device. Where pinned memory cannot be had, the tensor is cloned on its
    device and brought to the host by ``get()``, still off the training thread.
    """

    __slots__ = ("_event", "_value", "nbytes", "shape")

    def __init__(self, data: Any) -> None:
        self._event: Any = None
        if is_torch_tensor(data):
            t = data.detach()
            self.shape = tuple(int(n) for n in t.shape)
            self.nbytes = int(t.numel()) * int(t.element_size())
            if t.device.type == "cpu":
                self._value = t.clone()
            else:
                self._value, self._event = _device_copy(t)
        else:
            copy = getattr(data, "copy", None)  # an ndarray: its own copy() is the cheapest
            arr = copy() if type(data).__module__ == "numpy" and copy else np_().array(data)
            self._value = arr
            self.shape = arr.shape
            self.nbytes = int(arr.nbytes)

    def get(self) -> Any:
        """The data as a numpy array (encoder thread; may wait for the device)."""
        value = self._value
        if self._event is not None:
            self._event.synchronize()
            self._event = None
        if is_torch_tensor(value):
            import torch

            if value.device.type != "cpu":
                value = value.cpu()
            if value.dtype in (torch.bfloat16, torch.float16):
                value = value.float()
            value = value.numpy()
        return value


def _device_copy(t: Any) -> tuple[Any, Any]:
    import torch

    try:
        host = torch.empty(tuple(t.shape), dtype=t.dtype, device="cpu", pin_memory=True)
        host.copy_(t, non_blocking=True)
        event = torch.cuda.Event() if t.device.type == "cuda" else None  # type: ignore[no-untyped-call]
        if event is not None:
            event.record()
        return host, event
    except Exception:  # no pinned memory here (or not CUDA): clone on the device
        return t.clone(), None


class Rich:
    """Base of the values ``run.log()`` records as more than a number.

    ``_nbytes`` is the host memory the value holds until it is encoded (the encoder's
    memory bound counts it). Subclasses implement one of ``_encode_item`` (media kinds),
    ``_encode_table`` or ``_encode_histogram``.
    """

    kind: ClassVar[str] = ""
    _nbytes: int = 0

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        _made[0] += 1
        for arm in tuple(ARMS):
            arm()
        return super().__new__(cls)


class MediaValue(Rich):
    """An image, audio clip, video, html or text panel: one ``MediaItem`` (with a blob)."""

    caption: str | None = None

    def _encode_item(self, put: PutBlob) -> R.MediaItem:
        raise NotImplementedError


def check_caption(caption: Any, what: str) -> str | None:
    if caption is None:
        return None
    text = caption if isinstance(caption, str) else str(caption)
    if len(text) > 4096:
        raise MediaError(f"{what} caption is {len(text)} characters: keep it under 4096")
    return text


def magic_kind(head: bytes) -> str | None:
    """The format a file's first bytes say it is: png, jpeg, gif, mp4, wav, or None."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "png"
    if head.startswith(b"\xff\xd8\xff"):
        return "jpeg"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "gif"
    if len(head) >= 12 and head[4:8] == b"ftyp":
        return "mp4"
    if head.startswith(b"RIFF") and head[8:12] == b"WAVE":
        return "wav"
    return None


def read_checked_file(path: Any, allowed: tuple[str, ...], what: str) -> tuple[bytes, str]:
    """The bytes of the file at ``path`` and its format, checked by its magic bytes
    (never by its name: an .svg or .html renamed .png is refused)."""
    import os

    try:
        size = os.path.getsize(path)
    except OSError as exc:
        raise MediaError(f"{what}: cannot read {str(path)!r} ({exc.strerror or exc})") from exc
    if size > max_media_bytes():
        raise too_big(f"{what}: {str(path)!r}", size, "make it smaller")
    with open(path, "rb") as f:
        data = f.read()
    kind = magic_kind(data[:16])
    if kind not in allowed:
        names = " or ".join(a.upper() for a in allowed)
        raise MediaError(
            f"{what}: {str(path)!r} is not a {names} file (by its first bytes, whatever its "
            f"name says); convert it to {allowed[0].upper()}"
        )
    assert kind is not None
    return data, kind
