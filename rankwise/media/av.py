"""``rankwise.Audio`` (WAV) and ``rankwise.Video`` (animated GIF, or an MP4/GIF file).

Audio: a float array in [-1, 1] (clipped) or an integer array, mono ``(n,)`` or
``(n, channels)`` / ``(channels, n)`` with 1 or 2 channels, stored as 16-bit PCM WAV
(stdlib ``wave``: no soundfile); or the path of a WAV file.

Video: a uint8 ``(T, H, W, C)`` or ``(T, C, H, W)`` array (C = 1, 3 or 4; a leading batch
of one is dropped) encoded as an animated GIF by Pillow at ``fps`` (no ffmpeg); or the
path of an MP4 or GIF file, checked by its first bytes and stored as it is.
"""

from __future__ import annotations

import io
import os
import wave
from typing import Any

from ..errors import MediaError
from ..stream import records as R
from .base import (
    HostArray,
    MediaValue,
    PutBlob,
    check_caption,
    dtype_kind,
    dtype_name,
    is_array_like,
    is_torch_tensor,
    max_media_bytes,
    need,
    np_,
    read_checked_file,
    too_big,
)
from .image import MAX_DIMENSION

MAX_FRAMES = 10_000


class Audio(MediaValue):
    """Audio to log: ``rankwise.Audio(samples, sample_rate=16000)``."""

    kind = "audio"

    def __init__(
        self, data: Any, sample_rate: int | None = None, caption: str | None = None
    ) -> None:
        self.caption = check_caption(caption, "Audio")
        self._file: bytes | None = None
        self._array: HostArray | None = None
        self._transpose = False
        if isinstance(data, (str, os.PathLike)):
            self._file, _ = read_checked_file(data, ("wav",), "Audio")
            self._nbytes = len(self._file)
            try:
                with wave.open(io.BytesIO(self._file)) as w:
                    self.sample_rate = w.getframerate()
                    self.channels = w.getnchannels()
                    self.duration = w.getnframes() / max(1, self.sample_rate)
            except (wave.Error, EOFError) as exc:
                raise MediaError(f"Audio: {data!r} is not a readable WAV file ({exc})") from None
            return
        if (
            isinstance(sample_rate, bool)
            or not isinstance(sample_rate, int)
            or not (1 <= sample_rate <= 1_000_000)
        ):
            raise MediaError(
                f"Audio sample_rate={sample_rate!r}: give the samples per second as an int "
                "(e.g. sample_rate=16000)"
            )
        self.sample_rate = sample_rate
        if not is_array_like(data):
            if not isinstance(data, (list, tuple)):
                raise MediaError(
                    f"Audio cannot take a {type(data).__name__}: give a numpy array or torch "
                    "tensor of samples, or the path of a WAV file"
                )
            data = np_().asarray(data)
        shape = tuple(int(n) for n in data.shape)
        if len(shape) == 2 and shape[0] in (1, 2) and shape[1] > 2:
            self._transpose = True
            shape = (shape[1], shape[0])
        if not (len(shape) == 1 or (len(shape) == 2 and shape[1] in (1, 2))) or shape[0] < 1:
            raise MediaError(
                f"Audio of shape {tuple(data.shape)}: give (samples,) or (samples, 1 or 2 channels)"
            )
        if dtype_kind(data) not in "uif":
            raise MediaError(
                f"Audio of dtype {dtype_name(data)}: give float samples in [-1, 1] or int16"
            )
        self.channels = 1 if len(shape) == 1 else shape[1]
        self.duration = shape[0] / sample_rate
        size = _nbytes(data)
        if size > max_media_bytes():
            raise too_big(f"Audio of shape {tuple(data.shape)}", size, "log a shorter clip")
        self._array = HostArray(data)
        self._nbytes = self._array.nbytes

    def __repr__(self) -> str:
        return f"<rankwise.Audio {self.duration:.2f}s {self.sample_rate} Hz>"

    def wav(self) -> bytes:
        if self._file is not None:
            return self._file
        np = np_()
        assert self._array is not None
        arr = np.asarray(self._array.get())
        if self._transpose:
            arr = arr.T
        if arr.dtype.kind == "f":
            if not np.isfinite(arr).all():
                raise MediaError("Audio has NaN or Inf samples: replace them (np.nan_to_num)")
            pcm = (np.clip(arr, -1.0, 1.0) * 32767.0).astype("<i2")
        elif arr.dtype.itemsize == 1:  # int8/uint8: scale to 16 bits
            shift = 128 if arr.dtype.kind == "u" else 0
            pcm = ((arr.astype(np.int32) - shift) * 256).astype("<i2")
        else:
            pcm = np.clip(arr, -32768, 32767).astype("<i2")
        out = io.BytesIO()
        with wave.open(out, "wb") as w:
            w.setnchannels(self.channels)
            w.setsampwidth(2)
            w.setframerate(self.sample_rate)
            w.writeframes(np.ascontiguousarray(pcm).tobytes())
        return out.getvalue()

    def _encode_item(self, put: PutBlob) -> R.MediaItem:
        digest, size = put(self.wav())
        return R.MediaItem(
            kind="audio", digest=digest, size=size, format="wav", caption=self.caption,
            sample_rate=self.sample_rate, duration=self.duration, channels=self.channels,
        )  # fmt: skip


