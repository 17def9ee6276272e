"""The differentially private twin of the federated Mann-Whitney tests (``{"kind": "dp_mwu"}``;
``coordinator.protocols.dp_mwu``, docs/methods.md §3.10): each center's ε-DP release under
add/remove (noisy sizes, U over at most M records per level + Laplace(2M/ε₂)), the sum,
weighted and Fisher tests over them, the probabilistic index with an interval that accounts for
the noise, and the dry run's power. Not exact, so centers in DP mode answer it."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from coordinator.analyses.base import Analysis, MethodsContext, Request, Spend, StudyRun
from coordinator.analyses.mwu import (
    HETEROGENEITY_PART,
    MANN_WHITNEY_PARTS,
    MWU,
    POWER_ALPHA,
    POWER_TARGET,
    POWER_THETAS,
    TEST_NAMES,
    effects_chart,
    mann_whitney_figure_names,
    mann_whitney_rows,
    side_of,
)
from coordinator.models import (
    AnalysisResult,
    DPMWUAnalysis,
    DPMWUResult,
    PlannedPower,
    StudySpec,
)
from coordinator.protocols import federated_dp_mwu
from coordinator.reporting.charts import FigureFormat
from coordinator.reporting.citations import works
from coordinator.reporting.export_parts import ExportPart, Row
from coordinator.reporting.rendering import _table, fmt
from coordinator.reporting.shown import Shown
from coordinator.reporting.wording import fmt as wfmt
from coordinator.reporting.wording import join
from coordinator.results import dp_mwu_result
from shared.mwu_power import sum_test_power_table

POWER_METHOD = (
    "sum test at α = 0.05 as for mwu (shared.mwu_power), each center's noise Laplace(2M/ε₂) "
    "with M taken as max(n, m) and ε₂ = (1 − size_share)·ε; the noise of the sizes and of the "
    "null variance read from them is not modelled (docs/methods.md §3.10)")

RELEASE_NOTE = (
    "Each center released its two levels' sizes with Laplace(1/ε₁) noise, a public cap M "
    "read off them, and U = Σ sign(Y − X) over at most M records of each level (a uniform "
    "subset of a larger level) plus Laplace(2M/ε₂) noise: ε₁ + ε₂ = ε under add/remove "
    "neighbours. The tests use the no-ties null variance of the kept sizes' estimates "
    "(conservative with ties) and the exact law of normal + the Laplace noise "
    "(docs/methods.md §3.10).")


DP_MWU_COLUMNS = ("analysis", "center", "n_x_hat", "n_y_hat", "cap", "epsilon", "size_epsilon",
                  "u_epsilon", "noise_scale", "n_x", "n_y")
# What each center released for each dp_mwu analysis, and the sizes its tests used.
DP_MWU_RELEASES_PART = ExportPart("dp_mwu_releases", DP_MWU_COLUMNS, "DP releases", 170)


class DPMWU(Analysis[DPMWUAnalysis, DPMWUResult]):
    kind = "dp_mwu"
    spec_model = DPMWUAnalysis
    result_model = DPMWUResult
    form_label = "Mann-Whitney tests, differentially private (DP mode)"

    summary_rank = 1
    report_rank = 0

    def requests(self, spec: StudySpec, analysis: DPMWUAnalysis) -> list[Request]:
        return [(("dp_mwu", spec.variable, spec.groups, analysis.epsilon, analysis.size_share),
                 Spend(analysis.epsilon))]

    def exact(self, spec: StudySpec, analysis: DPMWUAnalysis) -> bool:
        """Never: every number a center releases for it is ε-DP under add/remove."""
        return False

    def power(self, spec: StudySpec, analysis: DPMWUAnalysis, index: int,
              sizes: Mapping[str, tuple[int, int]]) -> PlannedPower | None:
        u_epsilon = analysis.epsilon * (1.0 - analysis.size_share)
        table = sum_test_power_table(
            list(sizes.values()), epsilon=u_epsilon, alpha=POWER_ALPHA,
            alternative=analysis.alternative, thetas=POWER_THETAS, target=POWER_TARGET)
        shown = ", ".join(f"{p:.2f} at θ = {t:g}"
                          for t, p in zip(table.thetas, table.power, strict=True))
        reach = (f"80 % power needs θ >= {table.theta_at_target:.3f}"
                 if table.theta_at_target is not None else "no θ reaches 80 % power")
        detail = (f"the DP sum test at ε = {analysis.epsilon:g} (ε₂ = {u_epsilon:g} on U) has "
                  f"power {shown}; {reach}")
        return PlannedPower(
            analysis=index, epsilon=analysis.epsilon, alpha=POWER_ALPHA,
            alternative=analysis.alternative, sizes=dict(sizes), thetas=list(table.thetas),
            power=list(table.power), target=POWER_TARGET,
            theta_at_target=table.theta_at_target, method=POWER_METHOD, detail=detail)

    def summary_lines(self, result: dict[str, Any], view: dict[str, Any],
                      shown: Sequence[str]) -> list[str]:
        lines = MWU().summary_lines(result, view, shown)
        lines[0] = f"DP {lines[0]}"
        releases = result.get("releases") or []
        if releases:
            lines.append(f"  {'center':<14}{'n̂_X':>9}{'n̂_Y':>9}{'M':>7}{'ε':>7}"
                         f"{'Laplace b':>11}")
            for r in releases:
                lines.append(f"  {r['center']:<14}{fmt(r['n_x_hat'], 4):>9}"
                             f"{fmt(r['n_y_hat'], 4):>9}{r['cap']:>7}{fmt(r['epsilon']):>7}"
                             f"{fmt(r['noise_scale'], 4):>11}")
        return lines

    def report_parts(self, result: dict[str, Any], view: dict[str, Any]) -> list[str]:
        parts = MWU().report_parts(result, view)
        parts[0] = parts[0].replace("<h2>Mann-Whitney", "<h2>DP Mann-Whitney", 1)
        releases = result.get("releases") or []
        if releases:
            parts.append("<h3>What each center released (ε-DP, add/remove)</h3>")
            parts.append(_table(
                ["center", "n̂_X", "n̂_Y", "cap M", "ε", "ε₁ (sizes)", "ε₂ (U)",
                 "Laplace scale on U", "n_X, n_Y used"],
                [[r["center"], r["n_x_hat"], r["n_y_hat"], r["cap"], r["epsilon"],
                  r["size_epsilon"], r["u_epsilon"], r["noise_scale"],
                  f"{r['n_x']}, {r['n_y']}"] for r in releases]))
        parts.append(f"<p>{html.escape(RELEASE_NOTE)}</p>")
        return parts

    async def run(self, study: StudyRun, analysis: DPMWUAnalysis) -> AnalysisResult:
        spec = study.spec
        groups = spec.pair
        assert groups is not None  # StudySpec refuses dp_mwu without groups
        fed = await federated_dp_mwu(
            study.centers, dataset=spec.dataset, variable=spec.variable, groups=groups,
            epsilon=analysis.epsilon, size_share=analysis.size_share, k=spec.k,
            tests=analysis.tests, alternative=analysis.alternative,
            min_centers=study.min_centers, allow_partial=spec.allow_partial,
            survey=study.survey)
        return dp_mwu_result(fed, analysis.alternative)

    # -- how it is written up --------------------------------------------------------------------

    algorithm_name = ("the DP twin of the federated Mann-Whitney tests under add/remove: noisy "
                      "sizes, U over at most M records per level + Laplace(2M/ε₂) per center "
                      "(docs/methods.md §3.10); probabilistic index with Newcombe's (2006) "
                      "Method 5 score interval under the noise")
    references = works("becher", "dwork", "fisher", "acion", "newcombe", "cousins")

    def algorithm(self, asked: DPMWUAnalysis) -> str:
        return (f"{self.algorithm_name}; tests {', '.join(asked.tests)}, {asked.alternative}; "
                f"ε = {asked.epsilon:g} per center, {asked.size_share:g} of it on the sizes")

    def methods(self, asked: DPMWUAnalysis, result: DPMWUResult,
                context: MethodsContext) -> list[str]:
        context.cite("becher")
        context.cite("dwork")
        if "fisher" in asked.tests:
            context.cite("fisher")
        names = join([TEST_NAMES[t] for t in asked.tests])
        said = [
            f"Groups were compared by a differentially private version of the federated "
            f"Mann-Whitney tests of Becher et al. (2023): {names}; all "
            f"{side_of(asked.alternative)}. Each center spent ε = {wfmt(asked.epsilon)} under "
            f"add/remove neighbours: {wfmt(asked.size_share)} of it on Laplace-noised sizes of "
            "the two groups, the rest on its U statistic computed over at most M records per "
            "group (M read off the noisy sizes; a uniform subset of a larger group) plus "
            "Laplace noise of scale 2M over that ε (Dwork et al. 2006); the p-values come from "
            "the exact law of the statistic's normal approximation plus the noise, with the "
            "no-ties null variance of the noisy sizes (conservative with ties)."]
        said += context.primary_sentence()
        for key in ("acion", "newcombe", "cousins"):
            context.cite(key)
        said.append("The effect size is the probabilistic index θ = P(Y > X) + ½·P(Y = X) "
                    "(Acion et al. 2006) read from the noisy statistic and sizes, per center "
                    "and stratified, with 95 % score-type intervals (the variance of "
                    "Newcombe 2006, Method 5, at each candidate θ) that add the Laplace "
                    "noise on U and integrate the noisy sizes out over their known error "
                    "law (Cousins & Highland 1992); the estimate is the median of that "
                    "confidence distribution.")
        return said

    export_parts = (*MANN_WHITNEY_PARTS, DP_MWU_RELEASES_PART)

    def export_rows(self, part: ExportPart, index: int, asked: DPMWUAnalysis,
                    result: DPMWUResult, study: Shown) -> list[Row]:
        if part is DP_MWU_RELEASES_PART:
            return [{"analysis": index, **{k: getattr(r, k) for k in DP_MWU_COLUMNS[1:]}}
                    for r in result.releases]
        return mann_whitney_rows(part, index, result, study.spec)

    def export_rank(self, part: ExportPart) -> int:
        # The heterogeneity table has listed the exact analyses' rows first.
        return 1 if part is HETEROGENEITY_PART else 0

    figure_labels: ClassVar[Mapping[str, str]] = {"effects": "effect sizes"}

    def figure_names(self, result: DPMWUResult) -> list[str]:
        return mann_whitney_figure_names(result)

    def figure(self, name: str, asked: DPMWUAnalysis, result: DPMWUResult, spec: StudySpec,
               fmt: FigureFormat) -> bytes:
        return effects_chart(result, spec, fmt)
