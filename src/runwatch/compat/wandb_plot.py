"""`wandb.plot`: W&B's chart helpers, accepted and ignored. Each returns a chart that
keeps nothing; logged, its key is skipped with one warning, as W&B's other data types
are (runwatch draws a chart of every metric itself). docs/wandb-compat.md lists them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from runwatch.compat.wandb_ignored import DataType

__all__ = ["CustomChart", "Visualize", "bar", "confusion_matrix", "histogram", "line",
           "line_series", "plot_table", "pr_curve", "roc_curve", "scatter", "visualize"]


class CustomChart(DataType):
    """What W&B's chart helpers return (`wandb.plot.CustomChart`): built and never recorded."""


class Visualize(DataType):
    """What `wandb.visualize` returns: built and never recorded."""


def _chart(name: str, arguments: str) -> Callable[..., CustomChart]:
    """W&B's chart helper `name`: takes any arguments and returns a CustomChart."""

    def chart(*args: Any, **kwargs: Any) -> CustomChart:
        return CustomChart()

    chart.__name__ = chart.__qualname__ = name
    chart.__doc__ = f"`wandb.plot.{name}({arguments})`: a chart runwatch does not record."
    return chart


bar = _chart("bar", "table, label, value, title=None, split_table=False")
confusion_matrix = _chart("confusion_matrix", "probs=None, y_true=None, preds=None, "
                          "class_names=None, title=None, split_table=False")
histogram = _chart("histogram", "table, value, title=None, split_table=False")
line = _chart("line", "table, x, y, stroke=None, title=None, split_table=False")
line_series = _chart("line_series", "xs, ys, keys=None, title=None, xname=None, "
                     "split_table=False")
plot_table = _chart("plot_table", "vega_spec_name, data_table, fields, string_fields=None, "
                    "split_table=False")
pr_curve = _chart("pr_curve", "y_true, y_probas, labels=None, classes_to_plot=None, ...")
roc_curve = _chart("roc_curve", "y_true, y_probas, labels=None, classes_to_plot=None, ...")
scatter = _chart("scatter", "table, x, y, title=None, split_table=False")


def visualize(id: str, value: Any) -> Visualize:
    """`wandb.visualize(id, table)`: a chart runwatch does not record."""
    return Visualize()
