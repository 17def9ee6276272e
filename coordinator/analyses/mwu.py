"""Federated Mann-Whitney tests of X against Y (``{"kind": "mwu"}``;
``coordinator.protocols.mwu``): each center's local U (noised with ``epsilon`` when given) and,
with the ``table`` test, the study's federated table; the dry run shows the sum test's power."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

from coordinator.analyses.base import Analysis, Request, Spend, StudyRun
from coordinator.models import (
    MWU_TESTS,
    AnalysisResult,
    MWUAnalysis,
    MWUResult,
    PlannedPower,
    StudySpec,
)
from coordinator.protocols import federated_mwu
from coordinator.reporting.rendering import (
    EFFECT_NOTE,
    _left_out,
    _table,
    effect_rows,
    fmt,
    left_out,
    marked_primary,
    mwu_test_rows,
    null_label,
    primary_test,
)
from coordinator.results import mwu_result
from shared.mwu_power import sum_test_power_table

# The tests of an MWU whose local U each center releases (noised with the analysis's ε); the
# table test reads the study's K-anonymous table and spends nothing.
LOCAL_MWU_TESTS = frozenset(MWU_TESTS) - {"table"}

POWER_ALPHA = 0.05
POWER_THETAS = (0.6, 0.7)
POWER_TARGET = 0.8
POWER_METHOD = (
    "sum test at α = 0.05; U_l under a common θ = P(Y > X) + ½P(Y = X) approximately normal "
    "with mean n·m·(2θ − 1) and Newcombe's variance, convolved exactly with each center's "
    "Laplace(2·max(n, m)/ε) noise (shared.mwu_power; docs/methods.md §3.9)")


HETEROGENEITY_NOTE = (
    "Cochran's Q weighs each center's θ̂ by the inverse of its variance (Newcombe's at the "
    "pooled θ, plus the noise's share for a noisy release) and is referred to χ² on (centers − "
    "1) df; I² = "
    "max(0, (Q − df)/Q) is the share of the spread beyond chance, with the Q-profile "
    "interval (Viechtbauer 2007); τ² is DerSimonian & Laird's. With few small centers Q has "
    "little power (docs/methods.md §12.4).")


def _share(value: Any) -> str:
    return f"{fmt(100 * float(value), 3)} %"


def heterogeneity_text(mwu: dict[str, Any]) -> str | None:
    """One line on the centers' heterogeneity (or why there is none); none in results stored
    before it was computed."""
    h = mwu.get("heterogeneity")
    if h is None:
        return mwu.get("heterogeneity_note")
    interval = h.get("i_squared_interval")
    within = (f" [{_share(interval[0])}, {_share(interval[1])}]" if interval is not None
              else " (no interval with two centers and Q <= 2)")
    return (f"Cochran's Q = {fmt(h['statistic'])} on {h['df']} df, p = {fmt(h['pvalue'])}; "
            f"I² = {_share(h['i_squared'])}{within}; τ² = {fmt(h['tau_squared'])}"
            f"{_tau_interval(h)}{_variance_at(h)}")


def _tau_interval(h: dict[str, Any]) -> str:
    interval = h.get("tau_squared_interval")  # none in results stored before it was computed
    return "" if interval is None else f" [{fmt(interval[0])}, {fmt(interval[1])}]"


def _variance_at(h: dict[str, Any]) -> str:
    at = h.get("variance_at")
    return "" if at is None else f" (each center's variance at the pooled θ = {fmt(at, 3)})"


class MWU(Analysis[MWUAnalysis]):
    kind = "mwu"
    spec_model = MWUAnalysis
    result_model = MWUResult
    form_label = "Mann-Whitney tests"
    dp_alternative = ("dp_mwu (the DP twin of these tests: sum, weighted, Fisher), or "
                      "dp_quantiles or dp_boxplot of each level (`group`)")

    summary_rank = 1
    report_rank = 0

    def summary_lines(self, result: dict[str, Any], view: dict[str, Any],
                      shown: Sequence[str]) -> list[str]:
        mwu, lines = result, []
        lines.append(f"Mann-Whitney tests ({mwu['alternative']}):")
        if left_out(mwu):
            lines.append(f"  left out: {left_out(mwu)}")
        lines.append(f"  {'test':<10}{'statistic':>14}{'p-value':>14}  law under H0")
        rows = mwu_test_rows(mwu)
        for name, statistic, law, pvalue in marked_primary(view, mwu, rows, short=True):
            lines.append(f"  {name:<10}{fmt(statistic):>14}{fmt(pvalue):>14}  {law}")
        if marked_primary(view, mwu, rows, short=True) != rows:
            primary = primary_test(view)
            assert primary is not None
            lines.append(f"  * the primary test (pre-specified), at α = {fmt(primary[2])}")
        if mwu.get("effects"):
            lines.append("  Effect θ = P(Y > X) + ½P(Y = X) with its 95 % interval:")
            lines.append(f"  {'center':<14}{'n_X':>7}{'n_Y':>7}{'θ':>9}  95 % interval")
            for center, n_x, n_y, est, ci in effect_rows(mwu):
                lines.append(f"  {center:<14}{fmt(n_x):>7}{fmt(n_y):>7}"
                             f"{fmt(est, 3):>9}  {ci}")
        if heterogeneity_text(mwu):
            lines.append(f"  Between centers: {heterogeneity_text(mwu)}")
        return lines

    def report_parts(self, result: dict[str, Any], view: dict[str, Any]) -> list[str]:
        mwu, esc = result, html.escape
        parts = [f"<h2>Mann-Whitney tests ({esc(mwu['alternative'])})</h2>"]
        parts += _left_out(mwu)
        parts.append(_table(["test", "statistic", "law under H0", "p-value"],
                            marked_primary(view, mwu, mwu_test_rows(mwu))))
        if mwu.get("effects"):
            parts.append("<h3>Effect size</h3>")
            parts.append(_table(["center", "n_X", "n_Y", "θ", "95 % interval"],
                                effect_rows(mwu)))
            parts.append(f"<p>{esc(EFFECT_NOTE)}</p>")
        if mwu.get("heterogeneity") is not None:
            h = mwu["heterogeneity"]
            interval = h.get("i_squared_interval")
            parts.append("<h3>Heterogeneity between centers</h3>")
            parts.append(_table(
                ["Cochran's Q", "df", "p-value", "I²", f"I² {_share(h['level'])} interval",
                 "τ²", f"τ² {_share(h['level'])} interval", "variances at θ"],
                [[h["statistic"], h["df"], h["pvalue"], _share(h["i_squared"]),
                  f"[{_share(interval[0])}, {_share(interval[1])}]" if interval is not None
                  else "none (two centers, Q <= 2)", h["tau_squared"],
                  _tau_interval(h).strip() or "—",
                  "—" if h.get("variance_at") is None else h["variance_at"]]]))
            parts.append(f"<p>{esc(HETEROGENEITY_NOTE)}</p>")
        elif mwu.get("heterogeneity_note"):
            parts.append(f"<p class='note'>Heterogeneity between centers: "
                         f"{esc(mwu['heterogeneity_note'])}</p>")
        local = mwu["tests"].get("sum") or next(iter(mwu["tests"].values()))
        parts.append("<p>Each center's local test (its part of the sum test):</p>")
        parts.append(_table(["center", "U = Σ sign(Y − X)", "variance", "z", "p-value",
                             "p from", "weight"],
                            [[p["center"], p["statistic"], p["variance"], p["zstatistic"],
                              p["pvalue"], null_label(p.get("null")) or "N(0, 1)",
                              p["weight"]] for p in local["parts"]]))
        return parts

    def requests(self, spec: StudySpec, analysis: MWUAnalysis) -> list[Request]:
        if analysis.epsilon is None or not LOCAL_MWU_TESTS & set(analysis.tests):
            return []
        return [(("mwu", spec.variable, spec.groups, analysis.epsilon),
                 Spend(analysis.epsilon))]

    def exact(self, spec: StudySpec, analysis: MWUAnalysis) -> bool:
        """Always: even with ε a center's U shows its levels' exact sizes (and the noise scale
        2·max(n, m)/ε), so a center in DP mode refuses it (``center_agent.gate.kinds.MWUKind``).
        """
        return True

    def needs_table(self, analysis: MWUAnalysis) -> bool:
        return "table" in analysis.tests

    def power(self, spec: StudySpec, analysis: MWUAnalysis, index: int,
              sizes: Mapping[str, tuple[int, int]]) -> PlannedPower | None:
        table = sum_test_power_table(
            list(sizes.values()), epsilon=analysis.epsilon, alpha=POWER_ALPHA,
            alternative=analysis.alternative, thetas=POWER_THETAS, target=POWER_TARGET)
        noise = (f"at ε = {analysis.epsilon:g}" if analysis.epsilon is not None
                 else "without noise")
        shown = ", ".join(f"{p:.2f} at θ = {t:g}"
                          for t, p in zip(table.thetas, table.power, strict=True))
        reach = (f"80 % power needs θ >= {table.theta_at_target:.3f}"
                 if table.theta_at_target is not None
                 else "no θ reaches 80 % power")
        detail = f"the sum test {noise} has power {shown}; {reach}"
        if table.power[-1] < 2 * POWER_ALPHA:
            detail += (" — about the level α itself: the noise swamps U, so the test can "
                       "hardly detect any effect (more ε, or more records, or no noise)")
        return PlannedPower(
            analysis=index, epsilon=analysis.epsilon, alpha=POWER_ALPHA,
            alternative=analysis.alternative, sizes=dict(sizes), thetas=list(table.thetas),
            power=list(table.power), target=POWER_TARGET,
            theta_at_target=table.theta_at_target, method=POWER_METHOD, detail=detail)

    async def run(self, study: StudyRun, analysis: MWUAnalysis) -> AnalysisResult:
        spec = study.spec
        groups = spec.pair
        assert groups is not None  # StudySpec refuses mwu without groups
        mwu = await federated_mwu(
            study.centers, dataset=spec.dataset, variable=spec.variable, groups=groups,
            k=spec.k, tests=analysis.tests, alternative=analysis.alternative,
            epsilon=analysis.epsilon, lower=study.lower, upper=study.upper,
            min_centers=study.min_centers, allow_partial=spec.allow_partial,
            survey=study.survey,
            table=study.study_table() if "table" in analysis.tests else None,
        )
        return mwu_result(mwu, analysis.alternative)
