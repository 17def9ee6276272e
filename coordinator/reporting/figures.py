"""A study's figures, the one place they are drawn (the API's figure route, the console and the
HTML report, ``coordinator.reporting.report``, all take them from here):

* :func:`boxplot_figure` — a DP boxplot analysis: one box per center and the pooled box, with
  ``Axes.bxp``; a box has no points, the outliers are DP *counts* written beside each whisker;
* :func:`table_figure` — the federated K-anonymous table as cumulative shares, one line per
  group (the picture the Mann-Whitney tests are about);
* :func:`effects_figure` — a Mann-Whitney analysis's probabilistic indices with their 95 %
  intervals, per center and stratified (a forest plot);
* :func:`quantiles_figure` — quantiles against their levels, one line per center or estimator
  (``dp_quantiles``, ``quantiles``).

Which figures an analysis has is :func:`figure_names`; ``analysis_figure`` draws one by name.

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

from coordinator.core.errors import Conflict, NotFound
from coordinator.db import StudyRecord
from coordinator.models import (
    Box,
    DPBoxplotResult,
    DPQuantilesResult,
    FailedAnalysis,
    MWUResult,
    QuantilesResult,
    StudyResult,
    StudySpec,
    TableResult,
)
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


FigureName = Literal["table", "effects", "boxplots", "quantiles"]


def figure_names(analysis: Mapping[str, Any]) -> list[str]:
    """The figures of a succeeded analysis (its result as JSON), the default first."""
    kind = analysis.get("kind")
    if analysis.get("status", "succeeded") != "succeeded":
        return []
    if kind == "table":
        return ["table"]
    if kind in ("mwu", "dp_mwu"):  # dp_mwu: no table, its effects
        return (["table"] if analysis.get("table") else []) + (
            ["effects"] if analysis.get("effects") else [])
    if kind == "dp_boxplot":
        return ["boxplots"]
    if kind == "dp_quantiles":
        return ["quantiles"]
    if kind == "quantiles":
        return ["quantiles"] if any(e.get("quantiles") for by in (
            analysis.get("estimates") or {}).values() for e in by.values()) else []
    return []


def analysis_figure(record: StudyRecord, index: int, fmt: FigureFormat,
                    name: FigureName | None = None) -> bytes:
    """Figure ``name`` (default: the analysis's first, :func:`figure_names`) of analysis
    ``index`` of a finished study: its boxplots (``dp_boxplot``), its federated table
    (``table``, or the table behind an MWU table test), its effect sizes (``mwu``) or its
    quantiles (``dp_quantiles``, ``quantiles``); 409 before the study has a result or when the
    analysis failed, 404 for an analysis without that figure."""
    study_id = record.id
    if record.status not in ("succeeded", "partially_failed") or record.result is None:
        raise Conflict(f"study {study_id!r} is {record.status}; figures need a result")
    analyses = StudyResult.model_validate_json(record.result).analyses
    if index >= len(analyses):
        raise NotFound(f"study {study_id!r} has no analysis {index}")
    found = analyses[index]
    if isinstance(found, FailedAnalysis):
        raise Conflict(f"analysis {index} of study {study_id!r} failed: {found.error.detail}")
    spec = StudySpec.model_validate_json(record.spec)
    label = f"{spec.dataset}.{spec.variable}"
    names = figure_names(found.model_dump(mode="json"))
    if not names or (name is not None and name not in names):
        said = f"no {name} figure" if name is not None else "no figure"
        raise NotFound(f"analysis {index} of study {study_id!r} has {said}"
                       + (f" (it has: {', '.join(names)})" if names else ""))
    chosen = name or names[0]
    if isinstance(found, DPBoxplotResult):
        title = label + (f" ({found.group})" if found.group else "")
        return boxplot_figure(found, title=title, fmt=fmt)
    if chosen == "effects" and isinstance(found, MWUResult):
        return effects_figure([e.model_dump() for e in found.effects], fmt=fmt,
                              title=f"{label}: probabilistic index, {spec.groups[1]} vs "
                                    f"{spec.groups[0]}" if spec.groups else label)
    if isinstance(found, DPQuantilesResult):
        return quantiles_figure(found.levels, found.per_center, fmt=fmt,
                                title=f"{label}: DP quantiles ({found.algorithm}) of "
                                      f"{found.group or 'all records'}, per center")
    if isinstance(found, QuantilesResult):
        series = {f"{estimator} · {group}": e.quantiles
                  for estimator, by_group in found.estimates.items()
                  for group, e in by_group.items() if e.quantiles is not None}
        return quantiles_figure(found.levels, series, fmt=fmt,
                                title=f"{label}: federated quantiles")
    table = found.table if isinstance(found, MWUResult) else found
    assert isinstance(table, TableResult)  # figure_names offered "table"
    groups = list(spec.groups) if spec.groups is not None else ["all records"]
    return table_figure(table.limits, table.counts, groups,
                        title=f"{label}: federated K-anonymous table, cumulative", fmt=fmt)
