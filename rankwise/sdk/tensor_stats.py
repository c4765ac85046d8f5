"""The numbers ``run.watch`` records of one tensor, computed where the tensor lives.

``row(t)`` gives ``ROW`` float64 numbers: the 64 counts and 65 edges of
``np.histogram(finite values of t, bins=64)`` — exactly numpy's, edges and counts (an
empty or all-non-finite tensor: 64 empty bins over [0, 1]; a constant one: [v - 0.5,
v + 0.5]) — then how many values were NaN, +Inf and -Inf, then the L2 norm (NaN or Inf
when a value is). Half precision is binned in float32.

On the CPU, where nothing waits for a device, numpy bins the values (``row_host``). On
any other device (``row_device``) only device ops are used — finite min/max through
``where``, the edges by ``np.linspace``'s own arithmetic in the tensor's dtype,
``torch.bucketize`` against them, counts by ``torch.histc`` over the bucket indices on a
fixed range (by sorting under ``torch.use_deterministic_algorithms``, which CUDA's histc
refuses) — so computing a row never reads a value back and never waits for the device.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

BINS = 64
# One row of float64 per histogram, made where the tensor lives: counts, edges, then
# NaN, +Inf and -Inf counts, then the L2 norm.
EDGES = BINS
NAN = 2 * BINS + 1
NORM = NAN + 3
ROW = NORM + 1


def row(t: torch.Tensor, hist: bool) -> torch.Tensor:
    """``ROW`` float64 numbers for ``t``: histogram counts and edges as
    ``np.histogram(finite values, 64)`` gives them, NaN/+Inf/-Inf counts, L2 norm."""
    import torch

    x = t.detach()
    if x.is_sparse:
        x = x.to_dense()
    if x.is_complex():
        raise TypeError(f"a complex tensor ({x.dtype}) has no histogram")
    x = x.reshape(-1)
    if x.dtype not in (torch.float32, torch.float64):
        x = x.float()  # half precision is binned in float32, as W&B does
    if x.device.type == "cpu":
        return row_host(x, hist)
    return row_device(x, hist)


def row_host(x: torch.Tensor, hist: bool) -> torch.Tensor:
    """On the CPU nothing waits for a device: numpy bins the values (the reference)."""
    import numpy as np
    import torch

    out = np.zeros(ROW)
    a = x.numpy()
    out[NORM] = float(torch.linalg.vector_norm(x))
    if not hist:
        return torch.from_numpy(out)
    span = None  # numpy's own range, found once: min and max in one pass
    if a.size:
        lo, hi = (float(v) for v in torch.aminmax(x))
        if math.isfinite(lo) and math.isfinite(hi):
            span = (a.dtype.type(lo), a.dtype.type(hi))  # what np.histogram would take
        else:
            finite = np.isfinite(a)
            nan = int(np.isnan(a).sum())
            posinf = int(np.isposinf(a).sum())
            out[NAN : NAN + 3] = (nan, posinf, a.size - int(finite.sum()) - nan - posinf)
            a = a[finite]
    counts, edges = np.histogram(a, BINS, range=span)
    out[:BINS] = counts
    out[EDGES : EDGES + BINS + 1] = edges
    return torch.from_numpy(out)


def row_device(x: torch.Tensor, hist: bool) -> torch.Tensor:
    """The same numbers as ``_row_host`` with device ops only: nothing reads a value back,
    so the training thread never waits for the device. Edges follow ``np.linspace`` op
    for op in ``x``'s dtype, so bucketing against them gives numpy's bins."""
    import torch

    inf = math.inf
    norm = torch.linalg.vector_norm(x).double().reshape(1)
    if not hist:
        return torch.cat([x.new_zeros(ROW - 1, dtype=torch.float64), norm])
    finite = torch.isfinite(x)
    n_finite = finite.sum()
    if x.numel():
        lo = torch.where(finite, x, inf).amin()
        hi = torch.where(finite, x, -inf).amax()
    else:
        lo = hi = x.new_zeros(())
    empty = n_finite == 0
    lo = torch.where(empty, 0.0, lo)
    hi = torch.where(empty, 1.0, hi)
    same = lo == hi
    lo = torch.where(same, lo - 0.5, lo)
    hi = torch.where(same, hi + 0.5, hi)
    step = (hi - lo) / BINS
    edges = torch.arange(BINS + 1, dtype=x.dtype, device=x.device) * step + lo
    edges[BINS] = hi
    slot = torch.bucketize(x, edges, right=True).sub_(1).clamp_(0, BINS - 1)
    slot = torch.where(finite, slot, BINS)  # non-finite values: one slot past the bins
    if torch.are_deterministic_algorithms_enabled():
        # CUDA's histc adds atomically and refuses deterministic mode: count by sorting
        ordered = torch.sort(slot).values
        ends = torch.searchsorted(ordered, torch.arange(1, BINS + 1, device=x.device))
        counts = torch.diff(ends, prepend=ends.new_zeros(1)).to(x.dtype)
    else:
        counts = torch.histc(slot.to(x.dtype), bins=BINS + 1, min=0, max=BINS + 1)[:BINS]
    posinf = (x == inf).sum()
    neginf = (x == -inf).sum()
    nan = x.numel() - n_finite - posinf - neginf
    odd = torch.stack([nan, posinf, neginf]).double()
    return torch.cat([counts.double(), edges.double(), odd, norm])
