"""Kruskal-Wallis across the study's k arms (``{"kind": "kruskal"}``;
``coordinator.protocols.kruskal``): from the study's federated table of the arms, each center's
own table and the stratified tests over those; with ``ordered``, Jonckheere-Terpstra too. No ε:
every number is a function of K-anonymous tables (docs/methods.md §12)."""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from typing import Any

from coordinator.analyses.base import Analysis, MethodsContext, StudyRun
from coordinator.models import (
    AnalysisResult,
    KruskalAnalysis,
    KruskalArms,
    KruskalCenter,
    KruskalResult,
    KruskalTestResult,
    StudySpec,
    TrendResult,
)
from coordinator.protocols.kruskal import FederatedKruskal, federated_kruskal
from coordinator.reporting.citations import works
from coordinator.reporting.export_parts import ExportPart, Row
from coordinator.reporting.rendering import (
    BIN_NOTE,
    _left_out,
    _table,
    fmt,
    left_out,
    reused_note,
    table_svg,
)
from coordinator.reporting.shown import Shown
from coordinator.results import excluded_center, table_result
from shared import kruskal

# Below this many records in an arm (over every center) χ²_{k−1} is a rough law for H
# (Kruskal & Wallis 1952 §6 give exact tables for small arms; Hollander, Wolfe & Chicken 2014
# §6.1 advise the χ² approximation from about five per arm).
SMALL_ARM = 5

TIES_NOTE = ("Records in one bin are tied (they share the bin's mid-rank): the tests compare "
             "the arms at the tables' resolution, valid under H0 whatever the bins "
             "(docs/methods.md §12).")


def _arms(result: kruskal.KruskalResult) -> dict[str, list[float]]:
    return {"sizes": list(result.sizes), "mean_ranks": list(result.mean_ranks)}


def _test(method: str, r: kruskal.KruskalResult | kruskal.FederatedKruskalResult
          ) -> KruskalTestResult:
    return KruskalTestResult(method=method, statistic=r.statistic, df=r.df, pvalue=r.pvalue)


def kruskal_result(fed: FederatedKruskal, groups: Sequence[str], analysis: KruskalAnalysis
                   ) -> KruskalResult:
    tests = {"table": _test("table", fed.federated),
             **{m: _test(m, r) for m, r in fed.stratified.items()}}
    centers = [KruskalCenter(center=c, bins=t.n_bins, limits=t.limits.tolist(),
                             statistic=r.statistic, df=r.df, pvalue=r.pvalue, **_arms(r))
               for c, (t, r) in fed.centers.items()]
    trend = {m: TrendResult(method=m, statistic=r.statistic, mean=r.mean, variance=r.variance,
                            zstatistic=r.zstatistic, pvalue=r.pvalue, null=r.null)
             for m, r in fed.trend.items()}
    return KruskalResult(
        groups=list(groups), arms=KruskalArms(**_arms(fed.federated)), tests=tests,
        centers=centers, ordered=analysis.ordered,
        alternative=analysis.alternative if analysis.ordered else None, trend=trend,
        table=table_result(fed.table), excluded=[excluded_center(f) for f in fed.excluded])


def _test_rows(result: dict[str, Any]) -> list[list[Any]]:
    laws = {"table": "the federated table", "sum": "Σ of the centers' rank sums",
            "weighted": "van Elteren: each center's ranks / (N_c + 1)"}
    return [[name, t["statistic"], t["df"], t["pvalue"], laws.get(name, "")]
            for name, t in result["tests"].items()]


def _arm_rows(result: dict[str, Any]) -> list[list[Any]]:
    arms = result["arms"]
    return [[g, n, r] for g, n, r in zip(result["groups"], arms["sizes"], arms["mean_ranks"],
                                         strict=True)]


TREND_NULLS = {"exact": "J's exact permutation law", "normal": "N(0, 1)"}
"""What a Jonckheere-Terpstra p-value was computed from (``shared.jonckheere``)."""


def trend_law(trend: dict[str, Any]) -> str:
    null = trend.get("null") or "normal"  # results stored before the exact law: normal
    return TREND_NULLS.get(null, null)


