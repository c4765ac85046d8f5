"""The rank x step heatmap of one metric as the server sends it (``GET .../heatmap``).

Rows are the run's ranks (one per stream label, latest incarnation's rank, node and host;
sorted by rank, then label), columns equal buckets of the x range (whole steps wide on
the step axis). A cell is the mean of
the finite values the rank logged in the bucket (NaN: none). ``values`` carries the cells
as little-endian float32, row-major, base64-encoded: 1,024 ranks x 1,000 buckets is 4 MB
as float32 and several times that as JSON numbers. ``median`` is each bucket's median
across the reply's rows, and each row's ``score`` how far the rank sits from it: the mean,
over its buckets, of ``|value - median| / spread`` where ``spread`` is the bucket's robust
cross-rank spread (1.4826 x the median absolute deviation; see
``rankwise.store.heatmap_reads``). The dashboard's "outliers" are the highest scores.
"""

from __future__ import annotations

import msgspec

from .charts import XAxis


class HeatmapRow(msgspec.Struct, kw_only=True):
    """One rank's row: who it is and how far it sits from the cross-rank median."""

    label: str
    rank: int
    node: int
    local_rank: int
    host: str
    score: float | None  # None: no bucket where both the rank and the median had a value


class HeatmapReply(msgspec.Struct, kw_only=True):
    """One page of rows of the heatmap (``offset``, ``len(rows)`` of ``total_rows``)."""

    key: str
    x: XAxis
    # The x range the buckets cut in equal widths. On the step axis the buckets are
    # (hi - lo) / buckets whole steps wide and hi ends the last one (one past its last
    # step: ``rankwise.store.heatmap_steps``); on the time axis lo == hi is one bucket.
    lo: float
    hi: float
    buckets: int
    total_rows: int
    offset: int
    rows: list[HeatmapRow]
    values: str  # base64 float32 little-endian, len(rows) x buckets, row-major; NaN: empty
    median: list[float | None]  # per bucket, across ``rows``; null: no rank had a value
