"""The federated K-anonymous bin table of the study's variable (``{"kind": "table"}``): read
from the study's one table (``coordinator.protocols.table``), no ε."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from coordinator.analyses.base import Analysis, MethodsContext, StudyRun
from coordinator.models import AnalysisResult, StudySpec, TableAnalysis, TableResult
from coordinator.reporting.charts import FigureFormat, table_figure
from coordinator.reporting.citations import works
from coordinator.reporting.export_parts import ExportPart, Row
from coordinator.reporting.rendering import (
    BIN_NOTE,
    FRACTIONAL_NOTE,
    _left_out,
    _table,
    bin_label,
    fmt,
    left_out,
    reused_note,
    table_svg,
)
from coordinator.reporting.shown import Shown
from coordinator.results import table_result

# The federated table's bins, (low, high] and each group's count.
TABLE_PART = ExportPart("table", None, "Table bins", 90)


class Table(Analysis[TableAnalysis, TableResult]):
    kind = "table"
    spec_model = TableAnalysis
    result_model = TableResult
    form_label = "federated table"
    dp_alternative = ("dp_boxplot (a pooled ε-DP histogram and boxplot on a public grid), or "
                      "describe with mode \"dp\" (its ε-DP histogram)")

    def needs_table(self, analysis: TableAnalysis) -> bool:
        return True

    summary_rank = 0
    report_rank = 1

    def summary_lines(self, result: dict[str, Any], view: dict[str, Any],
                      shown: Sequence[str]) -> list[str]:
        table, lines = result, []
        groups = view["spec"].get("groups") or ["all"]
        totals = ", ".join(f"{g} {fmt(t)}" for g, t in zip(groups, table["totals"],
                                                           strict=False))
        lines.append(f"Federated K-anonymous table: {len(table['limits']) - 1} bins "
                     f"({totals}); built by {table['order'][0]}, refined by "
                     f"{', '.join(table['order'][1:]) or 'nobody'}")
        if reused_note(table):
            lines.append(f"  {reused_note(table)}")
        per_center = "; ".join(
            f"{c} " + ", ".join(f"{g} {fmt(t)}" for g, t in zip(groups, ts, strict=False))
            for c, ts in (table.get("center_totals") or {}).items())
        if per_center:
            lines.append(f"  n per center: {per_center}")
        if left_out(table):
            lines.append(f"  left out: {left_out(table)}")
        lines.append(f"  {BIN_NOTE} {FRACTIONAL_NOTE}")
        return lines

    def report_parts(self, result: dict[str, Any], view: dict[str, Any]) -> list[str]:
        table, esc = result, html.escape
        groups = list(view["spec"].get("groups") or ["all records"])
        parts = ["<h2>Federated K-anonymous table</h2>"]
        parts += _left_out(table)
        parts.append(f"<p>Built by {esc(table['order'][0])}, refined by "
                     f"{esc(', '.join(table['order'][1:]) or 'nobody')}.</p>")
        if reused_note(table):
            parts.append(f"<p class='note'>{esc(reused_note(table) or '')}</p>")
        parts.append(f"<figure>{table_svg(table, groups)}</figure>")
        limits = table["limits"]
        rows = [[bin_label(limits, i), *(row[i] for row in table["counts"])]
                for i in range(len(limits) - 1)]
        rows.append(["total", *table["totals"]])
        parts.append(f"<details><summary>The {len(limits) - 1} bins</summary>"
                     f"<p>{esc(BIN_NOTE)} {esc(FRACTIONAL_NOTE)}</p>"
                     + _table(["bin", *groups], rows) + "</details>")
        parts.append(_table(["center", *groups],
                            [[c, *t] for c, t in table["center_totals"].items()]))
        return parts

    async def run(self, study: StudyRun, analysis: TableAnalysis) -> AnalysisResult:
        return table_result(await study.study_table())

    # -- how it is written up --------------------------------------------------------------------

    algorithm_name = ("federated K-anonymous bin table (Becher, Marcus-Kalish & Steinberg 2023, "
                      "Algorithms 1-6)")
    references = works("becher")

    def methods(self, asked: TableAnalysis, result: TableResult,
                context: MethodsContext) -> list[str]:
        context.cite("becher")
        return ["A federated K-anonymous bin table of the variable was built center after "
                "center (Becher et al. 2023, Algorithms 1-6); it spends no ε."]

    export_parts = (TABLE_PART,)

    def export_rows(self, part: ExportPart, index: int, asked: TableAnalysis,
                    result: TableResult, study: Shown) -> list[Row]:
        return table_rows(index, result, study.spec)

    figure_labels: ClassVar[Mapping[str, str]] = {"table": "federated table"}

    def figure_names(self, result: TableResult) -> list[str]:
        return ["table"]

    def figure(self, name: str, asked: TableAnalysis, result: TableResult, spec: StudySpec,
               fmt: FigureFormat) -> bytes:
        return table_chart(result, spec, fmt)


def table_rows(index: int, table: TableResult, spec: StudySpec) -> list[Row]:
    """The federated table's bins: (low, high] and each group's count."""
    groups = list(spec.groups or ["all"])
    limits = table.limits
    return [{"analysis": index, "bin": i, "low": limits[i], "high": limits[i + 1],
             **{f"count_{g}": row[i] for g, row in zip(groups, table.counts, strict=False)}}
            for i in range(len(limits) - 1)]


def table_chart(table: TableResult, spec: StudySpec, fmt: FigureFormat) -> bytes:
    """The federated table as cumulative shares, one line per group."""
    label = f"{spec.dataset}.{spec.variable}"
    groups = list(spec.groups) if spec.groups is not None else ["all records"]
    return table_figure(table.limits, table.counts, groups,
                        title=f"{label}: federated K-anonymous table, cumulative", fmt=fmt)
