"""Descriptive statistics, "Table 1" (``{"kind": "describe"}``;
``coordinator.protocols.describe``): from each variable's federated K-anonymous table (no ε), or
each center's ε-DP description (ε per variable and arm)."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from coordinator.analyses.base import Analysis, Request, Spend, StudyRun
from coordinator.analyses.categorical import dp_request
from coordinator.models import AnalysisResult, DescribeAnalysis, DescribeResult, StudySpec
from coordinator.protocols.categorical import category_arms, federated_counts, merge_notes
from coordinator.protocols.describe import ALL, federated_describe
from coordinator.protocols.missing import missing_counts
from coordinator.protocols.table_one import arm_sizes
from coordinator.reporting.rendering import (
    DESCRIBE_HEADER,
    _left_out,
    _table,
    describe_rows,
    excluded_line,
    table_one,
    table_one_note,
)
from coordinator.results import describe_result
from shared.protocol import DatasetInfo


class Describe(Analysis[DescribeAnalysis]):
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
