"""The HTTP replies of a run's rich data (media, tables, histograms): declared once, here.

The store returns these structs, the server encodes them as they are (JSON or
MessagePack), ``Api(server=)`` decodes them as they are, and the OpenAPI document's
schemas are derived from them (``rankwise.server.openapi.STRUCTS``). Routes and shapes:
``docs/http-api.md``, "Media, tables and histograms".

The blob routes' replies are here too: the bytes of a media item are a blob.

A label is a stream label (``rank-3``, ``primary``): in a shared run every rank's items
are its own, and a reply says whose each is.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ..stream import records as R

KINDS = ("image", "audio", "video", "html", "text", "table", "histogram")


class MediaKey(msgspec.Struct, kw_only=True):
    """A key that holds rich values: its kind, the steps logged and the stream labels."""

    key: str
    kind: str  # one of KINDS; a key logged with several kinds reports the first seen
    steps: list[int]
    labels: list[str]


class MediaKeysReply(msgspec.Struct, kw_only=True):
    """Every key of a run holding rich values (``MediaKey``: the local reader's
    ``RunInfo.media_keys()`` items, the same struct)."""

    keys: list[MediaKey]  # by key, then kind


# The record's ``MediaItem`` fields (kind, digest, size, format, caption and the
# kind-specific ones, with its omit_defaults) are inherited, so they are declared once.
class MediaRow(R.MediaItem, kw_only=True):
    """One item of a logged media value (a gallery has several, ``index`` 0, 1, ...).

    The bytes are the blob ``GET /api/v1/blobs/{project}/{digest}``; the server serves it
    with the content type of ``kind``/``format``. Kind-specific fields are absent when
    the item has none.
    """

    step: int
    label: str
    index: int
    time: float | None = None  # when the value was logged (Unix seconds)


class MediaReply(msgspec.Struct, kw_only=True):
    key: str
    items: list[MediaRow]  # by step, label, then index
    steps: list[int]  # every step the key was logged at (whatever ``step`` asked for)


class HistogramsEntry(msgspec.Struct, kw_only=True):
    """One label's histograms of one key over steps (in step order, then seq order).

    ``edges[i]`` has one more value than ``counts[i]``; bins may differ between steps.
    ``nan``/``posinf``/``neginf`` count the values left out of each histogram.
    """

    label: str
    steps: list[int]
    edges: list[list[float]]
    counts: list[list[float]]
    nan: list[int]
    posinf: list[int]
    neginf: list[int]


class HistogramsReply(msgspec.Struct, kw_only=True):
    key: str
    series: list[HistogramsEntry]  # by label


class TableReply(msgspec.Struct, kw_only=True):
    """One page of one logged table (one key, label and step).

    ``rows`` are lists in ``columns`` order; an image cell is the image blob's digest
    (the dashboard builds the blob's URL). ``total`` counts the rows that pass the
    filter (``nrows`` all of them); ``steps`` and ``labels`` are where the key was
    logged, for a step slider and a rank picker.
    """

    key: str
    label: str
    step: int
    digest: str  # the Parquet blob: download it to open the table elsewhere
    columns: list[str]
    types: list[str]  # per column: str | int | float | bool | image | list | null
    rows: list[list[Any]]
    offset: int
    total: int
    nrows: int
    steps: list[int]
    labels: list[str]


class BlobsMissing(msgspec.Struct, kw_only=True):
    missing: list[str]  # the digests asked about that the server does not hold
    # the largest blob a PUT may store: a client skips (declares lost) a bigger file
    # instead of sending bytes that would be cut off with 413
    max_blob_bytes: int


class BlobsLost(msgspec.Struct, kw_only=True):
    lost: list[str]  # the digests now declared lost (those the server did not hold)


class BlobPut(msgspec.Struct, kw_only=True):
    digest: str
    size: int  # bytes received
    stored: bool  # False: the server held this blob already (HTTP 200 instead of 201)
