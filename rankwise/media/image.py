"""``rankwise.Image``: an array, a PIL image, or a PNG/JPEG file, stored as a PNG blob.

Arrays (numpy, torch, or nested lists):

* Shapes: HW (grey), HWC or CHW with 1, 3 or 4 channels (grey, RGB, RGBA). Leading
  dimensions of size 1 are dropped first, as W&B does, so a ``(1, 28, 28)`` or
  ``(1, 1, 28, 28)`` batch of one works. A 3-D torch tensor is read as CHW when its first
  dimension is 1, 3 or 4 (torch's layout), else HWC; a 3-D numpy array as HWC when its
  last dimension is 1, 3 or 4, else CHW.
* Values (the rule of W&B's classic ``to_uint8``, applied on the encoder thread; the
  MNIST tutorial's ``(x - 0.1307) / 0.3081`` relies on it): bool → 0/255; when the minimum
  is below 0 the image is stretched from min..max to [0, 1]; then, when the maximum is at
  most 1, it is scaled ×255; finally clipped to 0–255 and rounded. So uint8 stays as it
  is (a 0/1 mask becomes 0/255), floats in [0, 1] are ×255, normalised or [-1, 1] data
  spans 0–255, and a constant negative image is black. A float image with NaN or ±Inf is
  not recorded (one warning).
* Caps: each side at most 65,500 pixels (PNG's practical limit) and the array at most
  ``settings.max_media_bytes`` (default 256 MiB), checked from the shape before any copy.

A file path is read at once and checked by its first bytes: PNG or JPEG only (never SVG
or HTML, which can carry script); its bytes are stored as they are.
"""

from __future__ import annotations

import io
import os
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

MAX_DIMENSION = 65_500
_INT_KINDS = ("uint", "int")
_MODES = {1: "L", 3: "RGB", 4: "RGBA"}


