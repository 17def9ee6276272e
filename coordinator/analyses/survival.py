"""Time to an event by arm (``{"kind": "survival"}``; ``coordinator.protocols.survival``): each
center's ε-DP life table per arm on a public grid, read as Kaplan-Meier curves per center and
pooled with their bands and numbers at risk, median survival, RMST and its difference, and the
log-rank test stratified by center with Peto's hazard ratio (docs/methods.md §13). ε per arm,
per center."""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from coordinator.analyses.base import Analysis, MethodsContext, Request, Spend, StudyRun
from coordinator.models import (
    AnalysisResult,
    RMSTDifferenceResult,
    StudySpec,
    SurvivalAnalysis,
    SurvivalCurve,
    SurvivalResult,
    SurvivalTest,
)
from coordinator.protocols.survival import POOLED, ArmCurve, federated_survival
from coordinator.reporting.charts import FigureFormat, survival_figure
from coordinator.reporting.citations import works
from coordinator.reporting.export_parts import ExportPart, Row
from coordinator.reporting.notes import value_note
from coordinator.reporting.rendering import _inline, _left_out, _table, excluded_line, fmt
from coordinator.reporting.shown import Shown
from coordinator.reporting.wording import fmt as wfmt
from coordinator.results import excluded_center
from shared.dp.life_table import DPLogRankResult
from shared.protocol import DatasetInfo

# Each arm's curve per center and pooled, one row per limit.
CURVES_PART = ExportPart(
    "survival", ("analysis", "variable", "center", "arm", "time", "survival", "low", "high",
                 "at_risk", "events", "censored"), "Survival curves", 180)
# Per arm and center: median survival and RMST; the RMST difference; the log-rank tests.
SUMMARY_PART = ExportPart(
    "survival_tests", ("analysis", "variable", "quantity", "center", "arm", "estimate", "low",
                       "high", "se", "statistic", "df", "pvalue", "weights"),
    "Survival: medians, RMST and tests", 190)

WEIGHT_NAMES = {"logrank": "log-rank", "gehan": "Gehan-Breslow", "tarone-ware": "Tarone-Ware",
                "peto": "Peto-Peto"}