class Video(MediaValue):
    """A video to log: ``rankwise.Video(frames, fps=4)`` (frames uint8 T×H×W×C or
    T×C×H×W), or ``rankwise.Video("clip.mp4")``."""

    kind = "video"

    def __init__(self, data: Any, fps: float = 4, caption: str | None = None) -> None:
        self.caption = check_caption(caption, "Video")
        if isinstance(fps, bool) or not isinstance(fps, (int, float)) or not (0 < fps <= 1000):
            raise MediaError(f"Video fps={fps!r}: give frames per second, 0 < fps <= 1000")
        self.fps = float(fps)
        self._file: bytes | None = None
        self._format = "gif"
        self._array: HostArray | None = None
        self._tchw = False
        if isinstance(data, (str, os.PathLike)):
            self._file, self._format = read_checked_file(data, ("mp4", "gif"), "Video")
            self._nbytes = len(self._file)
            self.frames = self.width = self.height = None
            return
        if not is_array_like(data):
            raise MediaError(
                f"Video cannot take a {type(data).__name__}: give a uint8 array (T, H, W, C) "
                "or (T, C, H, W), or the path of an MP4 or GIF file"
            )
        shape = [int(n) for n in data.shape]
        while len(shape) > 4 and shape[0] == 1:
            shape.pop(0)
        if len(shape) != 4:
            raise MediaError(
                f"Video of shape {tuple(data.shape)}: give frames as (T, H, W, C) or (T, C, H, W)"
            )
        torch = is_torch_tensor(data)
        if (torch or shape[3] not in (1, 3, 4)) and shape[1] in (1, 3, 4):
            self._tchw = True
            t, c, h, w = shape
        elif shape[3] in (1, 3, 4):
            t, h, w, c = shape
        else:
            raise MediaError(f"Video of shape {tuple(data.shape)}: frames need 1, 3 or 4 channels")
        if dtype_name(data) != "uint8":
            raise MediaError(
                f"Video of dtype {dtype_name(data)}: give uint8 frames "
                "(x.clip(0, 1) * 255).astype(uint8)"
            )
        if not (1 <= t <= MAX_FRAMES and 1 <= h <= MAX_DIMENSION and 1 <= w <= MAX_DIMENSION):
            raise MediaError(
                f"Video of {t} frames of {w}x{h}: give 1 to {MAX_FRAMES} frames of at most "
                f"{MAX_DIMENSION} pixels a side"
            )
        if t * c * h * w > max_media_bytes():
            raise too_big(f"Video of shape {tuple(data.shape)}", t * c * h * w, "fewer frames")
        self.frames, self.height, self.width = t, h, w
        self._array = HostArray(data if len(shape) == len(data.shape) else data.reshape(shape))
        self._nbytes = self._array.nbytes

    def __repr__(self) -> str:
        return f"<rankwise.Video {self._format} {self.frames} frames>"

    def gif(self) -> bytes:
        """The video as an animated GIF (or the bytes of the file given)."""
        if self._file is not None:
            return self._file
        np = np_()
        pil = need("PIL.Image", "Video")
        assert self._array is not None
        arr = np.asarray(self._array.get())
        if self._tchw:
            arr = np.transpose(arr, (0, 2, 3, 1))
        if arr.shape[3] == 1:
            arr = arr[:, :, :, 0]
        mode = {3: "L", 4: "RGB" if arr.ndim == 4 and arr.shape[3] == 3 else "RGBA"}
        frames = [pil.fromarray(np.ascontiguousarray(f), mode[arr.ndim]) for f in arr]
        out = io.BytesIO()
        frames[0].save(
            out, "GIF", save_all=True, append_images=frames[1:],
            duration=max(1, round(1000 / self.fps)), loop=0,
        )  # fmt: skip
        return out.getvalue()

    def _encode_item(self, put: PutBlob) -> R.MediaItem:
        digest, size = put(self.gif())
        duration = self.frames / self.fps if self.frames else None
        return R.MediaItem(
            kind="video", digest=digest, size=size, format=self._format, caption=self.caption,
            width=self.width, height=self.height, frames=self.frames, fps=self.fps,
            duration=duration,
        )  # fmt: skip


def _nbytes(data: Any) -> int:
    return int(data.nbytes)
