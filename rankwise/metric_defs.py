"""Metric definitions (``run.define_metric``): what a metric's cross-rank line is.

A shared run's chart and summary show one line per metric across its ranks. By default
it is the mean; ``define_metric(name, reduce=...)`` chooses another, kept with the run
as a ``DefineMetric`` stream record and honoured by the series API (the band's
``reduce``), the run summary's cross-rank value (``CrossRankValue.reduce``/``value``)
and the dashboard:

========  ============================================================================
reduce    the line
========  ============================================================================
mean      the mean of the ranks' values at the step (the default)
wmean     weighted by ``log(weight=)`` where every rank there gave one, else the mean
sum       the total (a throughput: samples/s of the whole job)
min       the smallest rank's value (the slowest rank's throughput, say)
max       the largest rank's value (the peak memory of any rank)
========  ============================================================================

``name`` is a metric key or a glob ending in ``*`` (W&B's rules: a prefix match; a key
starting with ``_`` never matches a glob; an exact definition beats a glob, and of two
globs the longer prefix wins). Pure and light: the SDK, the readers and the server use
it alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .errors import UsageError

REDUCES = ("mean", "wmean", "sum", "min", "max")
DEFAULT_REDUCE = "mean"
GOALS = ("minimize", "maximize")


def check_reduce(reduce: Any) -> str:
    """``reduce`` as stored, or a ``UsageError`` naming the choices."""
    if reduce not in REDUCES:
        raise UsageError(
            f"define_metric(reduce={reduce!r}): the cross-rank line is one of "
            f"{', '.join(repr(r) for r in REDUCES)}"
        )
    return str(reduce)


def check_name(name: Any) -> str:
    """A metric key, or a glob ending in ``*`` (only there), as ``define_metric`` takes."""
    from . import names

    if not isinstance(name, str) or not name:
        raise UsageError(
            f"define_metric(name={name!r}): give a metric key or a glob like 'train/*'"
        )
    stem = name[:-1] if name.endswith("*") else name
    if "*" in stem:
        raise UsageError(
            f"define_metric(name={name!r}): '*' may only end a glob ('train/*'), as in W&B"
        )
    if stem and not names.is_key(stem):
        raise UsageError(f"define_metric(name={name!r}): {names.KEY_RULE}")
    return name


def find(definitions: Mapping[str, Any], key: str) -> Any | None:
    """The definition that applies to ``key``: its own, else the glob with the longest
    prefix of it (never for a key starting with ``_``); None when none applies."""
    own = definitions.get(key)
    if own is not None:
        return own
    if key.startswith("_"):
        return None
    best: str | None = None
    for name in definitions:
        glob = name.endswith("*") and key.startswith(name[:-1])
        if glob and (best is None or len(name) > len(best)):
            best = name
    return definitions[best] if best is not None else None


def reduce_of(definitions: Mapping[str, Any], key: str) -> str:
    """``key``'s cross-rank line (``DEFAULT_REDUCE`` when no definition says one)."""
    found = find(definitions, key)
    got = getattr(found, "reduce", None) if found is not None else None
    return got if got in REDUCES else DEFAULT_REDUCE
