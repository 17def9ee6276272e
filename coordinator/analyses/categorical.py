"""A categorical variable by arm (``{"kind": "categorical", "variable": "smoking"}``;
``coordinator.protocols.categorical``): n (%) per category with Wilson intervals, Pearson's χ²
(Fisher's exact test for a small 2×2 table) and the CMH test stratified by center, from each
center's K-anonymous counts (no ε) or its ε-DP counts (ε per arm)."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from coordinator.analyses.base import Analysis, MethodsContext, Request, Spend, StudyRun
from coordinator.models import (
    AnalysisResult,
    CategoricalAnalysis,
    CategoricalResult,
    CategoryArm,
    StudySpec,
)
from coordinator.protocols.categorical import POOLED, federated_counts
from coordinator.reporting.citations import works
from coordinator.reporting.export_parts import ExportPart, Row
from coordinator.reporting.rendering import (
    CATEGORY_NOTE,
    _left_out,
    _table,
    category_block,
    excluded_line,
    fmt,
)
from coordinator.reporting.shown import Shown
from coordinator.reporting.wording import fmt as wfmt
from coordinator.results import categorical_result
from shared.protocol import DatasetInfo

DP_INTERVAL_NOTE = (
    "DP: each share's interval is Wilson's score interval with the noise's variance added to "
    "the score's, read off the noisy (unclamped) counts, so it covers sampling and noise "
    "together, a rare category's too; each count's interval is ± 1.96 noise SDs (normal "
    "approximation of the summed noise). The tests' statistics are divided by the noise's "
    "first-order inflation δ (docs/methods.md §12.7).")


def dp_request(variable: str, arm: str | None, epsilon: float) -> Request:
    """The ε-DP counts of ``variable`` in one arm: one request per center (a describe asking
    the same counts shares it)."""
    return ("dp_categorical", variable, arm, epsilon), Spend(epsilon)


CATEGORY_COLUMNS = ("analysis", "variable", "center", "arm", "n", "missing", "category",
                    "categories", "count", "percent", "low", "high", "count_low", "count_high")
CATEGORICAL_TEST_COLUMNS = ("analysis", "variable", "test", "method", "statistic", "df",
                            "pvalue", "odds_ratio", "low", "high")
# Each released cell of a categorical variable, per center (or pooled) and arm: n (%) with its
# interval (Table 1's categorical rows too: ``coordinator.analyses.describe``).
CATEGORIES_PART = ExportPart("categorical", CATEGORY_COLUMNS, "Categories, n (%)", 130)
# Each test of arm against category: χ², Fisher's exact, CMH by center.
CATEGORICAL_TESTS_PART = ExportPart("categorical_tests", CATEGORICAL_TEST_COLUMNS,
                                    "Category tests", 140)


def category_rows(index: int, arms: Sequence[CategoryArm]) -> list[Row]:
    """Each released cell of ``arms``, n (%) with its interval."""
    rows: list[Row] = []
    for arm in arms:
        for c in arm.cells:
            low, high = c.count_interval or (None, None)
            rows.append({
                "analysis": index, "variable": arm.variable, "center": arm.center,
                "arm": arm.arm, "n": arm.n, "missing": arm.missing, "category": c.label,
                "categories": c.categories, "count": c.count, "percent": c.percent,
                "low": c.low, "high": c.high, "count_low": low, "count_high": high})
    return rows


class Categorical(Analysis[CategoricalAnalysis, CategoricalResult]):
    kind = "categorical"
    spec_model = CategoricalAnalysis
    result_model = CategoricalResult
    # Its variable is one of the catalog's categorical variables, not a numeric one.
    form_widgets: ClassVar[Mapping[str, str]] = {"variable": "categorical"}

    def requests(self, spec: StudySpec, analysis: CategoricalAnalysis) -> list[Request]:
        if analysis.method != "dp":
            return []
        assert analysis.epsilon is not None  # a dp analysis has its ε (CategoricalAnalysis)
        arms: tuple[str | None, ...] = tuple(spec.groups) if spec.groups is not None else (None,)
        return [dp_request(analysis.variable, arm, analysis.epsilon) for arm in arms]

    def lacking(self, spec: StudySpec, analysis: CategoricalAnalysis, index: int,
                found: DatasetInfo) -> list[tuple[str, str, str]]:
        if analysis.variable not in found.categorical:
            return [("categorical variable", analysis.variable,
                     f"body.analyses.{index}.variable")]
        return []

    async def run(self, study: StudyRun, analysis: CategoricalAnalysis) -> AnalysisResult:
        spec = study.spec
        fed = await federated_counts(
            study.survey, dataset=spec.dataset, variable=analysis.variable, groups=spec.pair,
            k=spec.k, mode=analysis.method, epsilon=analysis.epsilon,
            min_centers=study.min_centers, allow_partial=spec.allow_partial)
        return categorical_result(fed, analysis, spec.k)

    # -- how it is shown ---------------------------------------------------------------------

    @staticmethod
    def _table(result: dict[str, Any], groups: list[str] | None, *, per_center: bool = True,
               ) -> tuple[list[str], list[list[str]]]:
        """The pooled arms, then (``per_center``) each center's."""
        arms = [*(groups or []), "all"]
        found = {(r["variable"], r["center"], r["arm"]): r for r in result.get("arms") or []}
        centers = (list(dict.fromkeys(c for _, c, _ in found if c != POOLED))
                   if per_center else [])
        columns = [(POOLED, a) for a in arms] + [(c, a) for c in centers for a in arms]
        header = ["", *(f"{c}: {a}" if c != POOLED else ("Overall" if a == "all" else a)
                        for c, a in columns)]
        return header, category_block(result["variable"], found, columns, interval=True)

    @staticmethod
    def _test_line(test: dict[str, Any]) -> str:
        df = f", df {test['df']}" if test.get("df") is not None else ""
        odds = ""
        if test.get("odds_ratio") is not None:
            odds = f", OR {fmt(test['odds_ratio'], 3)}"
            if test.get("low") is not None:
                odds += f" [{fmt(test['low'], 3)}, {fmt(test['high'], 3)}]"
        return (f"{test['name']}: {fmt(test['statistic'], 4)}{df}, p = "
                f"{fmt(test['pvalue'], 3)}{odds} ({test['method']})")

    def summary_lines(self, result: dict[str, Any], view: dict[str, Any],
                      shown: Sequence[str]) -> list[str]:
        eps = (f", ε = {fmt(result['epsilon'])} per arm per center"
               if result.get("epsilon") else "")
        lines = [f"Categorical {result['variable']} ({result['mode']}{eps}):"]
        lines += excluded_line(result)
        header, rows = self._table(result, view["spec"].get("groups"), per_center=False)
        widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
        for r in [header, *rows]:
            lines.append("  " + "  ".join(str(c).ljust(w) for c, w in
                                          zip(r, widths, strict=True)).rstrip())
        lines += [f"  {self._test_line(t)}" for t in result.get("tests") or []]
        lines += [f"  {n}" for n in result.get("notes") or []]
        return lines

    def report_parts(self, result: dict[str, Any], view: dict[str, Any]) -> list[str]:
        esc = html.escape
        parts = [f"<h2>Categorical: {esc(result['variable'])}, n (%) by arm</h2>"]
        parts += _left_out(result)
        header, rows = self._table(result, view["spec"].get("groups"))
        parts.append(_table(header, [list(r) for r in rows]))
        tests = result.get("tests") or []
        if tests:
            parts.append(_table(["test", "statistic", "df", "p-value", "odds ratio [95 %]",
                                 "method"], [[
                t["name"], t["statistic"], t.get("df") if t.get("df") is not None else "—",
                t["pvalue"],
                "—" if t.get("odds_ratio") is None else fmt(t["odds_ratio"], 3) + (
                    f" [{fmt(t['low'], 3)}, {fmt(t['high'], 3)}]"
                    if t.get("low") is not None else ""),
                t["method"]] for t in tests]))
        note = CATEGORY_NOTE + " Each share's 95 % interval is shown in brackets (Wilson)."
        if result.get("mode") == "dp":
            note += " " + DP_INTERVAL_NOTE
        for extra in result.get("notes") or []:
            note += " " + extra
        parts.append(f"<p class='note'>{esc(note)}</p>")
        return parts

    # -- how it is written up --------------------------------------------------------------------

    algorithm_name = ("categorical counts by arm: n (%) with Wilson intervals, Pearson's χ², "
                      "Fisher's exact 2×2, Cochran-Mantel-Haenszel by center")
    references = works("wilson", "mantel")

    def methods(self, asked: CategoricalAnalysis, result: CategoricalResult,
                context: MethodsContext) -> list[str]:
        context.cite("wilson")
        context.cite("mantel")
        source = (f"each center's ε-DP counts (two-sided geometric noise, ε = "
                  f"{wfmt(asked.epsilon)} per arm; the tests corrected for the noise to first "
                  "order)" if result.mode == "dp" else
                  "each center's K-anonymous counts per category (no ε)")
        return [f"The categorical variable {asked.variable} was summarised as n (%) with "
                "Wilson (1927) intervals and compared between arms with Pearson's χ² and the "
                "Cochran-Mantel-Haenszel test stratified by center (Mantel & Haenszel 1959), "
                f"from {source}."]

    export_parts = (CATEGORIES_PART, CATEGORICAL_TESTS_PART)

    def export_rows(self, part: ExportPart, index: int, asked: CategoricalAnalysis,
                    result: CategoricalResult, study: Shown) -> list[Row]:
        if part is CATEGORIES_PART:
            return category_rows(index, result.arms)
        return [{"analysis": index, "variable": result.variable, "test": t.name,
                 **{k: getattr(t, k) for k in CATEGORICAL_TEST_COLUMNS[4:]}, "method": t.method}
                for t in result.tests]
