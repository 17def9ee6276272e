"""Descriptive statistics, "Table 1" (``{"kind": "describe"}``;
``coordinator.protocols.describe``): from each variable's federated K-anonymous table (no ε), or
each center's ε-DP description (ε per variable and arm)."""

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
from coordinator.analyses.categorical import CATEGORIES_PART, category_rows, dp_request
from coordinator.models import (
    AnalysisResult,
    DescribeAnalysis,
    DescribeResult,
    PlannedError,
    StudySpec,
)
from coordinator.protocols.categorical import category_arms, federated_counts, merge_notes
from coordinator.protocols.describe import ALL, federated_describe
from coordinator.protocols.missing import missing_counts
from coordinator.protocols.table_one import arm_sizes
from coordinator.reporting.citations import works
from coordinator.reporting.export_parts import ExportPart, Row
from coordinator.reporting.notes import records_note, value_note
from coordinator.reporting.rendering import (
    DESCRIBE_HEADER,
    _left_out,
    _table,
    describe_rows,
    excluded_line,
    table_one,
    table_one_note,
)
from coordinator.reporting.shown import Shown
from coordinator.reporting.wording import fmt as wfmt
from coordinator.results import describe_result
from shared.dp_utility import describe_errors
from shared.protocol import DatasetInfo

TABLE1_COLUMNS = ("analysis", "mode", "variable", "unit", "center", "arm", "n", "n_low",
                  "n_high", "mean", "mean_low", "mean_high", "sd", "sd_low", "sd_high", "median",
                  "median_low", "median_high", "q1", "q1_low", "q1_high", "q3", "q3_low",
                  "q3_high", "missing", "missing_low", "missing_high", "rank_halfwidth",
                  "clip_low", "clip_high", "epsilon", "method")
# Each describe row (variable, center or pooled, arm) with its 95 % intervals.
TABLE1_PART = ExportPart("table1", TABLE1_COLUMNS, "Table 1", 10)
# The report's Table 1 as shown (pooled arms, Overall, each center).
TABLE1_FORMATTED_PART = ExportPart("table1_formatted", None, "Table 1 as shown", 20)


def _ends(found: tuple[float, float] | None) -> tuple[float | None, float | None]:
    return (found[0], found[1]) if found else (None, None)


