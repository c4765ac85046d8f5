"""``wandb.plot``: the chart functions that take a ``Table`` return it, so logging the
chart records its data as a table under the key (the Vega chart itself is not made:
``wandb.plot`` is partial). The others warn once and return None (nothing is logged).
"""

from __future__ import annotations

from typing import Any

from ._term import warn_once


def _table(name: str, table: Any) -> Any:
    warn_once(
        f"plot-{name}", f"wandb.plot.{name}(): rankwise records the chart's table, not the chart"
    )
    return table


def line(
    table: Any, x: str, y: str, stroke: Any = None, title: str = "", split_table: bool = False
) -> Any:
    return _table("line", table)


def scatter(table: Any, x: str, y: str, title: str = "", split_table: bool = False) -> Any:
    return _table("scatter", table)


def bar(table: Any, label: str, value: str, title: str = "", split_table: bool = False) -> Any:
    return _table("bar", table)


def histogram(table: Any, value: str, title: str = "", split_table: bool = False) -> Any:
    return _table("histogram", table)


def _unsupported(name: str) -> Any:
    def call(*args: Any, **kwargs: Any) -> None:
        warn_once(f"plot-{name}", f"wandb.plot.{name}() is not supported by rankwise: not logged")

    call.__name__ = name
    return call


line_series = _unsupported("line_series")
confusion_matrix = _unsupported("confusion_matrix")
pr_curve = _unsupported("pr_curve")
roc_curve = _unsupported("roc_curve")

__all__ = [
    "bar", "confusion_matrix", "histogram", "line", "line_series", "pr_curve", "roc_curve",
    "scatter",
]  # fmt: skip
