"""Boxplot figures of a study's DP boxplot analysis: one box per center and the pooled box.

Drawn with matplotlib's object API (``Figure``, no pyplot state, safe in worker threads) from the
released numbers only, with ``Axes.bxp``: a box has no points; the outliers are DP *counts*,
written beside each whisker.
"""

from __future__ import annotations

import io
from typing import Literal

from matplotlib.figure import Figure

from coordinator.models import Box, DPBoxplotResult
from shared.dp.boxplot import bxp_stats

FigureFormat = Literal["svg", "png"]
MEDIA_TYPES: dict[str, str] = {"svg": "image/svg+xml", "png": "image/png"}


def boxplot_figure(
    result: DPBoxplotResult, *, title: str, fmt: FigureFormat = "svg"
) -> bytes:
    """The figure as SVG or PNG bytes."""
    boxes: list[tuple[str, Box]] = sorted(result.per_center.items())
    if result.pooled is not None:
        boxes.append(("pooled", result.pooled))
    figure = Figure(figsize=(1.6 + 1.2 * len(boxes), 4.2), layout="constrained")
    axes = figure.add_subplot()
    axes.bxp([bxp_stats(box.lower_whisker, box.q1, box.median, box.q3, box.upper_whisker,
                        f"{label}\nε={box.epsilon:g}") for label, box in boxes],
             showfliers=False)
    for i, (_, box) in enumerate(boxes, start=1):
        axes.annotate(f"{box.upper_outliers} above", (i, box.upper_whisker),
                      textcoords="offset points", xytext=(0, 4), ha="center", fontsize=7)
        axes.annotate(f"{box.lower_outliers} below", (i, box.lower_whisker),
                      textcoords="offset points", xytext=(0, -10), ha="center", fontsize=7)
    axes.set_title(title, fontsize=9)
    buffer = io.BytesIO()
    metadata = {"Date": None} if fmt == "svg" else {}
    figure.savefig(buffer, format=fmt, metadata=metadata)
    return buffer.getvalue()
