"""The drawings a study's figures are made of (the analyses draw theirs with them; the API's figure
route, the console and the HTML report take them from ``coordinator.reporting.figures``):

* :func:`boxplot_figure` — a DP boxplot analysis: one box per center and the pooled box, with
  ``Axes.bxp``; a box has no points, the outliers are DP *counts* written beside each whisker;
* :func:`table_figure` — the federated K-anonymous table as cumulative shares, one line per
  group (the picture the Mann-Whitney tests are about);
* :func:`effects_figure` — a Mann-Whitney analysis's probabilistic indices with their 95 %
  intervals, per center and stratified (a forest plot);
* :func:`quantiles_figure` — quantiles against their levels, one line per center or estimator
  (``dp_quantiles``, ``quantiles``).

Which figures an analysis has, and which of these draws each, is the analysis's own
(``coordinator/analyses/<kind>.py``: ``figure_names``, ``figure``);
``coordinator.reporting.figures`` draws one by name.

Drawn with matplotlib's object API (``Figure``, no pyplot state, safe in worker threads) from the
released numbers only.
"""

from __future__ import annotations

import io
import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

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
    return draw_boxes([(label, box.model_dump()) for label, box in boxes], title=title,
                      fmt=fmt)


def draw_boxes(boxes: Sequence[tuple[str, Mapping[str, Any]]], *, title: str,
               fmt: FigureFormat = "svg") -> bytes:
    """Boxes side by side, each a released seven-number summary (a ``Box``'s fields); its
    outlier counts written beside the whiskers and its ε under its label, where it has them."""
    figure = Figure(figsize=(1.6 + 1.2 * len(boxes), 4.2), layout="constrained")
    axes = figure.add_subplot()
    labels = [label + (f"\nε={box['epsilon']:g}" if box.get("epsilon") is not None else "")
              for label, box in boxes]
    axes.bxp([bxp_stats(box["lower_whisker"], box["q1"], box["median"], box["q3"],
                        box["upper_whisker"], label)
              for label, (_, box) in zip(labels, boxes, strict=True)], showfliers=False)
    for i, (_, box) in enumerate(boxes, start=1):
        if box.get("upper_outliers") is not None:
            axes.annotate(f"{box['upper_outliers']} above", (i, box["upper_whisker"]),
                          textcoords="offset points", xytext=(0, 4), ha="center", fontsize=7)
        if box.get("lower_outliers") is not None:
            axes.annotate(f"{box['lower_outliers']} below", (i, box["lower_whisker"]),
                          textcoords="offset points", xytext=(0, -10), ha="center",
                          fontsize=7)
    axes.set_title(title, fontsize=9)
    return _save(figure, fmt)


def _save(figure: Figure, fmt: FigureFormat) -> bytes:
    buffer = io.BytesIO()
    metadata = {"Date": None} if fmt == "svg" else {}
    figure.savefig(buffer, format=fmt, metadata=metadata)
    return buffer.getvalue()


def table_figure(limits: Sequence[float | str], counts: Sequence[Sequence[float]],
                 groups: list[str], *, title: str, fmt: FigureFormat = "svg") -> bytes:
    """A table's cumulative shares per group at its limits (numbers, or ``"±Infinity"`` as on
    the wire); the open end bins (±∞) are drawn as wide as their finite neighbour."""
    edges = [float(v) for v in limits]
    if len(edges) > 1 and not math.isfinite(edges[0]):
        edges[0] = edges[1] - (edges[2] - edges[1] if len(edges) > 2 else 1.0)
    if len(edges) > 1 and not math.isfinite(edges[-1]):
        edges[-1] = edges[-2] + (edges[-2] - edges[-3] if len(edges) > 2 else 1.0)
    figure = Figure(figsize=(7.0, 3.4), layout="constrained")
    axes = figure.add_subplot()
    for g, row in enumerate(counts):
        total = sum(row) or 1.0
        shares = list(itertools.accumulate(c / total for c in row))
        label = groups[g] if g < len(groups) else f"group {g}"
        axes.plot(edges, [0.0, *shares], marker=".", markersize=3, linewidth=1.6,
                  label=f"{label} (n = {sum(row):g})")
    axes.set_xlabel("value (released bin limits; open ends drawn as wide as their neighbour)")
    axes.set_ylabel("cumulative share of records")
    axes.set_ylim(0, 1.02)
    axes.grid(alpha=0.3)
    axes.set_title(title, fontsize=9)
    axes.legend(frameon=False, loc="lower right")
    return _save(figure, fmt)


