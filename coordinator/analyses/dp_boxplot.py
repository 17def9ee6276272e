"""ε-DP boxplots of one group level or every record (``{"kind": "dp_boxplot"}``;
``coordinator.protocols.boxplot``; docs/methods.md §6): each center's own box and/or the pooled
box, ε per box asked."""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from coordinator.analyses.base import (
    POOLED,
    Analysis,
    Found,
    MethodsContext,
    Request,
    Spend,
    StudyRun,
    declared_size,
    planned,
)
from coordinator.models import (
    AnalysisResult,
    Box,
    DPBoxplotAnalysis,
    DPBoxplotResult,
    PlannedError,
    StudySpec,
)
from coordinator.protocols import federated_dp_boxplot
from coordinator.reporting.charts import FigureFormat, boxplot_figure
from coordinator.reporting.citations import works
from coordinator.reporting.export_parts import ExportPart, Row
from coordinator.reporting.notes import records_note
from coordinator.reporting.rendering import (
    BOX_HEADER,
    BOX_UNCERTAINTY_HEADER,
    BOX_UNCERTAINTY_NOTE,
    POOLED_LEVELS_NOTE,
    POOLED_WHISKER_RULE,
    WHISKER_RULE,
    _left_out,
    _table,
    box_row,
    box_uncertainty_rows,
    boxplot_svg,
    dp_boxes,
    excluded_line,
    fmt,
    pooled_levels,
    quantile_rows,
)
from coordinator.reporting.shown import Shown
from coordinator.reporting.wording import fmt as wfmt
from coordinator.results import dp_boxplot_result
from shared.dp.pooled import COUNT_SHARE, EXTREMES_SHARE, HISTOGRAM_SHARE
from shared.dp_utility import box_errors, pooled_box_errors
from shared.protocol import DatasetInfo

# What a DP-mode center lacks for a per-center box (``coordinator.catalog`` lists the levels
# it declares a size of).
PUBLIC_SIZE = ("public size (DP mode: each center's own box needs one for its whisker buffer; "
               "or set per_center = false)")


BOX_COLUMNS = ("analysis", "group", "box", "n", "lower_outliers", "lower_whisker", "q1",
               "median", "q3", "upper_whisker", "upper_outliers", "lower_branch",
               "upper_branch", "outlier_halfwidth", "quartile_rank_halfwidth",
               "extreme_rank_halfwidth", "epsilon", "method")
# Each DP box (a center's, then the pooled one) of each dp_boxplot analysis.
BOXPLOTS_PART = ExportPart("boxplots", BOX_COLUMNS, "Boxplots", 60)


