"""Quantiles read from the study's federated table (``{"kind": "quantiles"}``; no release, no
ε), and with the ``yj_data`` estimator from the centers' ε-DP Yeo-Johnson moment sums
(``coordinator.protocols.quantiles``; docs/methods.md §8.4)."""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from coordinator.analyses.base import Analysis, MethodsContext, Request, Spend, StudyRun
from coordinator.models import AnalysisResult, QuantilesAnalysis, QuantilesResult, StudySpec
from coordinator.protocols.quantiles import (
    quantile_brackets,
    table_quantiles,
    yj_data_estimates,
)
from coordinator.reporting.charts import FigureFormat, quantiles_figure
from coordinator.reporting.citations import works
from coordinator.reporting.export_parts import ExportPart, Row
from coordinator.reporting.rendering import (
    QUANTILE_BRACKET_NOTE,
    _left_out,
    _table,
    bracket_rows,
    estimate_rows,
    excluded_line,
    fmt,
    quantiles_heading,
)
from coordinator.reporting.shown import Shown
from coordinator.reporting.wording import fmt as wfmt
from coordinator.results import quantiles_result
from shared.fields import DP_MAX_EVALUATIONS
from shared.quantiles.yj_data import YJ_DATA_MAX_NOISE_RATIO, yj_data_noise_ratio

# Each federated quantile estimate (estimator, group, level), with the table's bracket.
QUANTILES_PART = ExportPart("quantiles", None, "Quantiles", 80)


