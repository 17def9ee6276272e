"""Federated Mann-Whitney tests of X against Y (``{"kind": "mwu"}``;
``coordinator.protocols.mwu``): each center's local U (noised with ``epsilon`` when given) and,
with the ``table`` test, the study's federated table; the dry run shows the sum test's power."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from coordinator.analyses.base import Analysis, MethodsContext, Request, Spend, StudyRun
from coordinator.analyses.table import table_chart
from coordinator.models import (
    MWU_TESTS,
    AnalysisResult,
    MWUAnalysis,
    MWUResult,
    PlannedPower,
    StudySpec,
)
from coordinator.protocols import federated_mwu
from coordinator.reporting.charts import FigureFormat, effects_figure
from coordinator.reporting.citations import works
from coordinator.reporting.export_parts import ExportPart, Row
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
from coordinator.reporting.shown import Shown
from coordinator.reporting.wording import fmt as wfmt
from coordinator.reporting.wording import join
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


TEST_NAMES = {
    "sum": "the sum test (the centers' Mann-Whitney U statistics summed over their null "
           "variances)",
    "weighted": "the weighted test (the centers' z-values weighted by n·m/√V)",
    "fisher": "Fisher's combination of the centers' p-values (χ² with 2L degrees of freedom; "
              "two-sided by doubling the smaller one-sided p)",
    "table": "the Mann-Whitney test on the federated table (records in one bin tied)",
}
SIDES = {"two-sided": "two-sided", "less": "one-sided (alternative: X tends to be smaller "
         "than Y)", "greater": "one-sided (alternative: X tends to be larger than Y)"}


def side_of(alternative: str) -> str:
    """The tests' sidedness as the Methods write it."""
    return SIDES.get(alternative, alternative)


# The Mann-Whitney tables, shared with the DP twin (``coordinator.analyses.dp_mwu``).
TEST_COLUMNS = ("analysis", "alternative", "test", "primary", "alpha", "statistic", "df",
                "pvalue", "null", "null_label", "method", "centers")
PART_COLUMNS = ("analysis", "test", "center", "statistic", "variance", "zstatistic", "pvalue",
                "null", "weight")
EFFECT_COLUMNS = ("analysis", "center", "n_x", "n_y", "estimate", "low", "high", "level",
                  "method")
HETEROGENEITY_COLUMNS = ("analysis", "kind", "statistic", "df", "pvalue", "i_squared",
                         "i_squared_low", "i_squared_high", "tau_squared", "tau_squared_low",
                         "tau_squared_high", "level", "variance_at", "centers")
TESTS_PART = ExportPart("tests", TEST_COLUMNS, "Tests", 30)
TEST_PARTS_PART = ExportPart("test_parts", PART_COLUMNS, None, 40)
EFFECTS_PART = ExportPart("effects", EFFECT_COLUMNS, "Effect sizes", 50)
HETEROGENEITY_PART = ExportPart("heterogeneity", HETEROGENEITY_COLUMNS, "Heterogeneity", 110)
MANN_WHITNEY_PARTS = (TESTS_PART, TEST_PARTS_PART, EFFECTS_PART, HETEROGENEITY_PART)


def mann_whitney_rows(part: ExportPart, index: int, mwu: MWUResult,
                      spec: StudySpec) -> list[Row]:
    """An exact or DP Mann-Whitney analysis' rows of one of :data:`MANN_WHITNEY_PARTS`: each
    test (the primary one marked, with its α), each center's part of each test, each
    probabilistic index θ = P(Y > X) + ½P(Y = X), and the centers' heterogeneity."""
    if part is TESTS_PART:
        primary = spec.primary
        rows = []
        for name, test in mwu.tests.items():
            is_primary = (primary is not None and primary.analysis == index
                          and primary.test == name)
            rows.append({
                "analysis": index, "alternative": mwu.alternative, "test": name,
                "primary": is_primary,
                "alpha": primary.alpha if is_primary and primary is not None else None,
                "statistic": test.statistic, "df": test.df, "pvalue": test.pvalue,
                "null": test.null, "null_label": null_label(test.null) or None,
                "method": test.method, "centers": [p.center for p in test.parts]})
        return rows
    if part is TEST_PARTS_PART:
        return [{"analysis": index, "test": name, **{k: getattr(p, k) for k in PART_COLUMNS[2:]}}
                for name, test in mwu.tests.items() for p in test.parts]
    if part is EFFECTS_PART:
        return [{"analysis": index, **{k: getattr(e, k) for k in EFFECT_COLUMNS[1:]}}
                for e in mwu.effects]
    h = mwu.heterogeneity
    if h is None:
        return []
    i_low, i_high = h.i_squared_interval or (None, None)
    t_low, t_high = h.tau_squared_interval or (None, None)
    return [{"analysis": index, "kind": mwu.kind, "statistic": h.statistic, "df": h.df,
             "pvalue": h.pvalue, "i_squared": h.i_squared, "i_squared_low": i_low,
             "i_squared_high": i_high, "tau_squared": h.tau_squared, "tau_squared_low": t_low,
             "tau_squared_high": t_high, "level": h.level, "variance_at": h.variance_at,
             "centers": " ".join(h.centers)}]


