"""The report's flags (docs/methods.md §9.6): the released DP numbers whose stated 95 %
uncertainty — the half-widths and intervals the results already carry, nothing recomputed — is
larger than ``shared.dp_utility.UNINFORMATIVE_SHARE`` of their size (records) or of their
bounds (values), one note each. Plain dicts, as ``coordinator.reporting.report`` reads a study."""

from __future__ import annotations

import math
from typing import Any

from shared.dp_utility import UNINFORMATIVE_SHARE, pct

SHOWN = pct(UNINFORMATIVE_SHARE)


def _records_note(what: str, halfwidth: Any, n: Any) -> str | None:
    if halfwidth is None or not n:
        return None
    share = float(halfwidth) / float(n)
    if share <= UNINFORMATIVE_SHARE:
        return None
    return (f"{what}: its 95 % error, ± {math.ceil(float(halfwidth))} records of n = {n} "
            f"({pct(share)}), is above {SHOWN}: uninformative")


def _value_note(what: str, interval: Any, bounds: Any) -> str | None:
    if not interval or not bounds or not bounds[1] > bounds[0]:
        return None
    share = (float(interval[1]) - float(interval[0])) / 2.0 / (float(bounds[1]) - float(bounds[0]))
    if share <= UNINFORMATIVE_SHARE:
        return None
    return (f"{what}: its 95 % interval [{interval[0]:.3g}, {interval[1]:.3g}] is ± {pct(share)} "
            f"of the bounds [{bounds[0]:g}, {bounds[1]:g}], above {SHOWN}: "
            "uninformative")


def _box_notes(index: int, analysis: dict[str, Any]) -> list[str | None]:
    group = analysis.get("group") or "all"
    boxes = [(f"{c} · {group}", b) for c, b in (analysis.get("per_center") or {}).items()]
    if analysis.get("pooled"):
        boxes.append((f"pooled · {group}", analysis["pooled"]))
    notes: list[str | None] = []
    for label, box in boxes:
        n = box.get("n")
        head = f"analysis {index} (dp_boxplot), {label}"
        notes.append(_records_note(f"{head}, quartiles", box.get("quartile_rank_halfwidth"), n))
        at_psi = [side for side, key in (("lower", "lower_branch"), ("upper", "upper_branch"))
                  if box.get(key) == "extreme"]
        if at_psi:
            notes.append(_records_note(f"{head}, {' and '.join(at_psi)} whisker at ψ",
                                       box.get("extreme_rank_halfwidth"), n))
        notes.append(_records_note(f"{head}, outlier counts", box.get("outlier_halfwidth"), n))
    return notes


def _describe_notes(index: int, analysis: dict[str, Any], spec: dict[str, Any]
                    ) -> list[str | None]:
    if analysis.get("mode") != "dp":
        return []
    asked = (spec.get("analyses") or [{}] * (index + 1))[index].get("bounds") or {}
    rows = analysis.get("rows") or []
    notes: list[str | None] = []
    for row in rows:
        variable = row.get("variable")
        # The public bounds: as asked, else the widest clip range the centers' rows show.
        bounds = asked.get(variable)
        if bounds is None:
            clips = [r["clip"] for r in rows if r.get("variable") == variable and r.get("clip")]
            bounds = (min(c[0] for c in clips), max(c[1] for c in clips)) if clips else None
        head = (f"analysis {index} (describe), {variable} · {row.get('center')} · "
                f"{row.get('arm')}")
        iv = row.get("n_interval")
        if iv:
            notes.append(_records_note(f"{head}, N", (iv[1] - iv[0]) / 2.0, row.get("n")))
        notes.append(_records_note(f"{head}, quartiles", row.get("rank_halfwidth"),
                                   row.get("n")))
        notes.append(_value_note(f"{head}, mean", row.get("mean_interval"), bounds))
    return notes


def _quantile_notes(index: int, analysis: dict[str, Any]) -> list[str | None]:
    group = analysis.get("group") or "all"
    n = analysis.get("n") or {}
    return [_records_note(f"analysis {index} (dp_quantiles), {center} · {group}", h,
                          n.get(center))
            for center, h in (analysis.get("rank_halfwidth") or {}).items()]


def uninformative_notes(view: dict[str, Any]) -> list[str]:
    """One note per released DP number whose stated 95 % uncertainty is above
    :data:`shared.dp_utility.UNINFORMATIVE_SHARE` of its size (records) or of its bounds
    (values), from the half-widths and intervals the result carries (no recomputation)."""
    result = view.get("result") or {}
    spec = view.get("spec") or {}
    notes: list[str | None] = []
    for index, analysis in enumerate(result.get("analyses") or []):
        if analysis.get("status", "succeeded") == "failed":
            continue
        kind = analysis.get("kind")
        if kind == "dp_boxplot":
            notes += _box_notes(index, analysis)
        elif kind == "dp_quantiles":
            notes += _quantile_notes(index, analysis)
        elif kind == "describe":
            notes += _describe_notes(index, analysis, spec)
    return [n for n in notes if n is not None]
