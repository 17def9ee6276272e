"""Each center's ε-DP quantiles of one group level or every record (``{"kind":
"dp_quantiles"}``; ``coordinator.protocols.dp_quantiles``): ε per center."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from coordinator.analyses.base import Analysis, Request, Spend, StudyRun, form_levels
from coordinator.models import (
    AnalysisResult,
    DPQuantilesAnalysis,
    DPQuantilesResult,
    StudySpec,
)
from coordinator.protocols import center_dp_quantiles
from coordinator.results import dp_quantiles_result


class DPQuantiles(Analysis[DPQuantilesAnalysis]):
    kind = "dp_quantiles"
    spec_model = DPQuantilesAnalysis
    result_model = DPQuantilesResult
    form_label = "DP quantiles (per center)"
    form_dp = True

    def requests(self, spec: StudySpec, analysis: DPQuantilesAnalysis) -> list[Request]:
        return [(("dp_quantiles", spec.variable, analysis.group, analysis.epsilon,
                  analysis.bounds, tuple(analysis.levels), analysis.algorithm),
                 Spend(analysis.epsilon))]

    def level_names(self, analysis: DPQuantilesAnalysis, index: int) -> list[tuple[str, str]]:
        return [(analysis.group, f"body.analyses.{index}.group")] if analysis.group else []

    async def run(self, study: StudyRun, analysis: DPQuantilesAnalysis) -> AnalysisResult:
        spec = study.spec
        quantiles = await center_dp_quantiles(
            study.centers, dataset=spec.dataset, variable=spec.variable, group=analysis.group,
            levels=analysis.levels, epsilon=analysis.epsilon, bounds=analysis.bounds,
            algorithm=analysis.algorithm, min_centers=study.min_centers,
            allow_partial=spec.allow_partial, survey=study.survey,
        )
        return dp_quantiles_result(quantiles, analysis.group)

    def from_form(self, values: Mapping[str, Any], common: Mapping[str, Any]) -> dict[str, Any]:
        return {"kind": "dp_quantiles", "epsilon": common["epsilon"],
                "bounds": common["bounds"], "levels": form_levels(values),
                "group": common["group"]}