def effects_figure(effects: Sequence[Mapping[str, Any]], *, title: str,
                   fmt: FigureFormat = "svg") -> bytes:
    """θ with its interval per row (``Effect`` fields), top to bottom; ½ (no difference)
    dashed."""
    figure = Figure(figsize=(6.0, 1.2 + 0.45 * len(effects)), layout="constrained")
    axes = figure.add_subplot()
    ys = list(range(len(effects), 0, -1))
    for y, e in zip(ys, effects, strict=True):
        axes.plot([e["low"], e["high"]], [y, y], color="#1f77b4", linewidth=1.6)
        axes.plot([e["estimate"]], [y], marker="D" if e["center"] == "stratified" else "o",
                  color="#1f77b4")
    axes.axvline(0.5, color="grey", linestyle="--", linewidth=1)
    axes.set_yticks(ys, [f"{e['center']} (n = {e['n_x']} + {e['n_y']})" for e in effects])
    axes.set_xlim(0, 1)
    axes.set_xlabel("θ = P(Y > X) + ½·P(Y = X), with its 95 % interval")
    axes.set_title(title, fontsize=9)
    return _save(figure, fmt)


def quantiles_figure(levels: Sequence[float], series: Mapping[str, Sequence[float]], *,
                     title: str, fmt: FigureFormat = "svg") -> bytes:
    """Each series' values against the levels, one line per series."""
    figure = Figure(figsize=(6.4, 3.6), layout="constrained")
    axes = figure.add_subplot()
    for label, values in series.items():
        axes.plot(list(levels), list(values), marker="o", markersize=3, label=label)
    axes.set_xlabel("level")
    axes.set_ylabel("quantile")
    axes.grid(alpha=0.3)
    axes.legend(frameon=False, fontsize=7)
    axes.set_title(title, fontsize=9)
    return _save(figure, fmt)




def survival_figure(curves: Sequence[Mapping[str, Any]], *, title: str, unit: str | None = None,
                    fmt: FigureFormat = "svg") -> bytes:
    """Kaplan-Meier curves (``SurvivalCurve`` fields), one line per arm with its 95 % band
    shaded, and the number at risk at each limit in a table under the axes (the published
    figure's layout)."""
    figure = Figure(figsize=(7.0, 3.4 + 0.22 * len(curves)), layout="constrained")
    grid = figure.add_gridspec(2, 1, height_ratios=[5, 0.35 + 0.3 * len(curves)])
    axes = figure.add_subplot(grid[0])
    for curve in curves:
        times = list(curve["times"])
        median = "not reached" if curve["median"] is None else format(curve["median"], ".3g")
        line, = axes.plot(times, curve["survival"], linewidth=1.6,
                          label=f"{curve['arm']} (median {median})")
        low = [math.nan if v is None else v for v in curve["low"]]
        high = [math.nan if v is None else v for v in curve["high"]]
        axes.fill_between(times, low, high, color=line.get_color(), alpha=0.15, linewidth=0)
    axes.set_ylim(0, 1.02)
    axes.set_ylabel("survival S(t), with its 95 % band")
    axes.grid(alpha=0.3)
    axes.legend(frameon=False, fontsize=8, loc="lower left")
    axes.set_title(title, fontsize=9)
    risk = figure.add_subplot(grid[1], sharex=axes)
    risk.set_axis_off()
    risk.set_title("number at risk", fontsize=7, loc="left")
    for row, curve in enumerate(curves):
        y = len(curves) - row
        risk.text(curve["times"][0], y, f"{curve['arm']} ", ha="right", va="center", fontsize=7)
        for t, n in zip(curve["times"], curve["at_risk"], strict=False):
            risk.text(t, y, f"{n:.0f}", ha="center", va="center", fontsize=7)
    risk.set_ylim(0.3, len(curves) + 0.7)
    axes.set_xlabel(f"time ({unit})" if unit else "time")
    return _save(figure, fmt)