class Image(MediaValue):
    """An image to log: ``run.log({"sample": rankwise.Image(array, caption="a cat")})``.

    A list of images under one key is a gallery (one record, at most
    ``settings.max_gallery_items`` (108, as W&B) items; more are left out with a warning).
    Raises ``rankwise.errors.MediaError`` naming the fix when ``data`` cannot be an image.
    """

    kind = "image"

    def __init__(self, data: Any, caption: str | None = None) -> None:
        self.caption = check_caption(caption, "Image")
        self._array: HostArray | None = None
        self._chw = False
        self._pil: Any = None
        self._file: bytes | None = None
        self._format = "png"
        self.width = self.height = 0
        if type(data).__module__ == "numpy" or is_torch_tensor(data):
            self._from_array(data)  # the usual case first: isinstance(PathLike) is slow
        elif isinstance(data, Image):
            self._array, self._chw, self._pil = data._array, data._chw, data._pil
            self._file, self._format = data._file, data._format
            self.width, self.height, self._nbytes = data.width, data.height, data._nbytes
            if caption is None:
                self.caption = data.caption
        elif isinstance(data, (str, os.PathLike)):
            self._from_file(data)
        elif type(data).__module__.startswith("PIL.") and hasattr(data, "save"):
            self._from_pil(data)
        else:
            self._from_array(data)

    def __repr__(self) -> str:
        return f"<rankwise.Image {self.width}x{self.height} {self._format}>"

    # -- construction (training thread): checks and a copy -------------------------------
    def _from_file(self, path: Any) -> None:
        data, fmt = read_checked_file(path, ("png", "jpeg"), "Image")
        self._file, self._format, self._nbytes = data, fmt, len(data)
        if fmt == "png" and len(data) >= 24:
            self.width = int.from_bytes(data[16:20], "big")
            self.height = int.from_bytes(data[20:24], "big")
        else:
            pil = need("PIL.Image", "Image")
            try:
                with pil.open(io.BytesIO(data)) as im:
                    self.width, self.height = im.size
            except Exception as exc:
                raise MediaError(f"Image: {path!r} is not a readable JPEG ({exc})") from exc

    def _from_pil(self, img: Any) -> None:
        self.width, self.height = (int(n) for n in img.size)
        _check_sides(self.height, self.width)
        self._pil = img.copy()
        self._nbytes = self.width * self.height * max(1, len(img.getbands()))

    def _from_array(self, data: Any) -> None:
        if not is_array_like(data):
            if not isinstance(data, (list, tuple)):
                raise MediaError(
                    f"Image cannot take a {type(data).__name__}: give a numpy array or torch "
                    "tensor (HW, HWC or CHW), a PIL image, or the path of a PNG/JPEG file"
                )
            data = np_().asarray(data)
        shape = [int(n) for n in data.shape]
        while len(shape) > 3 and shape[0] == 1:
            shape.pop(0)
        chw = False
        torch = is_torch_tensor(data)
        if len(shape) == 3:
            first, last = shape[0], shape[-1]
            # torch's layout is CHW, numpy's (and PIL's) HWC: each is tried first.
            chw = first in _MODES and (torch or last not in _MODES)
            if not chw and last not in _MODES:
                raise MediaError(
                    f"Image of shape {tuple(data.shape)}: a 3-D image needs 1, 3 or 4 channels "
                    "first (CHW) or last (HWC); pass one image, not a batch (images[i])"
                )
        elif len(shape) != 2:
            raise MediaError(
                f"Image of shape {tuple(data.shape)}: give HW, HWC or CHW "
                "(a batch is a list of images: [rankwise.Image(x) for x in batch])"
            )
        height, width = (shape[1], shape[2]) if chw else (shape[0], shape[1])
        _check_sides(height, width)
        if dtype_kind(data) not in "buif":
            raise MediaError(
                f"Image of dtype {dtype_name(data)}: give uint8 (0-255), float (0-1), or bool "
                "pixels"
            )
        size = int(data.nbytes)
        if size > max_media_bytes():
            raise too_big(f"Image of shape {tuple(data.shape)}", size, "downscale it")
        self.height, self.width, self._chw = height, width, chw
        self._array = HostArray(data if len(shape) == len(data.shape) else data.reshape(shape))
        self._nbytes = self._array.nbytes

    # -- encoding (encoder thread) --------------------------------------------------------
    def _encode_item(self, put: PutBlob) -> R.MediaItem:
        if self._file is not None:
            data, fmt = self._file, self._format
        else:
            data, fmt = self.png(), "png"
        digest, size = put(data)
        return R.MediaItem(
            kind="image", digest=digest, size=size, format=fmt, caption=self.caption,
            width=self.width, height=self.height,
        )  # fmt: skip

    def png(self) -> bytes:
        """The image as PNG bytes (the bytes of a PNG file given by path)."""
        if self._file is not None and self._format == "png":
            return self._file
        pil = need("PIL.Image", "Image")
        img = self._pil
        if img is None and self._file is not None:
            img = pil.open(io.BytesIO(self._file))
        if img is None:
            assert self._array is not None
            arr = to_uint8(self._array.get(), self._chw)
            img = pil.fromarray(arr, _MODES[arr.shape[2]] if arr.ndim == 3 else "L")
        if img.mode not in ("1", "L", "LA", "RGB", "RGBA", "P", "I;16"):
            img = img.convert("RGBA" if "A" in img.getbands() else "RGB")
        out = io.BytesIO()
        img.save(out, "PNG", compress_level=3)
        return out.getvalue()


def _check_sides(height: int, width: int) -> None:
    if not (1 <= height <= MAX_DIMENSION and 1 <= width <= MAX_DIMENSION):
        raise MediaError(
            f"Image of {width}x{height} pixels: each side must be 1 to {MAX_DIMENSION} "
            "pixels; resize it"
        )


def to_uint8(arr: Any, chw: bool) -> Any:
    """W&B's classic normalisation (see the module docstring) to an HW or HWC uint8 array."""
    np = np_()
    if chw:
        arr = np.transpose(arr, (1, 2, 0))
    if arr.ndim == 3 and arr.shape[2] == 1:
        arr = arr[:, :, 0]
    kind = arr.dtype.kind
    if kind == "b":
        return arr.astype(np.uint8) * np.uint8(255)
    if kind == "f" and not np.isfinite(arr).all():
        raise MediaError(
            "Image has NaN or Inf pixels: replace them first (np.nan_to_num(x)) or log a clean copy"
        )
    if arr.size == 0:
        return np.zeros(arr.shape, np.uint8)
    if arr.dtype == np.uint8 and int(arr.max()) > 1:
        return np.ascontiguousarray(arr)  # the usual case: nothing to do
    lo, hi = float(arr.min()), float(arr.max())
    data = arr.astype(np.float64)
    if lo < 0.0:
        # Normalised data (x - mean) / std, or [-1, 1]: stretched min..max to [0, 1].
        span = hi - lo
        data = (data - lo) / span if span > 0 else np.zeros_like(data)
        hi = 1.0 if span > 0 else 0.0
    if hi <= 1.0:
        data = data * 255.0
    return np.clip(np.rint(data), 0, 255).astype(np.uint8)
