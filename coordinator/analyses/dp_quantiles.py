"""Each center's ε-DP quantiles of one group level or every record (``{"kind":
"dp_quantiles"}``; ``coordinator.protocols.dp_quantiles``): ε per center."""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

from coordinator.analyses.base import Analysis, Request, Spend, StudyRun
from coordinator.models import (
    AnalysisResult,
    DPQuantilesAnalysis,
    DPQuantilesResult,
    StudySpec,
)
from coordinator.protocols import center_dp_quantiles
from coordinator.reporting.rendering import (
    _left_out,
    _table,
    dp_quantile_rows,
    excluded_line,
    fmt,
    rank_error,
    rank_error_note,
)
from coordinator.results import dp_quantiles_result


class DPQuantiles(Analysis[DPQuantilesAnalysis]):
    kind = "dp_quantiles"
    spec_model = DPQuantilesAnalysis
    result_model = DPQuantilesResult
    form_label = "DP quantiles (per center)"

    def requests(self, spec: StudySpec, analysis: DPQuantilesAnalysis) -> list[Request]:
        return [(("dp_quantiles", spec.variable, analysis.group, analysis.epsilon,
                  analysis.bounds, tuple(analysis.levels), analysis.algorithm),
                 Spend(analysis.epsilon))]

    def level_names(self, analysis: DPQuantilesAnalysis, index: int) -> list[tuple[str, str]]:
        return [(analysis.group, f"body.analyses.{index}.group")] if analysis.group else []

    def summary_lines(self, result: dict[str, Any], view: dict[str, Any],
                      shown: Sequence[str]) -> list[str]:
        analysis = result
        lines = [f"DP quantiles ({analysis.get('algorithm')}) of "
                 f"{analysis.get('group') or 'all records'}, each center's own ("
                 + ", ".join(f"q{fmt(lv, 3)}" for lv in analysis["levels"])
                 + "; n; 95 % rank error in records):"]
        lines += excluded_line(analysis)
        for label, values, n, rank in dp_quantile_rows(analysis):
            lines.append(f"  {label:<28}"
                         + "  ".join(f"{fmt(v, 3):>6}" for v in values)
                         + f"   n {fmt(n) if n is not None else '?'}, {rank_error(rank)}")
        return lines

    def report_parts(self, result: dict[str, Any], view: dict[str, Any]) -> list[str]:
        analysis, esc = result, html.escape
        group = analysis.get("group") or "all records"
        parts = [f"<h2>{esc(f'DP quantiles of {group}, per center')}</h2>"]
        parts += _left_out(analysis)
        parts.append(_table(
            ["center · group", "n", *(f"q{fmt(lv, 3)}" for lv in analysis["levels"]),
             "rank error (95 %)"],
            [[label, n if n is not None else "", *values, rank_error(rank)]
             for label, values, n, rank in dp_quantile_rows(analysis)]))
        spent = ", ".join(f"{c} {fmt(e)}" for c, e in
                          (analysis.get("spent") or {}).items())
        parts.append(f"<p>Algorithm {esc(str(analysis.get('algorithm')))}; ε spent by "
                     f"each center: {esc(spent)}. "
                     f"{esc(rank_error_note(analysis.get('algorithm')))}</p>")
        return parts

    async def run(self, study: StudyRun, analysis: DPQuantilesAnalysis) -> AnalysisResult:
        spec = study.spec
        quantiles = await center_dp_quantiles(
            study.centers, dataset=spec.dataset, variable=spec.variable, group=analysis.group,
            levels=analysis.levels, epsilon=analysis.epsilon, bounds=analysis.bounds,
            algorithm=analysis.algorithm, min_centers=study.min_centers,
            allow_partial=spec.allow_partial, survey=study.survey,
        )
        return dp_quantiles_result(quantiles, analysis.group)
