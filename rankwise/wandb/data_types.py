"""W&B's media types over rankwise's: ``wandb.Image``, ``Table``, ``Histogram``, ``Audio``,
``Video``, ``Html``.

Each is a subclass of the rankwise type (so ``run.log`` records it as one) with W&B's
constructor. What rankwise does not record is accepted and warned about once: image
``masks``/``boxes``/``classes``/``grouping``, table ``dtype``/``log_mode``. A value W&B
would take and rankwise refuses raises ``rankwise.MediaError`` (a ``ValueError``)
naming the fix.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterable, Sequence
from typing import Any

from ..errors import MediaError
from ..media import av as _av
from ..media import histogram as _histogram
from ..media import image as _image
from ..media import table as _table
from ..media import text as _text
from ._term import warn_once


class Image(_image.Image):
    """``wandb.Image(data_or_path, mode=None, caption=None, ...)``: a path, PIL image,
    numpy HW/HWC (trivial leading dimensions squeezed: ``(1, 28, 28)`` works), torch CHW,
    or a matplotlib figure."""

    def __init__(
        self,
        data_or_path: Any,
        mode: str | None = None,
        caption: str | None = None,
        grouping: int | None = None,
        classes: Any = None,
        boxes: Any = None,
        masks: Any = None,
        file_type: str | None = None,
        normalize: bool = True,
    ) -> None:
        for name, value in (
            ("masks", masks), ("boxes", boxes), ("classes", classes), ("grouping", grouping)
        ):  # fmt: skip
            if value is not None:
                warn_once(
                    f"image-{name}",
                    f"wandb.Image({name}=...) is not recorded by rankwise (the image is)",
                )
        if hasattr(data_or_path, "savefig") and hasattr(data_or_path, "canvas"):
            buf = io.BytesIO()
            data_or_path.savefig(buf, format="png")
            from PIL import Image as PILImage

            data_or_path = PILImage.open(io.BytesIO(buf.getvalue()))
        super().__init__(data_or_path, caption=caption)


class Table(_table.Table):
    """``wandb.Table(columns=None, data=None, rows=None, dataframe=None, ...)``, with
    ``add_data``, ``add_column``, ``get_column``, ``columns`` and ``data``."""

    def __init__(
        self,
        columns: Sequence[Any] | None = None,
        data: Iterable[Sequence[Any]] | Any = None,
        rows: Iterable[Sequence[Any]] | None = None,
        dataframe: Any = None,
        dtype: Any = None,
        optional: Any = True,
        allow_mixed_types: bool = False,
        log_mode: str | None = "IMMUTABLE",
    ) -> None:
        if data is None and rows is not None:
            data = rows
        if data is not None and hasattr(data, "columns") and hasattr(data, "itertuples"):
            dataframe, data = data, None  # W&B takes a DataFrame as data= too
        elif data is not None and hasattr(data, "tolist"):
            data = data.tolist()  # an ndarray of rows
        if dtype is not None:
            warn_once("table-dtype", "wandb.Table(dtype=...) is not used by rankwise")
        super().__init__(columns=columns, data=data, dataframe=dataframe)

    def add_row(self, *row: Any) -> None:
        self.add_data(*row)

    def add_column(self, name: str, data: Sequence[Any], optional: bool = False) -> None:
        """Add a column ``name`` holding ``data`` (one value a row)."""
        name = str(name)
        if name in self.columns:
            raise MediaError(f"Table already has a column {name!r}: pick another name")
        values = list(data)
        if self.data and len(values) != len(self.data):
            raise MediaError(
                f"Table.add_column({name!r}) got {len(values)} values for {len(self.data)} rows"
            )
        rows = [list(r) for r in self.data] or [[] for _ in values]
        columns = [*self.columns, name]
        fresh = _table.Table(columns=columns)
        for row, value in zip(rows, values):
            fresh.add_data(*row, value)
        self.columns, self.data, self._types = fresh.columns, fresh.data, fresh._types
        self._nbytes = fresh._nbytes


class Histogram(_histogram.Histogram):
    """``wandb.Histogram(sequence=None, np_histogram=None, num_bins=64)``."""

    def __init__(self, sequence: Any = None, np_histogram: Any = None, num_bins: int = 64) -> None:
        super().__init__(sequence, np_histogram=np_histogram, num_bins=num_bins)


class Audio(_av.Audio):
    """``wandb.Audio(data_or_path, sample_rate=None, caption=None)``."""

    def __init__(
        self, data_or_path: Any, sample_rate: int | None = None, caption: str | None = None
    ) -> None:
        super().__init__(data_or_path, sample_rate=sample_rate, caption=caption)


class Video(_av.Video):
    """``wandb.Video(data_or_path, caption=None, fps=None, format=None)``."""

    def __init__(
        self,
        data_or_path: Any,
        caption: str | None = None,
        fps: float | None = None,
        format: str | None = None,
    ) -> None:
        if format not in (None, "gif"):
            warn_once("video-format", f"wandb.Video(format={format!r}): rankwise records GIF")
        super().__init__(data_or_path, fps=4 if fps is None else fps, caption=caption)


class Html(_text.Html):
    """``wandb.Html(data, inject=True, data_is_not_path=False)``: HTML text, a path to an
    .html file, or an open file."""

    def __init__(self, data: Any, inject: bool = True, data_is_not_path: bool = False) -> None:
        if hasattr(data, "read"):
            data = data.read()
        elif isinstance(data, (str, os.PathLike)) and not data_is_not_path:
            path = os.fspath(data)
            if len(path) < 4096 and "<" not in path and os.path.isfile(path):
                with open(path, encoding="utf-8") as f:
                    data = f.read()
        if isinstance(data, bytes):
            data = data.decode("utf-8")
        super().__init__(data)


__all__ = ["Audio", "Histogram", "Html", "Image", "Table", "Video"]
