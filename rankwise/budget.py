"""Budgets per request: what one upload or commit may make the server hold and store.

A byte cap on a body does not bound the work it causes: 8 kB of gzipped msgpack can be
millions of empty arrays, each a Python object at ingest and again on every read of the
run. So the JSON-like values a client hands the server (a run's config and summary, an
artifact's metadata, a stream start's tags and argv) are also counted by *elements*:

* at most ``MAX_CONTAINER_ITEMS`` entries in one list or map,
* at most ``MAX_DEPTH`` levels of nesting,
* at most ``MAX_RECORD_ITEMS`` elements (every scalar, list and map counts one) and
  ``MAX_RECORD_BYTES`` bytes of JSON in one record's value,
* at most ``MAX_UPLOAD_ITEMS`` elements in one upload, across its records.

Past any of them the request is refused whole with ``BudgetError`` (413 at the HTTP
layer, a skipped file in the local reader). The caps are far above what a training
script's config or summary holds (a large Hydra config is a few thousand elements), so
the SDK never meets them. The walk is iterative: a deep value costs no recursion.
"""

from __future__ import annotations

from typing import Any

import msgspec

MAX_CONTAINER_ITEMS = 10_000
MAX_DEPTH = 64
MAX_RECORD_ITEMS = 100_000
MAX_RECORD_BYTES = 4 * 1024 * 1024
MAX_UPLOAD_ITEMS = 1_000_000
# Metric keys in one ``Metrics`` record: the SDK's writer cuts a wider ``log()`` call
# into records of at most this many keys (same step and time), so the server never
# refuses what it wrote.
MAX_KEYS_PER_RECORD = 10_000

_json = msgspec.json.Encoder()


class BudgetError(ValueError):
    """A request over a budget: ``status`` is 413 (too much) or 422 (not JSON-like)."""

    def __init__(self, message: str, status: int = 413) -> None:
        super().__init__(message)
        self.status = status


def count_elements(value: Any, what: str, limit: int = MAX_RECORD_ITEMS) -> int:
    """The elements of ``value`` (each scalar, list and map counts one), refusing a
    container over ``MAX_CONTAINER_ITEMS``, nesting over ``MAX_DEPTH`` or a total over
    ``limit`` as soon as it is seen (the walk never goes further than the budget)."""
    total = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    pop, push = stack.pop, stack.append
    while stack:
        item, depth = pop()
        total += 1
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        n = len(children)
        if n > MAX_CONTAINER_ITEMS:
            raise BudgetError(
                f"{what} holds a list or map of {n} items, over {MAX_CONTAINER_ITEMS}: "
                "log large data as a table or artifact, not as config"
            )
        if n and depth + 1 > MAX_DEPTH:
            raise BudgetError(f"{what} is nested over {MAX_DEPTH} levels deep")
        total += n if isinstance(item, dict) else 0  # a map's keys count too
        if total + n > limit:
            raise BudgetError(
                f"{what} holds over {limit} elements: log large data as a table or artifact"
            )
        for child in children:
            push((child, depth + 1))
    return total


def check_json_value(value: Any, what: str, limit: int = MAX_RECORD_ITEMS) -> int:
    """``count_elements``, then the value's JSON size (``MAX_RECORD_BYTES``); 422 for a
    value JSON cannot hold (msgpack can carry array or nil map keys, which a stored
    config would turn into a failure of every later read). Returns the element count."""
    n = count_elements(value, what, limit)
    try:
        size = len(_json.encode(value))
    except (TypeError, ValueError, OverflowError):
        raise BudgetError(
            f"{what} is not JSON-like: map keys must be strings", status=422
        ) from None
    if size > MAX_RECORD_BYTES:
        raise BudgetError(f"{what} is {size} bytes as JSON, over {MAX_RECORD_BYTES}")
    return n


class UploadBudget:
    """Elements spent by one upload so far, against ``MAX_UPLOAD_ITEMS``."""

    def __init__(self, limit: int = MAX_UPLOAD_ITEMS) -> None:
        self.limit = limit
        self.spent = 0

    def charge(self, value: Any, what: str) -> None:
        self.spent += check_json_value(value, what)
        if self.spent > self.limit:
            raise BudgetError(
                f"an upload holds over {self.limit} config, summary and other elements: "
                "send smaller batches"
            )