def mann_whitney_figure_names(mwu: MWUResult) -> list[str]:
    return (["table"] if getattr(mwu, "table", None) else []) + (
        ["effects"] if mwu.effects else [])


def effects_chart(mwu: MWUResult, spec: StudySpec, fmt: FigureFormat) -> bytes:
    """The probabilistic indices with their intervals, per center and stratified."""
    label = f"{spec.dataset}.{spec.variable}"
    return effects_figure([e.model_dump() for e in mwu.effects], fmt=fmt,
                          title=f"{label}: probabilistic index, {spec.groups[1]} vs "
                                f"{spec.groups[0]}" if spec.groups else label)


class MWU(Analysis[MWUAnalysis, MWUResult]):
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

    # -- how it is written up --------------------------------------------------------------------

    algorithm_name = ("federated Mann-Whitney tests (Becher, Marcus-Kalish & Steinberg 2023, "
                      "§6); probabilistic index with Newcombe's (2006) Method 5 score interval")
    references = works("becher", "fisher", "dwork", "acion", "newcombe", "cochran", "higgins",
                       "viechtbauer")

    def algorithm(self, asked: MWUAnalysis) -> str:
        return (f"{self.algorithm_name}; tests {', '.join(asked.tests)}, {asked.alternative}"
                + (f"; local U noised at ε = {asked.epsilon:g}"
                   if asked.epsilon is not None else ""))

    def methods(self, asked: MWUAnalysis, result: MWUResult,
                context: MethodsContext) -> list[str]:
        context.cite("becher")
        if "fisher" in asked.tests:
            context.cite("fisher")
        said = [f"Groups were compared by the federated Mann-Whitney tests of Becher et al. "
                f"(2023): {join([TEST_NAMES[t] for t in asked.tests])}; all "
                f"{side_of(asked.alternative)}."]
        said += context.primary_sentence()
        if context.spec.primary is None:
            said.append("No primary test was pre-specified; every p-value is reported without "
                        "adjustment for multiplicity.")
        if asked.epsilon is not None:
            context.cite("dwork")
            said.append(f"Each center released its U statistic with Laplace noise at "
                        f"ε = {wfmt(asked.epsilon)} (Dwork et al. 2006); the p-values come "
                        "from the exact law of the statistic plus the noise.")
        context.cite("acion")
        context.cite("newcombe")
        said.append("The effect size is the probabilistic index θ = P(Y > X) + ½·P(Y = X) "
                    "(Acion et al. 2006), per center and stratified over the centers "
                    "(weighted by n_X·n_Y), with 95 % score intervals (Newcombe 2006, "
                    "Method 5)" + (", widened for the DP noise" if asked.epsilon is not None
                                   else "") + ".")
        if result.heterogeneity is not None:
            for key in ("cochran", "higgins", "viechtbauer"):
                context.cite(key)
            said.append("Heterogeneity of the centers' indices was assessed by Cochran's "
                        "(1954) Q with inverse-variance weights (each center's variance at the "
                        "pooled index) and I² (Higgins & Thompson 2002) with its Q-profile "
                        "interval (Viechtbauer 2007).")
        return said

    export_parts = MANN_WHITNEY_PARTS

    def export_rows(self, part: ExportPart, index: int, asked: MWUAnalysis,
                    result: MWUResult, study: Shown) -> list[Row]:
        return mann_whitney_rows(part, index, result, study.spec)

    figure_labels: ClassVar[Mapping[str, str]] = {"table": "federated table",
                                                   "effects": "effect sizes"}

    def figure_names(self, result: MWUResult) -> list[str]:
        return mann_whitney_figure_names(result)

    def figure(self, name: str, asked: MWUAnalysis, result: MWUResult, spec: StudySpec,
               fmt: FigureFormat) -> bytes:
        if name == "effects":
            return effects_chart(result, spec, fmt)
        assert result.table is not None  # figure_names offered "table"
        return table_chart(result.table, spec, fmt)
