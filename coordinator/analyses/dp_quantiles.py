"""Each center's ε-DP quantiles of one group level or every record (``{"kind":
"dp_quantiles"}``; ``coordinator.protocols.dp_quantiles``): ε per center."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from coordinator.analyses.base import (
    Analysis,
    Found,
    MethodsContext,
    Request,
    Spend,
    StudyRun,
    declared_size,
    planned,
)
from coordinator.models import (
    AnalysisResult,
    DPQuantilesAnalysis,
    DPQuantilesResult,
    PlannedError,
    StudySpec,
)
from coordinator.protocols import center_dp_quantiles
from coordinator.reporting.charts import FigureFormat, quantiles_figure
from coordinator.reporting.citations import works
from coordinator.reporting.export_parts import ExportPart, Row
from coordinator.reporting.notes import records_note
from coordinator.reporting.rendering import (
    _left_out,
    _table,
    dp_quantile_rows,
    excluded_line,
    fmt,
    rank_error,
    rank_error_note,
)
from coordinator.reporting.shown import Shown
from coordinator.reporting.wording import fmt as wfmt
from coordinator.results import dp_quantiles_result
from shared.dp_utility import quantiles_errors

# Each algorithm's name in the Methods, and the key of the work it cites.
DP_QUANTILES = {
    "joint_exp": ("JointExp", "gillenwater"),
    "private_quantile": ("PrivateQuantile, one level at a time", "smith"),
    "approx_quantile": ("ApproxQuantile", "kaplan"),
    "unbounded": ("the unbounded quantile walk", "durfee"),
}

# Each center's DP quantile at each level, with its n and rank error.
DP_QUANTILES_PART = ExportPart("dp_quantiles", None, "DP quantiles", 70)


class DPQuantiles(Analysis[DPQuantilesAnalysis, DPQuantilesResult]):
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

    # -- how it is written up --------------------------------------------------------------------

    algorithm_name = "DP quantiles per center"
    references = works("gillenwater", "smith", "kaplan", "durfee")

    def algorithm(self, asked: DPQuantilesAnalysis) -> str:
        return f"{self.algorithm_name} ({asked.algorithm})"

    def methods(self, asked: DPQuantilesAnalysis, result: DPQuantilesResult,
                context: MethodsContext) -> list[str]:
        name, key = DP_QUANTILES.get(asked.algorithm, (asked.algorithm, ""))
        if key:
            context.cite(key)
        return [f"DP quantiles at levels {', '.join(wfmt(v) for v in asked.levels)} were "
                f"released by each center with {name} at ε = {wfmt(asked.epsilon)}, bounds "
                f"[{wfmt(asked.bounds[0])}, {wfmt(asked.bounds[1])}]."]

    export_parts = (DP_QUANTILES_PART,)

    def export_rows(self, part: ExportPart, index: int, asked: DPQuantilesAnalysis,
                    result: DPQuantilesResult, study: Shown) -> list[Row]:
        return [{"analysis": index, "group": result.group, "center": center,
                 "algorithm": result.algorithm, "level": level, "value": value,
                 "n": result.n.get(center), "rank_halfwidth": result.rank_halfwidth.get(center),
                 "epsilon": result.spent.get(center)}
                for center, values in result.per_center.items()
                for level, value in zip(result.levels, values, strict=True)]

    figure_labels: ClassVar[Mapping[str, str]] = {"quantiles": "quantiles"}

    def figure_names(self, result: DPQuantilesResult) -> list[str]:
        return ["quantiles"]

    def figure(self, name: str, asked: DPQuantilesAnalysis, result: DPQuantilesResult,
               spec: StudySpec, fmt: FigureFormat) -> bytes:
        return quantiles_figure(result.levels, result.per_center, fmt=fmt,
                                title=f"{spec.dataset}.{spec.variable}: DP quantiles "
                                      f"({result.algorithm}) of {result.group or 'all records'}"
                                      ", per center")

    def uninformative(self, index: int, asked: DPQuantilesAnalysis,
                      result: DPQuantilesResult) -> list[str | None]:
        group = result.group or "all"
        return [records_note(f"analysis {index} (dp_quantiles), {center} · {group}", h,
                             result.n.get(center))
                for center, h in result.rank_halfwidth.items()]

    def planned_errors(self, spec: StudySpec, asked: DPQuantilesAnalysis,
                       found: Found) -> tuple[float, list[PlannedError]] | None:
        errors: list[PlannedError] = []
        for c, (d, info) in found.items():
            errors += [planned(c, e) for e in quantiles_errors(
                asked.algorithm, asked.levels, asked.epsilon, declared_size(d, asked.group),
                asked.bounds, info.neighbouring)]
        return asked.epsilon, errors
