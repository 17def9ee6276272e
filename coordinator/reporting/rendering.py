"""What renders a study's view for people (the plain-text summary and the HTML report of
``coordinator.reporting.report``): the shared helpers, notes and figures each analysis draws its
part with
(``coordinator/analyses/<kind>.py``, ``summary_lines`` and ``report_parts``).

Both are drawn from the coordinator's answer only (``GET /v1/studies/{id}``): the released
federated table, the MWU tests and whatever DP analyses the study ran. Analysis kinds this module
does not know are still shown, as their numbers; any result holding a seven-number summary
(``q1``, ``median``, ``q3``, whiskers) is drawn in the boxplot figure. Figures are inline SVG, so
the report reads offline.

Which centers a study used is shown as the result says (docs/coordinator.md, "Statuses and
partial results"): each center included or excluded with why, each analysis's left-out centers,
and each analysis that failed with its error; a center left out is never listed as included.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from coordinator.reporting import charts

T = TypeVar("T")

BOX_KEYS = ("lower_whisker", "q1", "median", "q3", "upper_whisker")

EFFECT_NOTE = (
    "θ = P(Y > X) + ½·P(Y = X), the probabilistic index: ½ is no difference, above ½ Y tends "
    "to be larger. A center's θ is its own; \"stratified\" is the centers' θ weighted by "
    "n_X·n_Y, the effect the sum test tests. 95 % score intervals (Newcombe 2006, Method 5), "
    "widened for the centers' DP noise where there is any.")
WHISKER_RULE = (
    "Method: DPBoxplot (Ramsay & Diaz-Rodriguez, Differentially Private Boxplots, ICML 2025, "
    "arXiv 2405.20415) as its authors' code runs it, not the paper's Algorithm 1 as written: "
    "the extremes come from a one-sided walk that estimates about the 1 − 1/(20√n) quantile "
    "(and the 1/(20√n) quantile below), not the maximum and minimum, so up to about √n/20 "
    "records may lie beyond them. Whiskers: the upper whisker is that high quantile ψ if it "
    "lies within (1 − n^(−1/4))·1.5·IQR above Q3, else Tukey's fence Q3 + 1.5·IQR (marked "
    "\"fence\"); the lower one likewise below Q1; both kept inside the bounds. A whisker on the "
    "box's edge means ψ fell inside the box. A center's outlier counts are differentially "
    "private counts of records beyond its whiskers, shown with the 95 % interval of the true "
    "count [low, high].")
POOLED_WHISKER_RULE = (
    "The pooled box (one DP histogram of every center's records, docs/methods.md §6) draws "
    "Tukey's whiskers of the pooled records: the fences Q1 − 1.5·IQR and Q3 + 1.5·IQR from its "
    "DP quartiles, each whisker the histogram's estimate of the most extreme record inside its "
    "fence — the fence itself (marked \"fence\") unless the histogram shows the records ending "
    "inside it. Its outlier counts are DP counts of the records beyond the fences (Tukey's "
    "outliers), with the 95 % interval of the true count. The histogram cannot see fewer "
    "records than its count error: where the records end among the last few before the fence, "
    "the whisker is the fence, so on short-tailed data it may lie beyond every record.")
FRACTIONAL_NOTE = (
    "Counts may be fractional: when a center splits a bin, the coordinator shares that bin's "
    "count out over the new bins in proportion to the center's own counts in them (seed 001, "
    "Algorithm 6); totals and every center's own releases are whole numbers.")
BIN_NOTE = "Bin (a, b] holds the values above a up to and including b; the first also holds a."


def number(value: Any) -> float:
    """A JSON number as the coordinator writes it ("Infinity" strings for open table ends)."""
    return float(value)


def fmt(value: Any, digits: int = 4) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return str(value)
    try:
        x = float(value)
    except ValueError:
        return str(value)
    if isinstance(value, int) or (math.isfinite(x) and x == int(x) and abs(x) < 1e12):
        return str(int(x))
    if not math.isfinite(x):
        return "∞" if x > 0 else "−∞"
    return f"{x:.{digits}g}"


def bin_label(limits: list[Any], i: int) -> str:
    """Bin ``i`` as the table defines it: ``(a, b]``, the first one ``[a, b]``; open at ±∞."""
    left = "[" if i == 0 and math.isfinite(number(limits[0])) else "("
    right = "]" if math.isfinite(number(limits[i + 1])) else ")"
    return f"{left}{fmt(limits[i])}, {fmt(limits[i + 1])}{right}"


def dp_count(count: Any, halfwidth: Any) -> str:
    """A DP count with the 95 % interval of the true count, clipped at 0. The half-width is
    rounded up: a rounded Laplace count is within ⌈h⌉ of the truth at least as often as the
    unrounded one is within h."""
    if count in (None, "") or halfwidth is None:
        return fmt(count) if count not in (None, "") else ""
    c, h = int(number(count)), math.ceil(number(halfwidth))
    return f"{c} [{max(0, c - h)}, {c + h}]"


NULL_LABELS = {
    "normal": "N(0, 1)",
    "exact": "U's exact permutation law",
    "exact+noise": "U's exact law + Laplace noise, exact",
    "normal+noise": "N(0, V) + Laplace noise, exact",
}
"""What a Mann-Whitney p-value was computed from (``shared.mwu.NULLS``), as the report says it."""


def null_label(null: str | None) -> str:
    return NULL_LABELS.get(null or "", null or "")


def mwu_test_rows(mwu: dict[str, Any]) -> list[list[Any]]:
    """(test, statistic, the law its p-value comes from, p-value). The statistic is a z-value
    (Fisher's: T); the law is the one ``shared.mwu`` computed the p-value from — for a noisy
    release not N(0, 1) but the exact law of normal + Laplace noise, for small centers U's exact
    law, for Fisher χ²(2L) over the centers' p-values and the laws those came from. A result
    stored before the tests named their law shows z / χ²."""
    rows: list[list[Any]] = []
    for name, test in mwu["tests"].items():
        null = test.get("null")
        if name == "fisher":
            df = test.get("df") or 2 * len(test.get("parts") or [])
            law = f"χ²({df})"
            parts = sorted({null_label(p.get("null")) for p in test.get("parts") or []
                            if p.get("null")})
            if null and parts:
                law += f" of the centers' p-values from {' / '.join(parts)}"
        else:
            law = f"z; p from {null_label(null)}" if null else "z"
        rows.append([name, test["statistic"], law, test["pvalue"]])
    return rows


def effect_rows(mwu: dict[str, Any]) -> list[list[Any]]:
    """(center, n_X, n_Y, θ̂, "[low, high]") for each effect of an ``mwu`` result."""
    return [[e["center"], e["n_x"], e["n_y"], e["estimate"],
             f"[{fmt(e['low'], 3)}, {fmt(e['high'], 3)}]"]
            for e in mwu.get("effects") or []]


def box_row(label: str, box: dict[str, Any]) -> list[Any]:
    """One boxplot's row: n (the pooled box's, a DP count, with its 95 % interval), the DP
    outlier counts with their intervals, the five numbers (a whisker at Tukey's fence marked
    so, one at the walk's high or low quantile ψ not), and ε."""
    h = box.get("outlier_halfwidth")
    five: list[Any] = [box[k] for k in BOX_KEYS]
    for i, side in ((0, "lower_branch"), (4, "upper_branch")):
        if box.get(side) == "fence":
            five[i] = f"{fmt(five[i], 4)} (fence)"
    n = box.get("n", "")
    if box.get("n_halfwidth") is not None:  # the pooled box's DP root count
        n = dp_count(n, box["n_halfwidth"])
    return [label, n, dp_count(box.get("lower_outliers"), h), *five,
            dp_count(box.get("upper_outliers"), h), box.get("epsilon", "")]


BOX_UNCERTAINTY_HEADER = ["", "Q1, median, Q3 (95 %)", "whisker at ψ (95 %)"]
BOX_UNCERTAINTY_NOTE = (
    "Uncertainty, in records: a center's quartiles are each within ± the stated number of "
    "ranks of their level with probability about 95 % (JointExp at ε/2: its Laplace bridge, "
    "where the data are evenly spread); the pooled box's quartiles and further levels within "
    "± that many ranks about the tree leaf holding them (the noise of the tree nodes summed, "
    "conservative). A whisker at ψ: the walk's grid step next to ψ is within ± that many ranks "
    "of its count target (n − √n/20; n for Algorithm 1) with probability at least 95 % for any "
    "data (a pooled box stored before its whiskers were Tukey's: at most the centers' "
    "Σ √n/20 + that many pooled records lie beyond its whisker at ψ). A fence whisker, "
    "Q ± 1.5·IQR, carries the quartiles' uncertainty, as do the pooled box's whiskers; "
    "outlier counts show their 95 % interval beside them (Laplace; "
    "pooled: the sum of the centers' Laplace counts), as does the pooled box's n (its DP "
    "root count; a center's n is the public size its λ_n uses) (docs/methods.md §9.1, "
    "§9.4-§9.5).")


def box_uncertainty_rows(analysis: dict[str, Any]) -> list[list[str]]:
    """(label, quartiles' rank error, ψ's rank error) of each box of a ``dp_boxplot`` result
    that states them."""
    rows = []
    for label, found in dp_boxes(analysis):
        quartiles, extreme = (found.get("quartile_rank_halfwidth"),
                              found.get("extreme_rank_halfwidth"))
        if quartiles is None and extreme is None:
            continue
        rows.append([label, rank_error(quartiles) + " ranks" if quartiles is not None else "n/a",
                     rank_error(extreme) + " ranks" if extreme is not None else "n/a"])
    return rows


BOX_HEADER = ["", "n", "outliers below", "lower whisker", "Q1", "median", "Q3", "upper whisker",
              "outliers above", "ε"]


def succeeded(analysis: dict[str, Any]) -> bool:
    """Results stored before analyses had a status have none: they succeeded."""
    return analysis.get("status", "succeeded") != "failed"


def analyses_of(view: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    """The results of the analyses of ``kind`` that succeeded."""
    result = view.get("result") or {}
    return [a for a in result.get("analyses", []) if a.get("kind") == kind and succeeded(a)]


def error_text(error: dict[str, Any]) -> str:
    return f"{error.get('error')}: {error.get('detail')}"


def reason_text(excluded: dict[str, Any]) -> str:
    """Why a center was left out: its failure kind, what happened, the center's own code."""
    code = f" [{excluded['center_error']}]" if excluded.get("center_error") else ""
    return f"{excluded.get('kind')}: {excluded.get('detail')}{code}"


def failed_analyses(view: dict[str, Any]) -> list[tuple[int, str, dict[str, Any]]]:
    """(index in the spec, kind, error) of every analysis that gave no result."""
    result = view.get("result") or {}
    return [(i, str(a.get("kind")), a.get("error") or {})
            for i, a in enumerate(result.get("analyses") or []) if not succeeded(a)]


def left_out(analysis: dict[str, Any]) -> str:
    """The centers an analysis's result was made without, and why ("" when none)."""
    return "; ".join(f"{e['center']} ({reason_text(e)})" for e in analysis.get("excluded") or [])


def center_rows(result: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(center, "included" | "excluded", why or where it was left out) for every center asked.

    From the result's ``center_status``; a result stored before it existed has only the centers
    asked and those left out at the survey."""
    kinds = [str(a.get("kind")) for a in result.get("analyses") or []]
    rows = []
    status = result.get("center_status")
    if not status:
        surveyed_out = {e["center"]: e for e in result.get("excluded") or []}
        return [(c, "excluded", reason_text(surveyed_out[c])) if c in surveyed_out
                else (c, "included", "") for c in result.get("centers") or []]
    for entry in status:
        reason = entry.get("reason")
        where = ", ".join(f"analysis {i} ({kinds[i]})" if i < len(kinds) else f"analysis {i}"
                          for i in entry.get("left_out_of") or [])
        if entry["status"] == "excluded":
            note = reason_text(reason) if reason else "no result holds its releases"
        elif where:
            note = f"left out of {where}" + (f": {reason_text(reason)}" if reason else "")
        else:
            note = ""
        rows.append((entry["center"], entry["status"], note))
    return rows


def centers_line(result: dict[str, Any]) -> str:
    rows = center_rows(result)
    included = [c for c, status, _ in rows if status == "included"]
    excluded = [c for c, status, _ in rows if status == "excluded"]
    return (f"centers included: {', '.join(included) or 'none'}"
            + (f"; excluded: {', '.join(excluded)}" if excluded else ""))


def found_in(
    node: Any, match: Callable[[dict[str, Any]], T | None], default: str, label: str = ""
) -> Iterator[tuple[str, T]]:
    """What ``match`` finds in every object of a result (not inside what it found), labelled by
    the object's ``center``, else the keys that lead to it, else ``default``."""
    if isinstance(node, dict):
        found = match(node)
        if found is not None:
            yield (str(node.get("center") or label or default), found)
            return
        for key, value in node.items():
            yield from found_in(value, match, default, str(key) if not label else f"{label} {key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            name = value.get("center") if isinstance(value, dict) else None
            yield from found_in(value, match, default, str(name) if name else (label or str(i)))


def boxes(node: Any, label: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every seven-number summary inside a result, labelled by the keys that lead to it."""
    return found_in(node, lambda d: d if all(k in d for k in BOX_KEYS) else None, "boxplot",
                    label)


def dp_boxes(analysis: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The boxes of a ``dp_boxplot`` result: each center's, then the pooled one, by group."""
    group = analysis.get("group") or "all"
    found = [(f"{center} · {group}", box)
             for center, box in (analysis.get("per_center") or {}).items()]
    if analysis.get("pooled"):
        found.append((f"pooled · {group}", analysis["pooled"]))
    return found


POOLED_LEVELS_NOTE = ("Read off the pooled box's tree histogram by the quartiles' interpolation "
                      "(post-processing of the same releases: no further ε).")


def pooled_levels(analysis: dict[str, Any]) -> tuple[str, list[Any], list[Any]] | None:
    """The further levels of a ``dp_boxplot`` result's pooled box: (label, levels, values), or
    None when it has none (no pooled box, or a result stored before levels were read)."""
    found = (analysis.get("pooled") or {}).get("levels") or []
    if not found:
        return None
    return (f"pooled · {analysis.get('group') or 'all'}", [lv["level"] for lv in found],
            [lv["value"] for lv in found])


def estimate_rows(analysis: dict[str, Any]) -> list[tuple[str, list[Any] | None, str | None]]:
    """The rows of a ``quantiles`` result: (estimator · group, quantiles or None, why not)."""
    return [
        (f"{estimator} · {group}", est.get("quantiles"), est.get("error"))
        for estimator, by_group in (analysis.get("estimates") or {}).items()
        for group, est in by_group.items()
    ]


def quantiles_heading(analysis: dict[str, Any]) -> str:
    """A ``quantiles`` result's heading: what it released. The table estimators release
    nothing more; YJ data spends ε on the centers' DP moment sums."""
    if "yj_data" in (analysis.get("estimates") or {}):
        return ("Federated quantiles (the table estimators from the table, nothing more "
                "released; YJ data from ε-DP moment sums each center released)")
    return "Federated quantiles (from the table; nothing more released)"


QUANTILE_BRACKET_NOTE = (
    "Table bracket: the bins of the federated table the sample quantile lies in, whatever the "
    "estimator (95 % or more: certain where the counts are whole; where a center split bins "
    "and the counts were shared out, the neighbouring bins are included, conservative; "
    "docs/methods.md §8.9).")


def bracket_rows(analysis: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """The table brackets of a ``quantiles`` result: (label, "[low, high]" per level)."""
    return [(f"table bracket · {group}", [f"[{fmt(lo, 4)}, {fmt(hi, 4)}]" for lo, hi in pairs])
            for group, pairs in (analysis.get("brackets") or {}).items()]


def dp_quantile_rows(analysis: dict[str, Any]) -> list[tuple[str, list[Any], Any, Any]]:
    """The rows of a ``dp_quantiles`` result: (center · group, its released quantiles, its n,
    the 95 % rank error of each value in records or None)."""
    group = analysis.get("group") or "all"
    n = analysis.get("n") or {}
    ranks = analysis.get("rank_halfwidth") or {}
    return [(f"{center} · {group}", values, n.get(center), ranks.get(center))
            for center, values in (analysis.get("per_center") or {}).items()]


def rank_error_note(algorithm: Any) -> str:
    """What a ``dp_quantiles`` result's rank error means for its algorithm."""
    if algorithm == "unbounded":
        return ("The unbounded walk's values are points of its geometric grid (β = 1.001 from "
                "the lower bound a): with probability at least 95 % for any data, the grid step "
                "below each value, [a − 1 + (v − a + 1)/β, v), holds the level's rank within "
                "the rank error (the records inside one step cannot be told apart; "
                "docs/methods.md §9.3; n is rounded down to the center's K).")
    return ("Each value's rank among the center's n records is within the rank error of the "
            "level asked with probability about 95 % where the data are evenly spread (a "
            "guide, not a bound; n is rounded down to the center's K).")


def rank_error(value: Any) -> str:
    return f"± {math.ceil(number(value))}" if value is not None else "n/a"


def _levels_and_values(node: dict[str, Any]) -> tuple[list[Any], list[Any]] | None:
    levels, values = node.get("levels"), node.get("values")
    if isinstance(levels, list) and isinstance(values, list) and len(levels) == len(values):
        return levels, values
    return None


def quantile_rows(node: Any, label: str = "") -> Iterator[tuple[str, list[Any], list[Any]]]:
    """Every (levels, values) pair inside a result, labelled by the keys that lead to it."""
    for name, (levels, values) in found_in(node, _levels_and_values, "quantiles", label):
        yield name, levels, values


# -- text ----------------------------------------------------------------------------------------


# -- figures -------------------------------------------------------------------------------------


def _inline(svg: bytes) -> str:
    """An SVG document from ``coordinator.reporting.figures`` as an element to put in a page."""
    text = svg.decode()
    return text[text.index("<svg"):]


def table_svg(table: dict[str, Any], groups: list[str]) -> str:
    """The federated table's figure (``coordinator.reporting.charts.table_figure``)."""
    return _inline(charts.table_figure(table["limits"], table["counts"], groups,
                                        title="Federated K-anonymous table, cumulative"))


def boxplot_svg(analysis: dict[str, Any], title: str) -> str:
    """A DP boxplot analysis' figure (``coordinator.reporting.charts.draw_boxes``, as the API's
    figure:
    the outliers are DP counts beside each whisker)."""
    return _inline(charts.draw_boxes(dp_boxes(analysis), title=title))


# -- HTML ----------------------------------------------------------------------------------------

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;max-width:980px;margin:2em auto;
padding:0 1em;color:#1b1f24}
h1{font-size:1.5em}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #d0d7de}
table{border-collapse:collapse;margin:.6em 0}td,th{border:1px solid #d0d7de;padding:.25em .6em;
text-align:right}th{background:#f6f8fa}td:first-child,th:first-child{text-align:left}
.note{background:#fff8c5;padding:.5em .8em;border-radius:4px}.meta{color:#57606a}
figure{margin:1em 0}svg{max-width:100%;height:auto}td{white-space:nowrap}.scroll{overflow-x:auto}
table.record td{white-space:normal;text-align:left;overflow-wrap:anywhere}
table.record th{text-align:left;white-space:nowrap}
"""


DESCRIBE_ALL = "all"


NOT_ESTIMABLE = "not estimable"
"""What a Table 1 shows for a number its source cannot pin: a DP variance <= 0, or a table's
bins too coarse for the stated accuracy (``shared.describe.TABLE_ACCURACY``); the exact bounds
on the line below say what the data allow."""


def _mean_sd(row: dict[str, Any]) -> str:
    if row.get("mean") is None:
        return NOT_ESTIMABLE if row.get("mean_interval") is not None else "—"
    if row.get("sd") is not None:
        sd = f" ({fmt(row['sd'], 3)})"
    elif row.get("n", 0) >= 2 or row.get("sd_interval") is not None:
        sd = " (SD not estimable)"  # a DP variance <= 0, or bins too coarse: never 0
    else:
        sd = ""
    return f"{fmt(row['mean'], 3)}{sd}"


def _median_iqr(row: dict[str, Any]) -> str:
    """"median [Q1, Q3]"; each one its bins cannot pin "not estimable" (all three: once)."""
    names = ("median", "q1", "q3")
    if all(row.get(name) is None for name in names):
        return NOT_ESTIMABLE if row.get("median_interval") is not None else "—"

    def one(name: str) -> str:
        value = row.get(name)
        return NOT_ESTIMABLE if value is None else fmt(value, 3)

    return f"{one('median')} [{one('q1')}, {one('q3')}]"


def _interval(value: Any) -> str:
    """A 95 % interval as "[low, high]" ("—" where none is stated)."""
    if not value:
        return "—"
    return f"[{fmt(value[0], 3)}, {fmt(value[1], 3)}]"


def _n(row: dict[str, Any]) -> str:
    """N, with its interval when it is a DP count (a table's N is exact)."""
    iv = row.get("n_interval")
    if iv and iv[0] != iv[1]:
        return f"{row['n']} [{fmt(math.floor(iv[0]), 6)}, {fmt(math.ceil(iv[1]), 6)}]"
    return str(row["n"])


def _quartile_intervals(row: dict[str, Any]) -> str:
    """The 95 % intervals of Q1, median and Q3, "Q1 […]; median […]; Q3 […]"."""
    if not any(row.get(k) for k in ("q1_interval", "median_interval", "q3_interval")):
        return "—"
    return "; ".join(f"{name} {_interval(row.get(key))}" for name, key in
                     (("Q1", "q1_interval"), ("median", "median_interval"),
                      ("Q3", "q3_interval")))


def _missing(row: dict[str, Any]) -> str:
    """"m (p %)", a DP count followed by its 95 % interval."""
    missing = row.get("missing")
    if missing is None:
        return "—"
    n = int(row.get("n") or 0) + int(missing)
    shown = f"{int(missing)} ({100.0 * int(missing) / n:.1f} %)" if n else str(missing)
    interval = row.get("missing_interval")
    return f"{shown} {_interval(interval)}" if interval is not None else shown


def _shown(key: str) -> Callable[[dict[str, Any]], str]:
    return lambda row: _interval(row.get(key))


TABLE_ONE_LINES: tuple[tuple[str, Callable[[dict[str, Any]], str]], ...] = (
    ("  n", _n),
    ("  mean (SD)", _mean_sd),
    ("    mean: {interval}", _shown("mean_interval")),
    ("    SD: {interval}", _shown("sd_interval")),
    ("  median [Q1, Q3]", _median_iqr),
    ("    median: {interval}", _shown("median_interval")),
    ("    Q1: {interval}", _shown("q1_interval")),
    ("    Q3: {interval}", _shown("q3_interval")),
    ("  missing, n (%)", _missing),
)
"""The lines of each variable's block in a Table 1: the number, then its interval ("95 %
interval" of a DP number, "exact bounds" from a table's bins)."""


def share_text(cell: dict[str, Any], interval: bool = False) -> str:
    """A category's "n (%)", with ``interval`` its share's 95 % interval "[low, high]"."""
    text = fmt(round(cell["count"], 1))
    if cell.get("percent") is not None:
        text += f" ({cell['percent']:.1f} %)"
        if interval and cell.get("low") is not None:
            text += f" [{cell['low']:.1f}, {cell['high']:.1f}]"
    return text


def missing_share(arm: dict[str, Any] | None) -> str:
    """An arm's missing "n (%)" of all its records ("—" where not released)."""
    if arm is None or arm.get("missing") is None:
        return "—"
    missing = float(arm["missing"])
    total = float(arm.get("n") or 0) + missing
    shown = fmt(round(missing, 1))
    return f"{shown} ({100.0 * missing / total:.1f} %)" if total > 0 else shown


def category_block(variable: str, found: dict[tuple[str, str, str], dict[str, Any]],
                   columns: list[tuple[str, str]], *, interval: bool = False
                   ) -> list[list[str]]:
    """A categorical variable's lines of a table: a heading line, one line per released cell
    ("n (%)" per column), then "missing, n (%)"; ``found`` maps (variable, center, arm) to a
    ``CategoryArm``."""
    cells = [found.get((variable, c, a)) for c, a in columns]
    labels = list(dict.fromkeys(cell["label"] for arm in cells if arm is not None
                                for cell in arm["cells"]))
    rows = [[f"{variable}, n (%)", *("" for _ in columns)]]
    for label in labels:
        line = [f"  {label}"]
        for arm in cells:
            cell = next((x for x in (arm or {}).get("cells") or [] if x["label"] == label),
                        None)
            line.append(share_text(cell, interval) if cell is not None else "—")
        rows.append(line)
    rows.append(["  missing, n (%)", *(missing_share(arm) for arm in cells)])
    return rows


CATEGORY_NOTE = (
    "n (%) per category of the records with a category (the missing cell apart); missing, n "
    "(%) of all the arm's records. K-anonymous counts are exact, each 0 or at least K: a cell "
    "of 1..K-1 records at a center (the missing cell included) is merged with its neighbours "
    "in the declared order, shown as \"a or b\" (docs/privacy.md, guarantee 15). ε-DP counts "
    "carry two-sided geometric noise: each center's arm is shown as the nonnegative integers "
    "nearest its noisy counts that add up to the arm's one N (the column's N in a Table 1), "
    "overall and pooled counts the sums of those shown.")


def table_one(analysis: dict[str, Any], groups: list[str] | None, *, per_center: bool = False
              ) -> tuple[list[str], list[list[str]]]:
    """A describe result as a journal's "Table 1": one block per variable (its unit in the
    name), lines n, mean (SD), median [Q1, Q3] and missing n (%), each number with its 95 %
    interval (DP: of what the exact data would give; table: exact bounds from the bins); columns
    the arms pooled over the centers, then Overall, and with ``per_center`` each center's arms
    and its overall column ("center: arm"). Without pooled rows only ``per_center`` gives one."""
    arms = [*(groups or []), DESCRIBE_ALL]
    found = {(r["variable"], r["center"], r["arm"]): r for r in analysis.get("rows") or []}
    found_categorical = {(r["variable"], r["center"], r["arm"]): r
                         for r in analysis.get("categorical") or []}
    pooled = any(c == "pooled" for _, c, _ in found)
    centers = list(dict.fromkeys(c for _, c, _ in [*found, *found_categorical]
                                 if c != "pooled")) if per_center else []
    if not pooled and not centers:
        return [], []
    units = analysis.get("units") or {}
    interval = "95 % interval" if analysis.get("mode") == "dp" else "exact bounds"
    columns = ([("pooled", a) for a in arms] if pooled else []) + [
        (c, a) for c in centers for a in arms]
    header = ["variable", *((groups or []) + ["Overall"] if pooled else []), *(
        f"{c}: {a if a != DESCRIBE_ALL else 'overall'}" for c in centers for a in arms)]
    rows: list[list[str]] = []
    # A DP Table 1's one N per column, which every row of the column adds up to (n + missing,
    # categories + missing), first (coordinator.protocols.table_one).
    sizes = {(s["center"], s["arm"]): s for s in analysis.get("sizes") or []}
    if sizes:
        rows.append(["N", *(_n(sizes[key]) if key in sizes else "—" for key in columns)])
    variables = list(dict.fromkeys(v for v, _, _ in found))
    for v in variables:
        name = f"{v} ({units[v]})" if v in units else v
        cells = [found.get((v, c, arm)) for c, arm in columns]
        rows.append([name, *("" for _ in columns)])
        for label, show in TABLE_ONE_LINES:
            rows.append([label.format(interval=interval),
                         *(show(c) if c is not None else "—" for c in cells)])
    for v in dict.fromkeys(v for v, _, _ in found_categorical):
        rows += category_block(v, found_categorical, columns)
    return header, rows


def reused_note(table: dict[str, Any]) -> str | None:
    """How a table read from the coordinator's kept tables was obtained: what it is (K, the
    centers and their data versions, when), and the study that obtained it only where the
    reader may see it (``coordinator.api.access``); ``None`` for a table asked of the centers."""
    reused = table.get("reused")
    if reused is None:
        return None
    epochs = ", ".join(f"{c} epoch {e}" for c, e in reused["centers"].items())
    source = f", by study {table['reused_from']}" if table.get("reused_from") else ""
    return (f"Read from a table the coordinator kept (K = {reused['k']}; {epochs}; obtained "
            f"{reused['obtained_at']}{source}): nothing was asked of the centers.")


MISSING_NOTE = (
    "Missing, n (%) of a numeric variable: the records of the arm missing it, from each "
    "center's exact missing counts (each 0 or at least K: a level's 1..K-1 records missing a "
    "variable leave the level, a variable present on 1..K-1 records is withheld there; no ε), "
    "or in an ε-DP Table 1 the noisy count each center's description released with its count "
    "(one Laplace mechanism on the two disjoint counts, at the count's scale: no more ε under "
    "add/remove), with its 95 % interval; \"—\" where a center releases neither (it counts "
    "complete cases only).")


def _categorical_note(analysis: dict[str, Any]) -> str:
    said = [CATEGORY_NOTE] if analysis.get("categorical") else []
    return "".join(" " + n for n in [*said, *(analysis.get("notes") or [])])


def table_one_note(analysis: dict[str, Any], k: int) -> str:
    """The footnote of a Table 1: how its numbers were made and what they cost."""
    if analysis.get("mode") == "dp":
        parts = "; ".join(
            f"{v}: " + ", ".join(
                f"{p['name']} ε = {fmt(p['epsilon'], 3)} ({p['mechanism']}"
                + (f", scale {fmt(p['scale'], 3)}" if p.get("scale") is not None else "") + ")"
                for p in noise)
            for v, noise in (analysis.get("noise") or {}).items())
        return (f"ε-differentially private: each center spent ε = {fmt(analysis['epsilon'])} per "
                "variable and arm, split as " + parts + " (the sums' scales as at the first "
                "center: they follow each center's DP range). Values clipped to public bounds; "
                "each center's sums clipped further to a DP range read off its DP quartiles "
                "(the mean and SD are those of the values so clipped); pooled numbers add the "
                "centers' noisy counts, sums and histograms (the pooled median and quartiles are "
                "read from the summed noisy histogram tree). No minimum or maximum is released. "
                "Every interval is 95 %, of the number the exact data would give (the DP noise, "
                "not the sampling error): n from the Laplace law of the noisy count; mean and SD "
                "by a basic bootstrap of the noise laws; quartiles from the rank error of the "
                "exponential mechanism or of the summed histogram, read off the noisy histogram. "
                "An SD the noise leaves at a variance <= 0 is shown as not estimable. "
                + MISSING_NOTE + _categorical_note(analysis))
    return (f"From the federated K-anonymous tables (K = {k}; every count 0 or at least K), no "
            "ε spent: n exact; mean and SD from the bins' midpoints, median and quartiles by "
            "interpolation within bins. The intervals are exact bounds, not estimates: every "
            "record lies in its bin, so the mean lies between the means with every record at "
            "its bin's lower and at its upper limit, each quartile in the bin that holds "
            "its rank, and the SD between the least and the largest SD of records placed "
            "anywhere in their bins. Minimum and maximum are not released without "
            "ε. A number the bins cannot pin within half the least SD they allow (the SD: "
            "within half of it) is shown as not estimable, its exact bounds below it (a "
            "center's own table, one more exact release beside the federated one, may be "
            "coarsened to a few bins). " + MISSING_NOTE + _categorical_note(analysis))


def describe_rows(analysis: dict[str, Any]) -> list[list[Any]]:
    """Every row of a describe result (per center and pooled), for the detailed table."""
    return [[r["variable"], r["center"], r["arm"], _n(r), _mean_sd(r),
             _interval(r.get("mean_interval")), _interval(r.get("sd_interval")),
             _median_iqr(r), _quartile_intervals(r),
             fmt(math.ceil(r["rank_halfwidth"])) if r.get("rank_halfwidth") is not None else "—",
             _interval(r.get("clip")), fmt(r["epsilon"])]
            for r in analysis.get("rows") or []]


DESCRIBE_HEADER = ["variable", "center", "arm", "n [95 %]", "mean (SD)", "mean: 95 %",
                   "SD: 95 %", "median [Q1, Q3]", "quartiles: 95 %", "rank error (95 %)",
                   "sums clipped to", "ε per center"]


def _table(header: list[str], rows: list[list[Any]]) -> str:
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(fmt(c) if not isinstance(c, str) else c)}</td>"
                         for c in row) + "</tr>"
        for row in rows
    )
    return f"<div class='scroll'><table><tr>{head}</tr>{body}</table></div>"


def _left_out(analysis: dict[str, Any]) -> list[str]:
    """A paragraph naming the centers an analysis was made without, if any."""
    text = left_out(analysis)
    return [f"<p class='note'>Left out of this analysis: {html.escape(text)}</p>"] if text else []


# -- an analysis this coordinator does not register, shown as its numbers -------------------------


def excluded_line(analysis: dict[str, Any]) -> list[str]:
    """The summary's line naming the centers an analysis was made without, if any."""
    return [f"  left out: {left_out(analysis)}"] if left_out(analysis) else []


def generic_summary_lines(analysis: dict[str, Any]) -> list[str]:
    """The summary of a result of a kind no registered analysis draws: its quantiles and
    seven-number summaries, wherever they are."""
    lines = [f"{analysis.get('kind')}:", *excluded_line(analysis)]
    for label, levels, values in quantile_rows(analysis):
        pairs = ", ".join(f"q{fmt(lv, 3)}={fmt(v, 4)}" for lv, v in
                          zip(levels, values, strict=True))
        lines.append(f"  {label}: {pairs}")
    for label, box in boxes(analysis):
        row = box_row(label, box)
        nums = "  ".join(f"{fmt(v, 3):>6}" for v in row[3:8])
        lines.append(f"  {label:<24}{fmt(row[1]):>6}  {row[2]:>14}  {nums}  {row[8]:>14}")
    return lines


def generic_report_parts(analysis: dict[str, Any]) -> list[str]:
    """The report's section of a result of a kind no registered analysis draws: its quantiles
    and seven-number summaries as tables, else its JSON."""
    parts = [f"<h2>{html.escape(str(analysis.get('kind')))}</h2>", *_left_out(analysis)]
    q = list(quantile_rows(analysis))
    if q:
        levels = q[0][1]
        parts.append(_table(["", *(f"q{fmt(lv, 3)}" for lv in levels)],
                            [[label, *values] for label, _, values in q]))
    b = list(boxes(analysis))
    if b:
        parts.append(_table(BOX_HEADER, [box_row(label, box) for label, box in b]))
    if not q and not b:
        parts.append(f"<pre>{html.escape(json.dumps(analysis, indent=2))}</pre>")
    return parts


# -- the pre-registered primary test ------------------------------------------------------------


def primary_test(view: dict[str, Any]) -> tuple[int, str, float] | None:
    """(analysis index, test, α) of the spec's pre-registered primary test, if it names one."""
    primary = view["spec"].get("primary")
    if not primary:
        return None
    return int(primary["analysis"]), str(primary["test"]), float(primary.get("alpha", 0.05))


def marked_primary(view: dict[str, Any], mwu: dict[str, Any], rows: list[list[Any]], *,
                   short: bool = False) -> list[list[Any]]:
    """The test rows of ``mwu`` with the primary test's name marked "(primary, α = …)" (with
    ``short``, "*")."""
    primary = primary_test(view)
    analyses = (view.get("result") or {}).get("analyses") or []
    if primary is None or primary[0] >= len(analyses) or analyses[primary[0]] is not mwu:
        return rows
    mark = "*" if short else f" (primary, α = {fmt(primary[2])})"
    return [[f"{row[0]}{mark}" if row[0] == primary[1] else row[0], *row[1:]] for row in rows]
