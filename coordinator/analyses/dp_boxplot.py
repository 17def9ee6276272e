"""ε-DP boxplots of one group level or every record (``{"kind": "dp_boxplot"}``;
``coordinator.protocols.boxplot``; docs/methods.md §6): each center's own box and/or the pooled
box, ε per box asked."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from coordinator.analyses.base import Analysis, Request, Spend, StudyRun
from coordinator.models import (
    AnalysisResult,
    DPBoxplotAnalysis,
    DPBoxplotResult,
    StudySpec,
)
from coordinator.protocols import federated_dp_boxplot
from coordinator.results import dp_boxplot_result
from shared.dp.pooled import COUNT_SHARE, EXTREMES_SHARE, HISTOGRAM_SHARE


class DPBoxplot(Analysis[DPBoxplotAnalysis]):
    kind = "dp_boxplot"
    spec_model = DPBoxplotAnalysis
    result_model = DPBoxplotResult
    form_label = "DP boxplots"
    figure_label = "DP boxplots"
    form_dp = True

    def requests(self, spec: StudySpec, analysis: DPBoxplotAnalysis) -> list[Request]:
        """Its own box (ε) and its pooled box: round 1, the extremes, 3ε/8; rounds 2 and 3,
        the tree histogram ε/2 and the outlier counts ε/8 (their requests follow from round 1,
        the same only for the same analysis)."""
        eps = analysis.epsilon
        box = (spec.variable, analysis.group, analysis.epsilon, analysis.bounds)
        parts: list[Request] = []
        if analysis.per_center:
            parts.append((("dp_boxplot", *box), Spend(eps)))
        if analysis.pooled:
            # As the protocol computes each round's ε (coordinator/protocols/boxplot.py).
            parts.append((("dp_extremes", *box), Spend(2 * EXTREMES_SHARE * eps)))
            parts.append((("pooled", *box, analysis.depth, analysis.branching),
                          Spend(HISTOGRAM_SHARE * eps + 2 * COUNT_SHARE * eps)))
        return parts

    def level_names(self, analysis: DPBoxplotAnalysis, index: int) -> list[tuple[str, str]]:
        return [(analysis.group, f"body.analyses.{index}.group")] if analysis.group else []

    async def run(self, study: StudyRun, analysis: DPBoxplotAnalysis) -> AnalysisResult:
        spec = study.spec
        boxes = await federated_dp_boxplot(
            study.centers, dataset=spec.dataset, variable=spec.variable, group=analysis.group,
            epsilon=analysis.epsilon, bounds=analysis.bounds,
            per_center=analysis.per_center, pooled=analysis.pooled, depth=analysis.depth,
            branching=analysis.branching, levels=analysis.levels,
            min_centers=study.min_centers, allow_partial=spec.allow_partial,
            survey=study.survey,
        )
        return dp_boxplot_result(boxes, analysis.group, analysis.bounds)

    def from_form(self, values: Mapping[str, Any], common: Mapping[str, Any]) -> dict[str, Any]:
        return {"kind": "dp_boxplot", "epsilon": common["epsilon"], "bounds": common["bounds"],
                "group": common["group"]}
