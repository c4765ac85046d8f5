"""``rankwise.Text`` and ``rankwise.Html``: text panels, each stored as a blob.

HTML is stored as it is given and is only ever shown sandboxed (the server serves it
with ``Content-Security-Policy: sandbox`` and, unless asked inline, as an attachment; the
dashboard puts it in a sandboxed iframe). rankwise never inlines it into a page.
"""

from __future__ import annotations

from typing import Any

from ..errors import MediaError
from ..stream import records as R
from .base import MediaValue, PutBlob, check_caption

MAX_TEXT_BYTES = 16 * 2**20


class _TextLike(MediaValue):
    _format = "txt"

    def __init__(self, data: Any, caption: str | None = None) -> None:
        name = type(self).__name__
        if not isinstance(data, str):
            raise MediaError(f"{name} takes a str, not {type(data).__name__}: pass str(x)")
        self._data = data.encode("utf-8", "surrogatepass")
        if len(self._data) > MAX_TEXT_BYTES:
            raise MediaError(
                f"{name} of {len(self._data)} bytes is over the {MAX_TEXT_BYTES}-byte cap: "
                "log a file as an artifact instead, or shorten it"
            )
        self.caption = check_caption(caption, name)
        self._nbytes = len(self._data)

    def __repr__(self) -> str:
        return f"<rankwise.{type(self).__name__} {len(self._data)} bytes>"

    def _encode_item(self, put: PutBlob) -> R.MediaItem:
        digest, size = put(self._data)
        return R.MediaItem(
            kind=self.kind, digest=digest, size=size, format=self._format, caption=self.caption
        )


class Text(_TextLike):
    """A text panel: ``run.log({"sample": rankwise.Text(generated)})`` (UTF-8)."""

    kind = "text"
    _format = "txt"


class Html(_TextLike):
    """An HTML panel, shown only in a sandbox (never in the dashboard's own origin)."""

    kind = "html"
    _format = "html"