def _finite(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def _curve(arm: ArmCurve) -> SurvivalCurve:
    c = arm.curve
    return SurvivalCurve(
        center=arm.center, arm=arm.arm, times=c.times.tolist(), survival=c.survival.tolist(),
        low=[_finite(v) for v in c.low], high=[_finite(v) for v in c.high],
        at_risk=c.curve.at_risk.tolist(), events=arm.table.events.tolist(),
        censored=arm.table.censored.tolist(), median=_finite(arm.median.estimate),
        median_low=_finite(arm.median.low), median_high=_finite(arm.median.high),
        rmst=arm.rmst.estimate, rmst_low=arm.rmst.low, rmst_high=arm.rmst.high,
        rmst_se=arm.rmst.se, noisy_total=arm.table.noisy_total)


def _test(name: str, found: DPLogRankResult, strata: int) -> SurvivalTest:
    t = found.test
    hr = t.hazard_ratio_interval
    return SurvivalTest(
        name=name, weights=t.weights, statistic=t.statistic, df=t.df,
        pvalue=t.pvalue,
        observed_minus_expected=t.observed[1] - t.expected[1], variance=t.variance[0][0],
        noise_variance=found.noise_variance[0][0], strata=strata,
        hazard_ratio=t.hazard_ratio, hazard_ratio_low=hr[0] if hr else None,
        hazard_ratio_high=hr[1] if hr else None)


def _span(estimate: float | None, low: float | None, high: float | None) -> str:
    def one(v: float | None) -> str:
        return "not reached" if v is None else fmt(v, 3)

    return f"{one(estimate)} [{one(low)}, {one(high)}]"


class Survival(Analysis[SurvivalAnalysis, SurvivalResult]):
    kind = "survival"
    spec_model = SurvivalAnalysis
    result_model = SurvivalResult
    form_label = "Time to event: Kaplan-Meier, log-rank, RMST (DP)"
    form_widgets: ClassVar[Mapping[str, str]] = {"variable": "time_to_event"}

    def requests(self, spec: StudySpec, analysis: SurvivalAnalysis) -> list[Request]:
        arms = spec.pair or ()
        return [(("dp_life_table", analysis.variable, arm, analysis.epsilon,
                  tuple(analysis.grid)), Spend(analysis.epsilon)) for arm in arms]

    def lacking(self, spec: StudySpec, analysis: SurvivalAnalysis, index: int,
                found: DatasetInfo) -> list[tuple[str, str, str]]:
        declared = found.time_to_event.get(analysis.variable)
        if declared is None:
            return [("time-to-event variable", analysis.variable,
                     f"body.analyses.{index}.variable")]
        if analysis.horizon > declared.follow_up[1]:
            # Past a center's follow-up its table would hold noise alone: refused before any ε.
            return [("time-to-event follow-up", f"{analysis.variable} to {analysis.horizon:g}",
                     f"body.analyses.{index}.horizon")]
        return []

    def plan_notes(self, spec: StudySpec, analysis: SurvivalAnalysis, index: int,
                   size_of: Callable[[str | None], int]) -> list[str]:
        return [f"analysis {index} (survival): each center releases one ε-DP life table per "
                f"arm ({analysis.intervals} intervals of {fmt(analysis.grid[1], 3)} to "
                f"{fmt(analysis.horizon, 3)}), ε = {fmt(analysis.epsilon)} each"]

    async def run(self, study: StudyRun, analysis: SurvivalAnalysis) -> AnalysisResult:
        spec = study.spec
        assert spec.pair is not None  # min_groups = 2 (SurvivalAnalysis)
        fed = await federated_survival(
            study.survey, dataset=spec.dataset, variable=analysis.variable, arms=spec.pair,
            epsilon=analysis.epsilon, grid=analysis.grid, weights=analysis.weights,
            censoring=analysis.censoring, per_center=analysis.per_center,
            min_centers=study.min_centers, allow_partial=spec.allow_partial)
        d = fed.difference
        return SurvivalResult(
            variable=analysis.variable, epsilon=analysis.epsilon, horizon=analysis.horizon,
            grid=analysis.grid, weights=analysis.weights, censoring=analysis.censoring,
            curves=[_curve(c) for c in fed.curves],
            rmst_difference=RMSTDifferenceResult(
                horizon=d.horizon, estimate=d.estimate, se=d.se, low=d.low, high=d.high,
                pvalue=d.pvalue, sampling_se=d.sampling_se, noise_se=d.noise_se),
            tests=[_test("stratified", fed.stratified, len(fed.releases)),
                   _test("pooled", fed.pooled, 1)],
            spent=fed.spent, excluded=[excluded_center(f) for f in fed.excluded])

    # -- how it is shown -------------------------------------------------------------------------

    @staticmethod
    def _rows(result: Mapping[str, Any]) -> list[list[Any]]:
        return [[f"{c['center']} · {c['arm']}", c["noisy_total"],
                 _span(c["median"], c["median_low"], c["median_high"]),
                 f"{fmt(c['rmst'], 3)} [{fmt(c['rmst_low'], 3)}, {fmt(c['rmst_high'], 3)}]"]
                for c in result["curves"]]

    @staticmethod
    def _test_line(test: Mapping[str, Any]) -> str:
        hr = ""
        if test.get("hazard_ratio") is not None:
            hr = (f", HR {fmt(test['hazard_ratio'], 3)} [{fmt(test['hazard_ratio_low'], 3)}, "
                  f"{fmt(test['hazard_ratio_high'], 3)}]")
        what = ("stratified by center" if test["name"] == "stratified"
                else "of the pooled tables")
        return (f"{WEIGHT_NAMES.get(test['weights'], test['weights'])} test {what}: χ² "
                f"{fmt(test['statistic'], 4)}, df {test['df']}, p = {fmt(test['pvalue'], 3)}"
                f"{hr}")

    def summary_lines(self, result: dict[str, Any], view: dict[str, Any],
                      shown: Sequence[str]) -> list[str]:
        d = result["rmst_difference"]
        lines = [f"Time to event {result['variable']} (ε-DP life tables, ε = "
                 f"{fmt(result['epsilon'])} per arm per center; grid 0 to "
                 f"{fmt(result['horizon'])}): median [95 %], RMST to {fmt(result['horizon'])}:"]
        lines += excluded_line(result)
        for label, n, median, rmst in self._rows(result):
            if label.startswith(POOLED):
                lines.append(f"  {label:<24} n ≈ {fmt(n, 4):>6}  median {median}  RMST {rmst}")
        lines.append(f"  RMST difference {fmt(d['estimate'], 3)} [{fmt(d['low'], 3)}, "
                     f"{fmt(d['high'], 3)}], p = {fmt(d['pvalue'], 3)}")
        lines += [f"  {self._test_line(t)}" for t in result["tests"]]
        return lines

    def report_parts(self, result: dict[str, Any], view: dict[str, Any]) -> list[str]:
        esc = html.escape
        parts = [f"<h2>{esc('Time to event: ' + result['variable'])}</h2>"]
        parts += _left_out(result)
        pooled = [c for c in result["curves"] if c["center"] == POOLED]
        parts.append(_inline(survival_figure(
            pooled, title=f"{result['variable']}: Kaplan-Meier curves (pooled, ε-DP life "
                          "tables)", unit=result.get("unit"))))
        parts.append(_table(["center · arm", "n (noisy)", "median [95 %]",
                             f"RMST to {fmt(result['horizon'])} [95 %]"], self._rows(result)))
        d = result["rmst_difference"]
        parts.append(f"<p>RMST difference (second arm − first) {esc(fmt(d['estimate'], 3))} "
                     f"[{esc(fmt(d['low'], 3))}, {esc(fmt(d['high'], 3))}], p = "
                     f"{esc(fmt(d['pvalue'], 3))}; the noise's share of its SE "
                     f"{esc(fmt(d['noise_se'], 3))} of {esc(fmt(d['se'], 3))}.</p>")
        parts += [f"<p>{esc(self._test_line(t))}</p>" for t in result["tests"]]
        parts.append("<p class='note'>Each center released, per arm, the events and "
                     "censorings in each interval of the public grid with Laplace noise; every "
                     "interval and test carries the noise's variance besides the sampling "
                     "variance (docs/methods.md §13.1). The numbers at risk are those of the "
                     "noisy counts, projected onto counts ≥ 0.</p>")
        return parts

    # -- how it is written up --------------------------------------------------------------------

    algorithm_name = ("ε-DP life tables per arm and center (Laplace), Kaplan-Meier curves, "
                      "Brookmeyer-Crowley medians, RMST, log-rank stratified by center")
    references = works("kaplan_meier", "greenwood", "cutler", "brookmeyer", "mantel_logrank",
                       "yusuf", "royston", "dwork_roth")

    def methods(self, asked: SurvivalAnalysis, result: SurvivalResult,
                context: MethodsContext) -> list[str]:
        for key in self.references:
            context.cite(key)
        reading = ("the actuarial life-table estimator (censorings at risk for half their "
                   "interval; Cutler & Ederer 1958)" if asked.censoring == "actuarial" else
                   "the Kaplan-Meier estimator with every time at its interval's end")
        return [
            f"Time to {asked.variable} was analysed from each center's ε-DP life table per arm "
            f"(events and censorings in {asked.intervals} intervals from 0 to "
            f"{wfmt(asked.horizon)}, Laplace noise at ε = {wfmt(asked.epsilon)} per arm; Dwork "
            "& Roth 2014), the centers' noisy counts summed for the pooled curves.",
            "Survival curves were read as Kaplan-Meier products over the intervals (Kaplan & "
            f"Meier 1958) with {reading}, their 95 % bands from Greenwood's (1926) variance "
            "plus the noise's (delta method) on the log-log scale, median "
            "survival with the Brookmeyer-Crowley (1982) interval, the restricted mean "
            f"survival time to {wfmt(asked.horizon)} and its difference between arms (Royston & "
            f"Parmar 2013), and the arms compared by the {WEIGHT_NAMES[asked.weights]} test "
            "stratified by center (Mantel 1966) with Peto's hazard ratio (Yusuf et al. 1985)."]

    export_parts = (CURVES_PART, SUMMARY_PART)

    def export_rows(self, part: ExportPart, index: int, asked: SurvivalAnalysis,
                    result: SurvivalResult, study: Shown) -> list[Row]:
        base = {"analysis": index, "variable": result.variable}
        if part is CURVES_PART:
            return [{**base, "center": c.center, "arm": c.arm, "time": t, "survival": s,
                     "low": lo, "high": hi, "at_risk": n,
                     "events": c.events[j] if j < len(c.events) else None,
                     "censored": c.censored[j] if j < len(c.censored) else None}
                    for c in result.curves
                    for j, (t, s, lo, hi, n) in enumerate(zip(c.times, c.survival, c.low,
                                                              c.high, c.at_risk, strict=True))]
        rows: list[Row] = []
        for c in result.curves:
            rows.append({**base, "quantity": "median", "center": c.center, "arm": c.arm,
                         "estimate": c.median, "low": c.median_low, "high": c.median_high})
            rows.append({**base, "quantity": f"rmst_{wfmt(result.horizon)}", "center": c.center,
                         "arm": c.arm, "estimate": c.rmst, "low": c.rmst_low,
                         "high": c.rmst_high, "se": c.rmst_se})
        d = result.rmst_difference
        rows.append({**base, "quantity": "rmst_difference", "center": POOLED,
                     "estimate": d.estimate, "low": d.low, "high": d.high, "se": d.se,
                     "pvalue": d.pvalue})
        for t in result.tests:
            rows.append({**base, "quantity": f"{t.name}_test", "center": POOLED,
                         "estimate": t.hazard_ratio, "low": t.hazard_ratio_low,
                         "high": t.hazard_ratio_high, "statistic": t.statistic, "df": t.df,
                         "pvalue": t.pvalue, "weights": t.weights})
        return rows

    figure_labels: ClassVar[Mapping[str, str]] = {"survival": "Kaplan-Meier curves"}

    def figure_names(self, result: SurvivalResult) -> list[str]:
        return ["survival"]

    def figure(self, name: str, asked: SurvivalAnalysis, result: SurvivalResult,
               spec: StudySpec, fmt: FigureFormat) -> bytes:
        pooled = [c.model_dump() for c in result.curves if c.center == POOLED]
        return survival_figure(pooled, title=f"{spec.dataset}.{result.variable}: Kaplan-Meier "
                                             "curves (pooled, ε-DP life tables)",
                               unit=result.unit, fmt=fmt)

    def uninformative(self, index: int, asked: SurvivalAnalysis,
                      result: SurvivalResult) -> list[str | None]:
        """Each curve's RMST whose interval is wide against the horizon (its range, [0, τ]):
        the noise or too few records leave little to read."""
        return [value_note(f"analysis {index} (survival), {c.center} · {c.arm}, RMST",
                           (c.rmst_low, c.rmst_high), (0.0, result.horizon))
                for c in result.curves]
