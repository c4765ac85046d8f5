"""``rankwise.Histogram``: a distribution at one step, stored inline (at most 512 bins).

``Histogram(values)`` bins ``values`` (anything numpy or torch can flatten) into
``num_bins`` (default 64) equal bins over their finite range, as ``np.histogram`` does;
``Histogram(np_histogram=(counts, edges))`` takes counts already made (``len(edges) ==
len(counts) + 1``), e.g. by ``np.histogram`` or ``torch.histc``. NaN, +Inf and -Inf
values are left out of the bins and counted (``nan``, ``posinf``, ``neginf``).

Torch tensors stay tensors (a copy started non-blocking for a device tensor: see
``HostArray``) until the encoder thread bins them, so ``run.watch`` can pass device
tensors without a host sync on the training thread.
"""

from __future__ import annotations

from typing import Any

from ..errors import MediaError
from .base import HostArray, Rich, is_array_like, np_

MAX_BINS = 512


class Histogram(Rich):
    """A histogram to log: ``run.log({"weights": rankwise.Histogram(w)})``."""

    kind = "histogram"

    def __init__(self, values: Any = None, np_histogram: Any = None, num_bins: int = 64) -> None:
        if (
            isinstance(num_bins, bool)
            or not isinstance(num_bins, int)
            or not (1 <= num_bins <= MAX_BINS)
        ):
            raise MediaError(
                f"Histogram num_bins={num_bins!r}: give an integer from 1 to {MAX_BINS}"
            )
        self.num_bins = num_bins
        self._values: HostArray | None = None
        self._counts: HostArray | None = None
        self._edges: HostArray | None = None
        if (values is None) == (np_histogram is None):
            raise MediaError(
                "Histogram takes either values (a sequence or array) or "
                "np_histogram=(counts, edges), not both and not neither"
            )
        if values is not None:
            self._values = HostArray(values if is_array_like(values) else _flat(values))
            self._nbytes = self._values.nbytes
            return
        try:
            counts, edges = np_histogram
        except (TypeError, ValueError):
            raise MediaError(
                "Histogram np_histogram= must be a pair (counts, edges), as np.histogram returns"
            ) from None
        self._counts = HostArray(counts if is_array_like(counts) else _flat(counts))
        self._edges = HostArray(edges if is_array_like(edges) else _flat(edges))
        n = self._counts.shape[0] if len(self._counts.shape) == 1 else -1
        if n < 1 or n > MAX_BINS:
            raise MediaError(
                f"Histogram np_histogram counts of shape {self._counts.shape}: give 1 to "
                f"{MAX_BINS} counts in one dimension (rebin to fewer bins)"
            )
        if self._edges.shape != (n + 1,):
            raise MediaError(
                f"Histogram np_histogram: {n} counts need {n + 1} edges, not shape "
                f"{self._edges.shape}"
            )
        self._nbytes = self._counts.nbytes + self._edges.nbytes

    def __repr__(self) -> str:
        return f"<rankwise.Histogram {self.num_bins} bins>"

    def _encode_histogram(self) -> tuple[list[float], list[float], int, int, int]:
        """(counts, edges, nan, posinf, neginf); runs on the encoder thread."""
        np = np_()
        if self._values is None:
            assert self._counts is not None and self._edges is not None
            counts = np.asarray(self._counts.get(), dtype=np.float64)
            edges = np.asarray(self._edges.get(), dtype=np.float64)
            if not (np.isfinite(counts).all() and np.isfinite(edges).all()):
                raise MediaError("Histogram np_histogram has NaN or Inf counts or edges")
            if (np.diff(edges) < 0).any():
                raise MediaError("Histogram np_histogram edges must not decrease")
            return counts.tolist(), edges.tolist(), 0, 0, 0
        values = np.asarray(self._values.get()).ravel()
        if values.dtype.kind not in "biuf":
            raise MediaError(f"Histogram of {values.dtype} values: give numbers")
        values = values.astype(np.float64, copy=False)
        finite = np.isfinite(values)
        nan = int(np.isnan(values).sum())
        posinf = int(np.isposinf(values).sum())
        neginf = int(np.isneginf(values).sum())
        if not finite.all():
            values = values[finite]
        if values.size == 0:
            counts_a = np.zeros(self.num_bins)
            edges_a = np.linspace(0.0, 1.0, self.num_bins + 1)
        else:
            counts_a, edges_a = np.histogram(values, bins=self.num_bins)
        return counts_a.astype(np.float64).tolist(), edges_a.tolist(), nan, posinf, neginf


def _flat(values: Any) -> Any:
    np = np_()
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise MediaError(
            f"Histogram values must be numbers (a list, numpy array or tensor): {exc}"
        ) from None
    return arr
