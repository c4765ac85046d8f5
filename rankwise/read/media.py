"""Rich data as read back: ``RunInfo.media()``, ``table()``, ``histograms()``, ``media_keys()``.

The same objects from ``Api(dir=)`` and ``Api(server=)``:

* ``MediaFile``: one item of a ``Media`` record (one image of a gallery, an audio clip...)
  with its ``step``, stream ``label``, ``key``, ``index`` in the gallery and the
  ``MediaItem`` fields; ``.read()`` gives its bytes everywhere, ``.path`` is the blob file
  from ``Api(dir=)`` ("" from a server).
* ``RunInfo.table(key, step=None, label=None)``: a ``rankwise.Table`` (``columns``,
  ``data``, ``types``, ``get_dataframe()``; ``step`` and ``label`` set), image cells as
  ``rankwise.Image`` read from their blobs. ``step=None``: the latest step. ``label=None``:
  the primary stream's table when it logged the key, else the lowest label's.
* ``RunInfo.histograms(key, label=None)``: ``HistogramSeries`` (numpy arrays ``steps``
  (n,), ``edges`` (n, bins+1), ``counts`` (n, bins), ``nan``/``posinf``/``neginf`` (n,)),
  ordered by step; for a ``label``, that stream's series; for ``label=None`` a dict
  ``{label: HistogramSeries}`` of every stream that logged the key. Histograms of one key
  with different bin counts are padded with NaN to the widest.

``local_*`` below read them from a run's stream files (the local reader's side); a
server reader builds the same structs from its replies (see ``RunSource``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import KeyNotLoggedError, UsageError
from ..stream import records as R
from ..stream.blobs import blob_path
from ..wire.media import MediaKey

if TYPE_CHECKING:
    from ..media.table import Table


# The record's ``MediaItem`` fields (and its omit_defaults) are inherited, so they are
# declared once; a MediaFile adds where the item was logged and its blob file.
class MediaFile(R.MediaItem, kw_only=True, dict=True):
    """One logged media item as read back (see the module docstring)."""

    step: int
    label: str
    key: str
    index: int  # its place in its gallery (0 for a single item)
    time: float | None = None
    path: str = ""  # the blob file, from Api(dir=); "" from a server

    def attach(self, fetch: Callable[[str], bytes]) -> MediaFile:
        """How ``read()`` gets the bytes when there is no local path (a server reader)."""
        self._fetch = fetch
        return self

    def read(self) -> bytes:
        """The item's bytes (a PNG, WAV, GIF... as ``format`` says)."""
        if self.path:
            return Path(self.path).read_bytes()
        fetch: Callable[[str], bytes] | None = getattr(self, "_fetch", None)
        if fetch is None:
            raise UsageError("this MediaFile was not read by rankwise.Api: it has no source")
        return fetch(self.digest)

    def __repr__(self) -> str:
        return f"<rankwise MediaFile {self.key}@{self.step} {self.label} {self.kind}/{self.format}>"


@dataclass
class HistogramSeries:
    """One stream's histograms of one key over steps (numpy arrays; see the module)."""

    key: str
    label: str
    steps: Any  # (n,) int64
    edges: Any  # (n, bins + 1) float64
    counts: Any  # (n, bins) float64
    nan: Any  # (n,) int64: values left out as NaN
    posinf: Any
    neginf: Any

    def __len__(self) -> int:
        return len(self.steps)


def histogram_series(key: str, label: str, recs: list[R.HistogramRec]) -> HistogramSeries:
    """The series of one stream's ``HistogramRec``s (any order; sorted by step here)."""
    import numpy as np

    recs = sorted(recs, key=lambda r: (r.step, r.time))
    bins = max((len(r.counts) for r in recs), default=0)
    counts = np.full((len(recs), bins), np.nan)
    edges = np.full((len(recs), bins + 1), np.nan)
    for i, r in enumerate(recs):
        counts[i, : len(r.counts)] = r.counts
        edges[i, : len(r.edges)] = r.edges

    def ints(xs: list[int]) -> Any:
        return np.array(xs, dtype=np.int64)

    return HistogramSeries(
        key=key,
        label=label,
        steps=ints([r.step for r in recs]),
        edges=edges,
        counts=counts,
        nan=ints([r.nan for r in recs]),
        posinf=ints([r.posinf for r in recs]),
        neginf=ints([r.neginf for r in recs]),
    )