class DPBoxplot(Analysis[DPBoxplotAnalysis, DPBoxplotResult]):
    kind = "dp_boxplot"
    spec_model = DPBoxplotAnalysis
    result_model = DPBoxplotResult
    form_label = "DP boxplots"

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

    def lacking(self, spec: StudySpec, analysis: DPBoxplotAnalysis, index: int,
                found: DatasetInfo) -> list[tuple[str, str, str]]:
        """In DP mode a center's own box takes the declared size of its selection for the
        whisker buffer, and refuses without one (``center_agent.gate.kinds.DPBoxplotKind``):
        a size the center does not declare is named (the pooled box needs none)."""
        if not analysis.per_center or found.release_mode != "dp":
            return []
        group = analysis.group
        size = found.n_records if group is None else found.n_by_group.get(group)
        if size is not None:
            return []
        what = (f"{PUBLIC_SIZE} of level" if group is not None else PUBLIC_SIZE)
        return [(what, group or "all records", f"body.analyses.{index}.per_center")]

    def summary_lines(self, result: dict[str, Any], view: dict[str, Any],
                      shown: Sequence[str]) -> list[str]:
        analysis = result
        lines = [f"DP boxplots of {analysis.get('group') or 'all records'} "
                 "(n; outliers below [95 %]; lower whisker, Q1, median, Q3, upper "
                 "whisker; outliers above [95 %]):"]
        lines += excluded_line(analysis)
        for label, levels, values in quantile_rows(analysis):
            pairs = ", ".join(f"q{fmt(lv, 3)}={fmt(v, 4)}" for lv, v in
                              zip(levels, values, strict=True))
            lines.append(f"  {label}: {pairs}")
        found = dp_boxes(analysis)
        for label, box in found:
            row = box_row(label, box)
            nums = "  ".join(f"{fmt(v, 3):>6}" for v in row[3:8])
            lines.append(f"  {label:<24}{fmt(row[1]):>6}  {row[2]:>14}  {nums}  "
                         f"{row[8]:>14}")
        extra = pooled_levels(analysis)
        if extra is not None:
            label, levels, values = extra
            lines.append(f"  {label}: " + ", ".join(
                f"q{fmt(lv, 3)}={fmt(v, 4)}" for lv, v in zip(levels, values, strict=True))
                + f"  ({POOLED_LEVELS_NOTE})")
        # The rule once per summary, after the first boxes.
        if found and WHISKER_RULE not in shown:
            lines.append(WHISKER_RULE)
        if analysis.get("pooled") and POOLED_WHISKER_RULE not in shown:
            lines.append(POOLED_WHISKER_RULE)
        uncertain = box_uncertainty_rows(analysis)
        for row in uncertain:
            lines.append(f"  {row[0]:<24}quartiles {row[1]}, whisker at ψ {row[2]}")
        if uncertain:
            lines.append(BOX_UNCERTAINTY_NOTE)
        return lines

    def report_parts(self, result: dict[str, Any], view: dict[str, Any]) -> list[str]:
        analysis, spec, esc = result, view["spec"], html.escape
        heading = f"DP boxplots of {analysis.get('group') or 'all records'}"
        parts = [f"<h2>{esc(heading)}</h2>"]
        parts += _left_out(analysis)
        q = list(quantile_rows(analysis))
        if q:
            levels = q[0][1]
            parts.append(_table(["", *(f"q{fmt(lv, 3)}" for lv in levels)],
                                [[label, *values] for label, _, values in q]))
        b = dp_boxes(analysis)
        if b:
            title = (f"Differentially private boxplots: {spec['dataset']}."
                     f"{spec['variable']} ({analysis.get('group') or 'all records'})")
            parts.append(f"<figure>{boxplot_svg(analysis, title)}</figure>")
            parts.append(_table(BOX_HEADER, [box_row(label, box) for label, box in b]))
            spent = ", ".join(f"{c} {fmt(e)}" for c, e in
                              (analysis.get("spent") or {}).items())
            parts.append(f"<p>ε spent by each center: {esc(spent)}. "
                         f"{esc(WHISKER_RULE)}</p>")
            if analysis.get("pooled"):
                parts.append(f"<p>{esc(POOLED_WHISKER_RULE)}</p>")
            uncertain = box_uncertainty_rows(analysis)
            if uncertain:
                parts.append(_table(BOX_UNCERTAINTY_HEADER, uncertain))
                parts.append(f"<p class='note'>{esc(BOX_UNCERTAINTY_NOTE)}</p>")
            extra = pooled_levels(analysis)
            if extra is not None:
                label, levels, values = extra
                parts.append(_table(["", *(f"q{fmt(lv, 3)}" for lv in levels)],
                                    [[label, *values]]))
                parts.append(f"<p>{esc(POOLED_LEVELS_NOTE)}</p>")
        if not q and not b:
            parts.append(f"<pre>{esc(json.dumps(analysis, indent=2))}</pre>")
        return parts

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

    # -- how it is written up --------------------------------------------------------------------

    algorithm_name = ("DPBoxplot (Ramsay & Diaz-Rodriguez 2025) per center; pooled box from a "
                      "DP tree histogram (Hay et al. 2010)")
    references = works("ramsay", "hay")

    def methods(self, asked: DPBoxplotAnalysis, result: DPBoxplotResult,
                context: MethodsContext) -> list[str]:
        context.cite("ramsay")
        bounds = asked.bounds
        boxes = [b for b, asked_for in (("its own box", asked.per_center),
                                        ("its part of the pooled box", asked.pooled))
                 if asked_for]
        text = (f"DP boxplots of {asked.group or 'all records'} were made at "
                f"ε = {wfmt(asked.epsilon)} per box, each center spending it on "
                f"{' and on '.join(boxes)}"
                + (f" (ε = {wfmt(len(boxes) * asked.epsilon)} in all)" if len(boxes) > 1
                   else "")
                + f", the data clipped to the public bounds [{wfmt(bounds[0])}, "
                f"{wfmt(bounds[1])}]")
        if asked.per_center:
            text += "; each center's box by DPBoxplot (Ramsay & Diaz-Rodriguez 2025)"
        if asked.pooled:
            context.cite("hay")
            text += ("; the pooled box from a DP tree histogram summed over the centers "
                     "(consistency by Hay et al. 2010)")
        return [text + "."]

    export_parts = (BOXPLOTS_PART,)

    def export_rows(self, part: ExportPart, index: int, asked: DPBoxplotAnalysis,
                    result: DPBoxplotResult, study: Shown) -> list[Row]:
        found: list[tuple[str, Box]] = list(result.per_center.items())
        if result.pooled is not None:
            found.append(("pooled", result.pooled))
        return [{"analysis": index, "group": result.group, "box": label,
                 **{k: getattr(box, k, None) for k in BOX_COLUMNS[3:]}}
                for label, box in found]

    figure_labels: ClassVar[Mapping[str, str]] = {"boxplots": "DP boxplots"}

    def figure_names(self, result: DPBoxplotResult) -> list[str]:
        return ["boxplots"]

    def figure(self, name: str, asked: DPBoxplotAnalysis, result: DPBoxplotResult,
               spec: StudySpec, fmt: FigureFormat) -> bytes:
        title = f"{spec.dataset}.{spec.variable}" + (f" ({result.group})" if result.group
                                                      else "")
        return boxplot_figure(result, title=title, fmt=fmt)

    def uninformative(self, index: int, asked: DPBoxplotAnalysis,
                      result: DPBoxplotResult) -> list[str | None]:
        group = result.group or "all"
        boxes: list[tuple[str, Box]] = [(f"{c} · {group}", b)
                                        for c, b in result.per_center.items()]
        if result.pooled is not None:
            boxes.append((f"pooled · {group}", result.pooled))
        notes: list[str | None] = []
        for label, box in boxes:
            head = f"analysis {index} (dp_boxplot), {label}"
            notes.append(records_note(f"{head}, quartiles", box.quartile_rank_halfwidth, box.n))
            at_psi = [side for side, branch in (("lower", box.lower_branch),
                                                ("upper", box.upper_branch))
                      if branch == "extreme"]
            if at_psi:
                notes.append(records_note(f"{head}, {' and '.join(at_psi)} whisker at ψ",
                                          box.extreme_rank_halfwidth, box.n))
            notes.append(records_note(f"{head}, outlier counts", box.outlier_halfwidth, box.n))
        return notes

    def planned_errors(self, spec: StudySpec, asked: DPBoxplotAnalysis,
                       found: Found) -> tuple[float, list[PlannedError]] | None:
        sizes = {c: declared_size(d, asked.group) for c, (d, _i) in found.items()}
        errors: list[PlannedError] = []
        if asked.per_center:
            for c, n in sizes.items():
                errors += [planned(c, e) for e in box_errors(
                    asked.epsilon, n, asked.bounds, neighbouring=found[c][1].neighbouring)]
        if asked.pooled and sizes:
            errors += [planned(POOLED, e) for e in pooled_box_errors(
                asked.epsilon, list(sizes.values()), asked.bounds, branching=asked.branching,
                depth=asked.depth, relations=[i.neighbouring for _d, i in found.values()])]
        return asked.epsilon, errors
