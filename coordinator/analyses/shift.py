"""The Hodges-Lehmann shift of Y against X with its Moses interval (``{"kind": "shift",
"level": 0.95}``), as far as the study's two-arm federated table allows: no release of its own,
no ε (``shared.hodges_lehmann.hodges_lehmann_table``; docs/methods.md §12.3). Printed first:
the bin midpoints' estimate and their Moses interval widened by the binning allowance; then
the bounds the bins give for sure."""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

from coordinator.analyses.base import Analysis, MethodsContext, StudyRun
from coordinator.models import AnalysisResult, ShiftAnalysis, ShiftResult
from coordinator.reporting.citations import works
from coordinator.reporting.export_parts import ExportPart, Row
from coordinator.reporting.rendering import _left_out, _table, fmt, left_out
from coordinator.reporting.shown import Shown
from coordinator.reporting.wording import fmt as wfmt
from coordinator.results import shift_result

SHIFT_NOTE = (
    "The table shows each record's bin, not its value. The estimate is the Hodges-Lehmann "
    "estimate of the bin midpoints (the median of their differences y − x); the interval is "
    "the midpoints' Moses interval widened by a binning allowance λ: each difference is "
    "allowed to move by λ·(w_a + w_b)/2, w the two bins' widths. It contains the records' own "
    "Moses interval whenever every record lies in the central fraction λ of its bin, and it "
    "excludes 0 exactly when the table's rank count reaches the interval's critical value, so "
    "it never contradicts the table's rank test. Below it, what the bins allow for sure: every "
    "difference lies between its two bins' nearest and farthest limits, and so does each of "
    "their order statistics; the interval from the outer ends contains the records' own "
    "interval whatever their values in the bins (docs/methods.md §12.3).")
SHARED_OUT_NOTE = (
    "Some counts were shared out between limits another center added (docs/methods.md §2.5): "
    "the bounds hold for the table as shared out, not guaranteed for the records behind it.")


def _percent(level: Any) -> str:
    return f"{fmt(100 * float(level), 3)} %"


def _allowance(shift: dict[str, Any]) -> str:
    return fmt(shift["allowance"]) if shift.get("allowance") is not None else "?"


def printed_rows(shift: dict[str, Any]) -> list[list[Any]]:
    """(what, value): the midpoints' estimate and the widened interval; none for a result made
    before they existed."""
    if shift.get("binned_interval") is None:
        return []
    estimate = shift.get("estimate")
    low, high = shift["binned_interval"]
    return [
        ["estimate Δ̂ (bin midpoints)",
         "not estimable (an open end bin)" if estimate is None else fmt(estimate)],
        [f"{_percent(shift['level'])} interval (λ = {_allowance(shift)})",
         f"[{fmt(low)}, {fmt(high)}]"],
    ]


def shift_rows(shift: dict[str, Any]) -> list[list[Any]]:
    """(what, lies in) of the estimate and the interval's two ends, then the interval."""
    return [
        ["estimate Δ̂", f"[{fmt(shift['estimate_low'])}, {fmt(shift['estimate_high'])}]"],
        ["interval's lower end", f"[{fmt(shift['low_low'])}, {fmt(shift['low_high'])}]"],
        ["interval's upper end", f"[{fmt(shift['high_low'])}, {fmt(shift['high_high'])}]"],
        [f"{_percent(shift['level'])} interval (outer ends)",
         f"[{fmt(shift['interval'][0])}, {fmt(shift['interval'][1])}]"],
    ]


def rank_line(shift: dict[str, Any]) -> str:
    law = "U's exact law" if shift["method"] == "exact" else "the normal law of U"
    return (f"n_X = {fmt(shift['n_x'])}, n_Y = {fmt(shift['n_y'])}; the interval is "
            f"[D_({shift['rank']}), D_(nm+1−{shift['rank']})], rank from {law}, coverage "
            f"{_percent(shift['achieved_level'])} for continuous data")


SHIFT_COLUMNS = ("analysis", "estimate_low", "estimate_high", "low_low", "low_high", "high_low",
                 "high_high", "level", "achieved_level", "rank", "n_x", "n_y", "method",
                 "whole_counts", "estimate", "interval_low", "interval_high", "allowance")