# -- the local reader's side: rich records from stream files -------------------------

Streams = Iterable[tuple[str, Path, list[R.AnyRecord]]]  # (label, file, its records)


def local_media(streams: Streams, key: str) -> list[MediaFile]:
    out = []
    for label, path, records in streams:
        run_dir = path.parent.parent
        for rec in records:
            if type(rec) is R.Media and rec.key == key:
                for i, item in enumerate(rec.items):
                    out.append(_file(rec, label, i, item, run_dir))
    out.sort(key=lambda m: (m.step, m.label, m.time or 0.0, m.index))
    return out


def _file(rec: R.Media, label: str, index: int, item: R.MediaItem, run_dir: Path) -> MediaFile:
    fields = {f: getattr(item, f) for f in item.__struct_fields__}
    return MediaFile(
        step=rec.step,
        label=label,
        key=rec.key,
        index=index,
        time=rec.time,
        path=str(blob_path(run_dir, item.digest)),
        **fields,
    )


def local_table(
    streams: Streams, key: str, step: int | None, label: str | None, primary: str | None
) -> Table:
    from ..media.image import Image
    from ..media.table import table_from_parquet

    found: list[tuple[int, bool, str, float, R.TableRec, Path]] = []
    for lab, path, records in streams:
        for rec in records:
            if (
                type(rec) is R.TableRec
                and rec.key == key
                and (step is None or rec.step == step)
                and (label is None or lab == label)
            ):
                found.append((rec.step, lab == primary, lab, rec.time, rec, path))
    if not found:
        where = f" at step {step}" if step is not None else ""
        who = f" of stream {label!r}" if label is not None else ""
        raise KeyNotLoggedError(
            f"no table {key!r}{where}{who} in this run: run.media_keys() lists the tables "
            "logged, with their steps and streams"
        )
    # the latest step; then the primary's, then the lowest label; then the latest log
    best = min(found, key=lambda f: (-f[0], not f[1], f[2], -f[3]))
    rec, run_dir = best[4], best[5].parent.parent
    data = blob_path(run_dir, rec.digest).read_bytes()
    table = table_from_parquet(data, lambda d: Image(blob_path(run_dir, d)), types=list(rec.types))
    table.step, table.label = rec.step, best[2]
    return table


def local_histograms(streams: Streams, key: str) -> dict[str, HistogramSeries]:
    per: dict[str, list[R.HistogramRec]] = {}
    for label, _path, records in streams:
        for rec in records:
            if type(rec) is R.HistogramRec and rec.key == key:
                per.setdefault(label, []).append(rec)
    return {label: histogram_series(key, label, recs) for label, recs in sorted(per.items())}


def local_media_keys(streams: Streams) -> list[MediaKey]:
    found: dict[str, tuple[str, set[int], set[str]]] = {}
    for label, _path, records in streams:
        for rec in records:
            if isinstance(rec, R.Media):
                kind = rec.items[0].kind if rec.items else "image"
            elif isinstance(rec, R.TableRec):
                kind = "table"
            elif isinstance(rec, R.HistogramRec):
                kind = "histogram"
            else:
                continue
            entry = found.setdefault(rec.key, (kind, set(), set()))
            entry[1].add(rec.step)
            entry[2].add(label)
    return [
        MediaKey(key=k, kind=kind, steps=sorted(steps), labels=sorted(labels))
        for k, (kind, steps, labels) in sorted(found.items())
    ]