def _trend_rows(result: dict[str, Any]) -> list[list[Any]]:
    return [[name, t["statistic"], t["mean"], t["variance"] ** 0.5, t["zstatistic"],
             t["pvalue"], trend_law(t)] for name, t in result.get("trend", {}).items()]


KRUSKAL_COLUMNS = ("analysis", "test", "method", "statistic", "df", "pvalue", "mean",
                   "variance", "zstatistic", "alternative", "null")
# Each k-arm test: Kruskal-Wallis on the federated table, stratified (sum, weighted) and each
# center's own (``center:<id>``), then Jonckheere-Terpstra's trend when asked.
KRUSKAL_PART = ExportPart("kruskal", KRUSKAL_COLUMNS, "k-arm tests", 100)


class Kruskal(Analysis[KruskalAnalysis, KruskalResult]):
    kind = "kruskal"
    spec_model = KruskalAnalysis
    result_model = KruskalResult

    def needs_table(self, analysis: KruskalAnalysis) -> bool:
        return True

    def needs_center_tables(self, analysis: KruskalAnalysis) -> bool:
        return True

    def plan_notes(self, spec: StudySpec, analysis: KruskalAnalysis, index: int,
                   size_of: Callable[[str | None], int]) -> list[str]:
        """Caveats only (a dry run with notes exits 1 in ``fedstats study plan``): arms too
        small for H's χ² law, and two arms, where the test is the Mann-Whitney table test."""
        groups = spec.groups or ()
        out = []
        small = [g for g in groups if size_of(g) < SMALL_ARM]
        if small:
            out.append(f"analysis {index} (kruskal): arms {small} hold fewer than {SMALL_ARM} "
                       f"records over the centers: the χ²_{len(groups) - 1} law of H is rough "
                       "there")
        if len(groups) == 2:
            out.append(f"analysis {index} (kruskal): with two arms H is the square of the "
                       "Mann-Whitney table test's z (two-sided): an mwu analysis also gives "
                       "the direction and the effect θ")
        return out

    async def run(self, study: StudyRun, analysis: KruskalAnalysis) -> AnalysisResult:
        spec = study.spec
        groups = spec.groups
        assert groups is not None  # StudySpec refuses kruskal without groups
        fed = await federated_kruskal(
            study.survey, study.study_table(), dataset=spec.dataset, variable=spec.variable,
            groups=tuple(groups), k=spec.k, lower=study.lower, upper=study.upper,
            min_centers=study.min_centers, allow_partial=spec.allow_partial,
            ordered=analysis.ordered, alternative=analysis.alternative)
        return kruskal_result(fed, groups, analysis)

    summary_rank = 2

    def summary_lines(self, result: dict[str, Any], view: dict[str, Any],
                      shown: Sequence[str]) -> list[str]:
        arms = len(result["groups"])
        lines = [f"Kruskal-Wallis across {arms} arms ({', '.join(result['groups'])}):"]
        if left_out(result):
            lines.append(f"  left out: {left_out(result)}")
        lines.append(f"  {'test':<10}{'H':>12}{'df':>5}{'p-value':>14}")
        for name, h, df, p, _ in _test_rows(result):
            lines.append(f"  {name:<10}{fmt(h):>12}{df:>5}{fmt(p):>14}")
        lines.append(f"  {'arm':<14}{'n':>9}{'mean rank':>12}   (the federated table)")
        for g, n, r in _arm_rows(result):
            lines.append(f"  {g:<14}{fmt(n):>9}{fmt(r):>12}")
        for c in result["centers"]:
            lines.append(f"  center {c['center']}: H = {fmt(c['statistic'])}, "
                         f"p = {fmt(c['pvalue'])} ({c['bins']} bins)")
        if result.get("trend"):
            lines.append(f"  Jonckheere-Terpstra ({result['alternative']}, arms in the order "
                         "named):")
            for name, j, _, _, z, p, law in _trend_rows(result):
                lines.append(f"  {name:<10}J = {fmt(j)}, z = {fmt(z)}, p = {fmt(p)} ({law})")
        lines.append(f"  {TIES_NOTE}")
        return lines

    def report_parts(self, result: dict[str, Any], view: dict[str, Any]) -> list[str]:
        esc = html.escape
        groups = list(result["groups"])
        parts = [f"<h2>Kruskal-Wallis across {len(groups)} arms</h2>"]
        parts += _left_out(result)
        parts.append(_table(["test", "H", "df", "p-value", "from"], _test_rows(result)))
        parts.append("<p>Per arm, on the federated table:</p>")
        parts.append(_table(["arm", "n", "mean rank"], _arm_rows(result)))
        parts.append("<p>Each center's test on its own table (its part of the sum and weighted "
                     "tests):</p>")
        parts.append(_table(["center", "bins", "H", "p-value", *(f"n {g}" for g in groups)],
                            [[c["center"], c["bins"], c["statistic"], c["pvalue"], *c["sizes"]]
                             for c in result["centers"]]))
        if result.get("trend"):
            parts.append(f"<h3>Jonckheere-Terpstra ({esc(str(result['alternative']))}: "
                         f"{esc(' < '.join(groups))})</h3>")
            parts.append(_table(["test", "J", "E J under H0", "SD J", "z", "p-value",
                                 "p from"],
                                _trend_rows(result)))
        table = result["table"]
        if reused_note(table):
            parts.append(f"<p class='note'>{esc(reused_note(table) or '')}</p>")
        parts.append(f"<figure>{table_svg(table, groups)}</figure>")
        parts.append(f"<p class='note'>{esc(TIES_NOTE)} {esc(BIN_NOTE)}</p>")
        return parts

    # -- how it is written up --------------------------------------------------------------------

    algorithm_name = ("Kruskal-Wallis (Kruskal & Wallis 1952) on the federated and each center's "
                      "table, stratified (sum; van Elteren 1960)")
    references = works("kruskal", "van_elteren", "jonckheere")

    def algorithm(self, asked: KruskalAnalysis) -> str:
        return self.algorithm_name + (f"; Jonckheere-Terpstra ({asked.alternative})"
                                      if asked.ordered else "")

    def methods(self, asked: KruskalAnalysis, result: KruskalResult,
                context: MethodsContext) -> list[str]:
        groups: Sequence[str] = context.spec.groups or []
        context.cite("kruskal")
        context.cite("van_elteren")
        said = [f"The {len(groups)} groups were compared by Kruskal-Wallis tests (Kruskal & "
                "Wallis 1952) on the federated table and on each center's own K-anonymous table "
                "(records in one bin tied; no ε spent), and stratified by center by summing the "
                "centers' rank sums and by van Elteren's (1960) weighting of each center's ranks "
                "by 1/(N + 1)."]
        if asked.ordered:
            context.cite("jonckheere")
            said.append(f"A trend across the groups in the order {', '.join(groups)} was tested "
                        f"by Jonckheere-Terpstra ({asked.alternative}; Jonckheere 1954) on the "
                        "same tables, tie-corrected, its p-value from the exact permutation law "
                        "given the ties for tables of up to 50 whole records and from the normal "
                        "law otherwise.")
        return said

    export_parts = (KRUSKAL_PART,)

    def export_rows(self, part: ExportPart, index: int, asked: KruskalAnalysis,
                    result: KruskalResult, study: Shown) -> list[Row]:
        rows: list[Row] = [{"analysis": index, "test": name, "method": test.method,
                            "statistic": test.statistic, "df": test.df, "pvalue": test.pvalue}
                           for name, test in result.tests.items()]
        rows += [{"analysis": index, "test": f"center:{c.center}", "method": "center",
                  "statistic": c.statistic, "df": c.df, "pvalue": c.pvalue}
                 for c in result.centers]
        rows += [{"analysis": index, "test": f"trend:{name}", "method": trend.method,
                  "statistic": trend.statistic, "pvalue": trend.pvalue, "mean": trend.mean,
                  "variance": trend.variance, "zstatistic": trend.zstatistic,
                  "alternative": result.alternative, "null": trend.null or "normal"}
                 for name, trend in result.trend.items()]
        return rows