class Describe(Analysis[DescribeAnalysis, DescribeResult]):
    kind = "describe"
    spec_model = DescribeAnalysis
    result_model = DescribeResult
    form_label = "descriptive statistics (Table 1)"
    # Its categorical variables are the catalog's categorical ones (numeric ones by name), and
    # its bounds a pair of boxes per catalog variable (no name typed).
    form_widgets: ClassVar[Mapping[str, str]] = {"categorical": "categoricals",
                                                 "bounds": "variable_pairs"}
    dp_alternative = ("describe with mode \"dp\" (each center's ε-DP N, mean, SD, quartiles and "
                      "histogram: give `epsilon`, and `bounds` where a variable declares none)")

    def requests(self, spec: StudySpec, analysis: DescribeAnalysis) -> list[Request]:
        if analysis.method != "dp":
            return []
        assert analysis.epsilon is not None  # a dp describe has its ε (DescribeAnalysis)
        arms: tuple[str | None, ...] = tuple(spec.groups) if spec.groups is not None else (None,)
        # One ε-DP description per variable and arm (coordinator/protocols/describe.py).
        return [(("dp_describe", name, arm, analysis.epsilon,
                  (analysis.bounds or {}).get(name), analysis.bins), Spend(analysis.epsilon))
                for name in analysis.described(spec.variable) for arm in arms] + [
            dp_request(name, arm, analysis.epsilon)
            for name in analysis.categorical or () for arm in arms]

    def lacking(self, spec: StudySpec, analysis: DescribeAnalysis, index: int,
                found: DatasetInfo) -> list[tuple[str, str, str]]:
        """A variable the center does not declare, and for a DP describe of a variable the
        spec gives no bounds for, the variable's public bounds (the center would refuse the
        request: ``center_agent.gate.kinds.DescribeKind``)."""
        out = []
        for v in analysis.described(spec.variable):
            if v not in found.variables:
                if v != spec.variable:  # the study's variable is named once, as body.variable
                    out.append(("variable", v, f"body.analyses.{index}.variables"))
            elif analysis.method == "dp" and v not in (analysis.bounds or {}):
                meta = found.metadata.get(v)
                if meta is None or meta.bounds is None:
                    out.append(("public bounds of variable", v,
                                f"body.analyses.{index}.bounds"))
        for v in analysis.categorical or ():
            if v not in found.categorical:
                out.append(("categorical variable", v, f"body.analyses.{index}.categorical"))
        return out

    def summary_lines(self, result: dict[str, Any], view: dict[str, Any],
                      shown: Sequence[str]) -> list[str]:
        analysis, spec = result, view["spec"]
        header, rows = table_one(analysis, spec.get("groups"))
        lines = [f"Table 1 ({analysis.get('mode')}):"]
        lines += excluded_line(analysis)
        if rows:
            widths = [max(len(str(r[i])) for r in [header, *rows])
                      for i in range(len(header))]
            for r in [header, *rows]:
                lines.append("  " + "  ".join(str(c).ljust(w) for c, w in
                                              zip(r, widths, strict=True)).rstrip())
        lines.append(f"  {table_one_note(analysis, spec['k'])}")
        return lines

    def report_parts(self, result: dict[str, Any], view: dict[str, Any]) -> list[str]:
        analysis, spec, esc = result, view["spec"], html.escape
        parts = ["<h2>Table 1: descriptive statistics</h2>"]
        parts += _left_out(analysis)
        header, rows = table_one(analysis, spec.get("groups"), per_center=True)
        if rows:
            parts.append(_table(header, [list(r) for r in rows]))
        parts.append(f"<p class='note'>{esc(table_one_note(analysis, spec['k']))}</p>")
        parts.append(
            "<details><summary>Per center and pooled</summary>" + _table(
                DESCRIBE_HEADER, describe_rows(analysis)) + "</details>")
        return parts

    async def run(self, study: StudyRun, analysis: DescribeAnalysis) -> AnalysisResult:
        spec = study.spec
        described = await federated_describe(
            study.survey, dataset=spec.dataset, variables=analysis.described(spec.variable),
            groups=spec.pair, k=spec.k, mode=analysis.method, epsilon=analysis.epsilon,
            bounds=analysis.bounds, bins=analysis.bins, per_center=analysis.per_center,
            pooled=analysis.pooled, min_centers=study.min_centers,
            allow_partial=spec.allow_partial, table_of=study.variable_table,
            lower=study.lower, upper=study.upper,
        )
        good = [p for p in study.survey.usable if p.center_id in described.spent]
        missing = None
        if not all(line.summary.missing is not None for line in described.lines):
            # The exact missing counts, where a DP description did not release its noisy twin
            # (a table describe, a center counting complete cases or of an older version). Not
            # asked of a center in DP mode: it refuses every exact kind (its line shows "—").
            missing = await missing_counts(
                [p for p in good if p.center_id not in study.survey.dp_mode],
                dataset=spec.dataset, variables=analysis.described(spec.variable))
        feds, notes, excluded = [], [], []
        centers = list(described.spent)  # the centers of the numeric rows
        for v in analysis.categorical or ():
            counts = await federated_counts(
                study.survey, dataset=spec.dataset, variable=v, groups=spec.pair, k=spec.k,
                mode=analysis.method, epsilon=analysis.epsilon, min_centers=study.min_centers,
                allow_partial=spec.allow_partial)
            feds.append(counts)
            notes += [f"{v}: {n}" for n in merge_notes(counts)]
            excluded += [f for f in counts.excluded if f not in study.survey.excluded]
            for c, eps in counts.spent.items():
                described.spent[c] = described.spent.get(c, 0.0) + eps
        # DP: one N per center and arm from the releases above (post-processing, no ε),
        # shared by every row (coordinator.protocols.table_one).
        sizes = (arm_sizes(described, feds, spec.pair or (ALL,), centers)
                 if analysis.method == "dp" else None)
        shown = sizes.shown() if sizes is not None else None
        categorical = [arm for counts in feds
                       for arm in category_arms(counts, per_center=analysis.per_center,
                                                pooled=analysis.pooled, sizes=shown)]
        return describe_result(described, analysis, spec.k, missing=missing,
                               groups=spec.pair, categorical=categorical, notes=notes,
                               excluded=excluded, sizes=sizes)

    # -- how it is written up --------------------------------------------------------------------

    algorithm_name = "Table 1 (descriptive statistics)"
    references = works("dwork")

    def algorithm(self, asked: DescribeAnalysis) -> str:
        return (f"{self.algorithm_name} ({asked.method}"
                + (f", ε = {asked.epsilon:g}" if asked.epsilon else "") + ")")

    def methods(self, asked: DescribeAnalysis, result: DescribeResult,
                context: MethodsContext) -> list[str]:
        if result.mode == "dp":
            context.cite("dwork")
            epsilon = result.epsilon or asked.epsilon
            return [f"Descriptive statistics (Table 1) were released with ε-DP at "
                    f"ε = {wfmt(epsilon)} per variable and arm per center (Laplace "
                    "mechanism); intervals are 95 % intervals of the DP noise."]
        return ["Descriptive statistics (Table 1) were read from the federated K-anonymous "
                "tables (no ε spent); their intervals are exact bounds from the bins."]

    export_parts = (TABLE1_PART, TABLE1_FORMATTED_PART, CATEGORIES_PART)

    def export_rows(self, part: ExportPart, index: int, asked: DescribeAnalysis,
                    result: DescribeResult, study: Shown) -> list[Row]:
        if part is CATEGORIES_PART:
            return category_rows(index, result.categorical)
        if part is TABLE1_FORMATTED_PART:
            groups = study.spec.groups
            header, shown = table_one(result.model_dump(mode="json"),
                                      list(groups) if groups is not None else None,
                                      per_center=True)
            return [{"analysis": str(index), **dict(zip(header, line, strict=True))}
                    for line in shown]
        rows = []
        for r in result.rows:
            row: Row = {"analysis": index, "mode": result.mode, "variable": r.variable,
                        "unit": result.units.get(r.variable), "center": r.center, "arm": r.arm}
            for name in ("n", "mean", "sd", "median", "q1", "q3", "missing"):
                row[name] = getattr(r, name)
                row[f"{name}_low"], row[f"{name}_high"] = _ends(
                    getattr(r, f"{name}_interval", None))
            row["rank_halfwidth"] = r.rank_halfwidth
            row["clip_low"], row["clip_high"] = _ends(r.clip)
            row["epsilon"], row["method"] = r.epsilon, r.method
            rows.append(row)
        return rows

    def export_rank(self, part: ExportPart) -> int:
        # The categories table has listed the categorical analyses' cells first.
        return 1 if part is CATEGORIES_PART else 0

    def uninformative(self, index: int, asked: DescribeAnalysis,
                      result: DescribeResult) -> list[str | None]:
        if result.mode != "dp":
            return []
        notes: list[str | None] = []
        for row in result.rows:
            # The public bounds: as asked, else the widest clip range the centers' rows show.
            bounds = (asked.bounds or {}).get(row.variable)
            if bounds is None:
                clips = [r.clip for r in result.rows if r.variable == row.variable and r.clip]
                bounds = (min(c[0] for c in clips), max(c[1] for c in clips)) if clips else None
            head = f"analysis {index} (describe), {row.variable} · {row.center} · {row.arm}"
            if row.n_interval:
                notes.append(records_note(f"{head}, N",
                                          (row.n_interval[1] - row.n_interval[0]) / 2.0, row.n))
            notes.append(records_note(f"{head}, quartiles", row.rank_halfwidth, row.n))
            notes.append(value_note(f"{head}, mean", row.mean_interval, bounds))
        return notes

    def planned_errors(self, spec: StudySpec, asked: DescribeAnalysis,
                       found: Found) -> tuple[float, list[PlannedError]] | None:
        if asked.method != "dp":
            return None
        assert asked.epsilon is not None  # a dp describe has one (its validator)
        arms: Sequence[str | None] = spec.groups if spec.groups is not None else (None,)
        errors: list[PlannedError] = []
        for variable in asked.described(spec.variable):
            for c, (d, info) in found.items():
                bounds = (asked.bounds or {}).get(variable)
                meta = d.metadata.get(variable)
                bounds = bounds or (meta.bounds if meta is not None else None)
                if bounds is None:
                    continue
                for arm in arms:
                    errors += [planned(c, e, arm=arm, variable=variable) for e in
                               describe_errors(asked.epsilon, declared_size(d, arm), bounds,
                                               info.neighbouring)]
        return asked.epsilon, errors