class Quantiles(Analysis[QuantilesAnalysis, QuantilesResult]):
    kind = "quantiles"
    spec_model = QuantilesAnalysis
    result_model = QuantilesResult
    form_label = "quantiles (from the table)"
    dp_alternative = ("dp_quantiles (ε-DP quantiles at the same levels), or dp_boxplot (the "
                      "pooled quartiles)")

    def requests(self, spec: StudySpec, analysis: QuantilesAnalysis) -> list[Request]:
        if "yj_data" not in analysis.estimators or analysis.epsilon is None:
            return []
        groups: tuple[str | None, ...] = tuple(spec.groups) if spec.groups is not None else (None,)
        # At most ε per group: each λ Brent tries costs ε / DP_MAX_EVALUATIONS, it may stop
        # early; Brent's λs follow from the answers, so the same fit asks the same requests.
        return [(("yj_data", spec.variable, g, analysis.epsilon, analysis.bounds),
                 Spend(analysis.epsilon, exact=False)) for g in groups]

    def needs_table(self, analysis: QuantilesAnalysis) -> bool:
        return True

    note_reason = "estimator_not_offered"

    def plan_notes(self, spec: StudySpec, analysis: QuantilesAnalysis, index: int,
                   size_of: Callable[[str | None], int]) -> list[str]:
        """Why its YJ data would not be offered, per group: the gate the run applies before
        asking anything (``coordinator.protocols.quantiles``), on the sizes the taking-part
        centers declare. Not blocking: the other estimators run, nothing is spent on YJ data,
        and the planned ε is an upper bound."""
        if not ("yj_data" in analysis.estimators and analysis.epsilon is not None
                and analysis.bounds is not None):
            return []
        out = []
        groups: tuple[str | None, ...] = tuple(spec.groups) if spec.groups is not None else (None,)
        for group in groups:
            ratio = yj_data_noise_ratio(analysis.epsilon, analysis.bounds, size_of(group),
                                        DP_MAX_EVALUATIONS)
            if ratio > YJ_DATA_MAX_NOISE_RATIO:
                out.append(f"analysis {index} (quantiles): YJ data "
                           f"{'of ' + repr(group) + ' ' if group is not None else ''}would not "
                           f"be offered: the noise on its fitted variance would be {ratio:.2g} "
                           f"of the widest the bounds allow (at most {YJ_DATA_MAX_NOISE_RATIO:g}"
                           " can work; docs/methods.md §8.4): raise ε or narrow the bounds")
        return out

    def summary_lines(self, result: dict[str, Any], view: dict[str, Any],
                      shown: Sequence[str]) -> list[str]:
        analysis = result
        levels = analysis["levels"]
        lines = [quantiles_heading(analysis) + " (estimator · group: "
                 + ", ".join(f"q{fmt(lv, 3)}" for lv in levels) + "):"]
        lines += excluded_line(analysis)
        for label, values, error in estimate_rows(analysis):
            shown_values = ("  ".join(f"{fmt(v, 3):>6}" for v in values) if values is not None
                            else f"not estimated: {error}")
            lines.append(f"  {label:<28}{shown_values}")
        for label, shown_brackets in bracket_rows(analysis):
            lines.append(f"  {label:<28}" + "  ".join(shown_brackets))
        if analysis.get("brackets"):
            lines.append(f"  {QUANTILE_BRACKET_NOTE}")
        return lines

    def report_parts(self, result: dict[str, Any], view: dict[str, Any]) -> list[str]:
        analysis, esc = result, html.escape
        parts = [f"<h2>{esc(quantiles_heading(analysis))}</h2>"]
        parts += _left_out(analysis)
        levels = analysis["levels"]
        parts.append(_table(
            ["estimator · group", *(f"q{fmt(lv, 3)}" for lv in levels)],
            [[label, *values] if values is not None
             else [label, f"not estimated: {error}", *([""] * (len(levels) - 1))]
             for label, values, error in estimate_rows(analysis)]
            + [[label, *shown] for label, shown in bracket_rows(analysis)]))
        if analysis.get("brackets"):
            parts.append(f"<p class='note'>{esc(QUANTILE_BRACKET_NOTE)}</p>")
        return parts

    async def run(self, study: StudyRun, analysis: QuantilesAnalysis) -> AnalysisResult:
        spec, survey = study.spec, study.survey
        table = await study.study_table()
        names = list(spec.groups) if spec.groups is not None else ["all"]
        estimates = table_quantiles(table.table, analysis.levels,
                                    estimators=analysis.estimators, groups=names)
        if "yj_data" in analysis.estimators:
            assert analysis.epsilon is not None and analysis.bounds is not None
            estimates["yj_data"] = await yj_data_estimates(
                survey.usable, dataset=spec.dataset, variable=spec.variable,
                groups=list(spec.groups) if spec.groups is not None else [None],
                names=names, levels=analysis.levels, epsilon=analysis.epsilon,
                bounds=analysis.bounds,
                sizes=[sum(survey.declared[c.center_id][g] for c in survey.usable)
                       for g in range(len(names))],
            )
        return quantiles_result(estimates, analysis.levels, table, quantile_brackets(
            table.table, analysis.levels, groups=names))

    # -- how it is written up --------------------------------------------------------------------

    algorithm_name = ("quantile estimators on the federated table (Becher, Marcus-Kalish & "
                      "Steinberg 2023, §7)")
    references = works("becher")

    def algorithm(self, asked: QuantilesAnalysis) -> str:
        return f"{self.algorithm_name} ({', '.join(asked.estimators)})"

    def methods(self, asked: QuantilesAnalysis, result: QuantilesResult,
                context: MethodsContext) -> list[str]:
        context.cite("becher")
        return ["Quantiles at levels " + ", ".join(wfmt(v) for v in asked.levels)
                + " were estimated from the federated table (Becher et al. 2023, §7; "
                "estimators " + ", ".join(asked.estimators or ["default"]) + ")."]

    export_parts = (QUANTILES_PART,)

    def export_rows(self, part: ExportPart, index: int, asked: QuantilesAnalysis,
                    result: QuantilesResult, study: Shown) -> list[Row]:
        levels = result.levels
        rows: list[Row] = []
        for estimator, by_group in result.estimates.items():
            for group, est in by_group.items():
                values: Sequence[float | None] = est.quantiles or [None] * len(levels)
                bracket = result.brackets.get(group) or []
                for i, (level, value) in enumerate(zip(levels, values, strict=True)):
                    low, high = bracket[i] if i < len(bracket) else (None, None)
                    rows.append({"analysis": index, "estimator": estimator, "group": group,
                                 "level": level, "value": value, "error": est.error,
                                 "bracket_low": low, "bracket_high": high})
        return rows

    figure_labels: ClassVar[Mapping[str, str]] = {"quantiles": "quantiles"}

    def figure_names(self, result: QuantilesResult) -> list[str]:
        return ["quantiles"] if any(e.quantiles for by in result.estimates.values()
                                    for e in by.values()) else []

    def figure(self, name: str, asked: QuantilesAnalysis, result: QuantilesResult,
               spec: StudySpec, fmt: FigureFormat) -> bytes:
        series = {f"{estimator} · {group}": e.quantiles
                  for estimator, by_group in result.estimates.items()
                  for group, e in by_group.items() if e.quantiles is not None}
        return quantiles_figure(result.levels, series, fmt=fmt,
                                title=f"{spec.dataset}.{spec.variable}: federated quantiles")