# Each Hodges-Lehmann shift: the bounds the bins give its estimate and its interval's ends,
# then the printed figures (the midpoints' estimate and the widened interval, empty for a
# result made before them; docs/methods.md §12.3).
SHIFT_PART = ExportPart("shift", SHIFT_COLUMNS, "Shift", 120)


class Shift(Analysis[ShiftAnalysis, ShiftResult]):
    kind = "shift"
    spec_model = ShiftAnalysis
    result_model = ShiftResult
    # The console's form comes from the spec model's JSON schema; its label is shorter than
    # the model's first sentence (it heads the form and its Add and Remove buttons).
    form_label = "Hodges-Lehmann shift with its Moses interval (from the table)"

    def needs_table(self, analysis: ShiftAnalysis) -> bool:
        return True

    async def run(self, study: StudyRun, analysis: ShiftAnalysis) -> AnalysisResult:
        # The spec refuses a shift without `groups`, and one of more than two levels.
        return shift_result(await study.study_table(), analysis.level)

    def summary_lines(self, result: dict[str, Any], view: dict[str, Any],
                      shown: Sequence[str]) -> list[str]:
        shift = result
        lines = [f"Hodges-Lehmann shift of Y against X, {_percent(shift['level'])} Moses "
                 "interval, from the table's bins:"]
        lines += [f"  {what:<32}{value}" for what, value in printed_rows(shift)]
        if printed_rows(shift):
            lines.append("  what the bins allow the records' own figures (they lie in):")
        lines += [f"  {what:<32}{where}" for what, where in shift_rows(shift)]
        lines.append(f"  {rank_line(shift)}")
        if not shift.get("whole_counts", True):
            lines.append(f"  {SHARED_OUT_NOTE}")
        if left_out(shift):
            lines.append(f"  left out: {left_out(shift)}")
        return lines

    def report_parts(self, result: dict[str, Any], view: dict[str, Any]) -> list[str]:
        shift, esc = result, html.escape
        parts = [f"<h2>Hodges-Lehmann shift ({esc(_percent(shift['level']))} Moses "
                 "interval)</h2>"]
        parts += _left_out(shift)
        if printed_rows(shift):
            parts.append(_table(["of Y − X", "from the bins"], printed_rows(shift)))
        parts.append(_table(["the records' own", "lies in"], shift_rows(shift)))
        parts.append(f"<p>{esc(rank_line(shift))}.</p>")
        parts.append(f"<p class='note'>{esc(SHIFT_NOTE)}</p>")
        if not shift.get("whole_counts", True):
            parts.append(f"<p class='note'>{esc(SHARED_OUT_NOTE)}</p>")
        return parts

    # -- how it is written up --------------------------------------------------------------------

    algorithm_name = ("Hodges-Lehmann shift with Moses's interval from the federated table's bin "
                      "midpoints, widened by a binning allowance, with the bounds the bins allow "
                      "(docs/methods.md §12.3)")
    references = works("hodges", "moses")

    def methods(self, asked: ShiftAnalysis, result: ShiftResult,
                context: MethodsContext) -> list[str]:
        allowance = 0.5 if result.allowance is None else result.allowance
        context.cite("hodges")
        context.cite("moses")
        return ["The shift of Y against X was estimated by Hodges & Lehmann's (1963) median of "
                f"pairwise differences with Moses's (1953) {wfmt(100 * result.level)} % "
                "interval, computed on the federated table's bin midpoints, the interval widened "
                f"by a binning allowance of {wfmt(allowance)} times the bins' half-widths (it "
                "contains the records' own interval when each record lies in that central "
                "fraction of its bin, and excludes 0 only when the table's rank count is "
                "significant); the bounds the bins allow for sure are reported beside it "
                "(docs/methods.md §12.3). It spends no ε."]

    export_parts = (SHIFT_PART,)

    def export_rows(self, part: ExportPart, index: int, asked: ShiftAnalysis,
                    result: ShiftResult, study: Shown) -> list[Row]:
        printed = result.binned_interval or (None, None)
        return [{"analysis": index, **{k: getattr(result, k) for k in SHIFT_COLUMNS[1:-3]},
                 "interval_low": printed[0], "interval_high": printed[1],
                 "allowance": result.allowance}]
