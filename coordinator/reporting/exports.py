"""A study's results as tidy CSV tables, and all of them as one zip: what an analyst puts in a
paper (docs/coordinator.md, "Exports and the reproducibility record").

Every table is drawn from the study's view only (``GET /v1/studies/{id}``, as JSON), the same
numbers the report shows, at full precision (no rounding: a float is written as its shortest
exact decimal, an open table end as ``Inf``/``-Inf``, a number not released as an empty cell).
One row per observation, one column per variable:

* ``table1`` — each describe row (variable, center or ``pooled``, arm) with its 95 % intervals;
* ``table1_formatted`` — the report's Table 1 as shown (pooled arms, Overall, each center);
* ``tests`` — each Mann-Whitney test (the primary one marked), ``test_parts`` each center's part
  (the DP twin's, ``dp_mwu``, too);
* ``effects`` — each probabilistic index with its interval; ``heterogeneity`` — Cochran's Q,
  I² and τ² with their Q-profile intervals between the centers' indexes;
* ``dp_mwu_releases`` — what each center released for a ``dp_mwu`` analysis (noisy sizes, cap
  M, ε split, noise scale, the sizes the tests used);
* ``boxplots``, ``dp_quantiles``, ``quantiles``, ``table`` — the other analyses' numbers;
* ``kruskal`` — each k-arm test (and trend, with the law its p is from), ``shift`` each
  Hodges-Lehmann shift's estimate, interval and bounds, ``categorical`` each released
  category cell (n (%) with its interval), ``categorical_tests`` each χ², Fisher and CMH test;
* ``centers`` — each center included or excluded, its epoch and ε;
* ``reproducibility`` — the record as (field, value) pairs.

:func:`bundle` zips every non-empty table with ``methods.txt``
(``coordinator.reporting.methods_text``),
``spec.json`` and ``reproducibility.json``; :func:`workbook` writes the same tables as one XLSX
workbook, a sheet each (numbers as numbers, to the 15 significant digits a spreadsheet keeps:
the CSV has them exactly), with the Methods paragraph on its own sheet.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import zipfile
from collections.abc import Callable, Iterator
from typing import Any, Literal, get_args

from coordinator.reporting import methods_text
from coordinator.reporting.rendering import (
    center_rows,
    null_label,
    succeeded,
    table_one,
)

Part = Literal["table1", "table1_formatted", "tests", "test_parts", "effects", "boxplots",
               "dp_quantiles", "quantiles", "table", "kruskal", "shift", "categorical",
               "categorical_tests", "centers", "reproducibility", "dp_mwu_releases",
               "heterogeneity"]
PARTS: tuple[str, ...] = get_args(Part)

Row = dict[str, Any]


def cell(value: Any) -> str:
    """A value as a CSV cell: numbers exact and plain, ``Inf``/``-Inf`` for the open ends and
    ``TRUE``/``FALSE`` (R and pandas read them), an empty cell for none, lists as
    ``;``-separated values."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"  # what R's read.csv and pandas both read
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Inf" if value > 0 else "-Inf"
        return repr(value)
    if isinstance(value, str) and value in ("Infinity", "-Infinity"):
        return "Inf" if value == "Infinity" else "-Inf"
    if isinstance(value, (list, tuple)):
        return ";".join(cell(v) for v in value)
    return str(value)


def to_csv(rows: list[Row], columns: list[str] | None = None) -> str:
    """Rows (dicts) as CSV text with a header; ``columns`` fixes their order."""
    columns = columns or list(dict.fromkeys(k for r in rows for k in r))
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    for r in rows:
        writer.writerow([cell(r.get(c)) for c in columns])
    return out.getvalue()


def _indexed(view: dict[str, Any], kind: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """(index in the spec, result) of every analysis of ``kind`` that succeeded."""
    for i, a in enumerate((view.get("result") or {}).get("analyses") or []):
        if a.get("kind") == kind and succeeded(a):
            yield i, a


def _mann_whitney(view: dict[str, Any]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(index in the spec, result) of every Mann-Whitney analysis that succeeded, exact
    (``mwu``) or its DP twin (``dp_mwu``), in the spec's order."""
    for i, a in enumerate((view.get("result") or {}).get("analyses") or []):
        if a.get("kind") in ("mwu", "dp_mwu") and succeeded(a):
            yield i, a


def _interval(row: Row, name: str) -> tuple[Any, Any]:
    found = row.get(f"{name}_interval")
    return (found[0], found[1]) if found else (None, None)


TABLE1_COLUMNS = ["analysis", "mode", "variable", "unit", "center", "arm", "n", "n_low",
                  "n_high", "mean", "mean_low", "mean_high", "sd", "sd_low", "sd_high", "median",
                  "median_low", "median_high", "q1", "q1_low", "q1_high", "q3", "q3_low",
                  "q3_high", "missing", "missing_low", "missing_high", "rank_halfwidth",
                  "clip_low", "clip_high", "epsilon", "method"]


def table1(view: dict[str, Any]) -> list[Row]:
    """Each describe row: its numbers and 95 % intervals (``dp``: of what the exact data would
    give; ``table``: exact bounds from the bins)."""
    rows = []
    for index, analysis in _indexed(view, "describe"):
        units = analysis.get("units") or {}
        for r in analysis.get("rows") or []:
            row: Row = {"analysis": index, "mode": analysis.get("mode"),
                        "variable": r["variable"], "unit": units.get(r["variable"]),
                        "center": r["center"], "arm": r["arm"]}
            for name in ("n", "mean", "sd", "median", "q1", "q3", "missing"):
                row[name] = r.get(name)
                row[f"{name}_low"], row[f"{name}_high"] = _interval(r, name)
            row["rank_halfwidth"] = r.get("rank_halfwidth")
            row["clip_low"], row["clip_high"] = (r.get("clip") or (None, None))
            row["epsilon"], row["method"] = r.get("epsilon"), r.get("method")
            rows.append(row)
    return rows


def table1_formatted(view: dict[str, Any]) -> list[Row]:
    """The report's Table 1 as shown: one block per variable, columns the pooled arms, Overall
    and each center's arms (``coordinator.reporting.rendering.table_one``)."""
    rows = []
    groups = (view.get("spec") or {}).get("groups")
    for index, analysis in _indexed(view, "describe"):
        header, shown = table_one(analysis, groups, per_center=True)
        for line in shown:
            rows.append({"analysis": str(index), **dict(zip(header, line, strict=True))})
    return rows


TEST_COLUMNS = ["analysis", "alternative", "test", "primary", "alpha", "statistic", "df",
                "pvalue", "null", "null_label", "method", "centers"]


def tests(view: dict[str, Any]) -> list[Row]:
    """Each Mann-Whitney test: its statistic (z, Fisher's T), the law its p-value is from and
    the p-value; ``primary`` marks the spec's primary test (with its α)."""
    primary = (view.get("spec") or {}).get("primary") or {}
    rows = []
    for index, mwu in _mann_whitney(view):
        for name, test in mwu["tests"].items():
            is_primary = primary.get("analysis") == index and primary.get("test") == name
            rows.append({
                "analysis": index, "alternative": mwu.get("alternative"), "test": name,
                "primary": is_primary, "alpha": primary.get("alpha") if is_primary else None,
                "statistic": test["statistic"], "df": test.get("df"), "pvalue": test["pvalue"],
                "null": test.get("null"), "null_label": null_label(test.get("null")) or None,
                "method": test.get("method"),
                "centers": [p["center"] for p in test.get("parts") or []]})
    return rows


PART_COLUMNS = ["analysis", "test", "center", "statistic", "variance", "zstatistic", "pvalue",
                "null", "weight"]


def test_parts(view: dict[str, Any]) -> list[Row]:
    """Each center's part of each test (its U, variance, z, p-value and weight)."""
    return [{"analysis": index, "test": name, **{k: p.get(k) for k in PART_COLUMNS[2:]}}
            for index, mwu in _mann_whitney(view)
            for name, test in mwu["tests"].items() for p in test.get("parts") or []]


EFFECT_COLUMNS = ["analysis", "center", "n_x", "n_y", "estimate", "low", "high", "level",
                  "method"]


def effects(view: dict[str, Any]) -> list[Row]:
    """Each probabilistic index θ = P(Y > X) + ½P(Y = X), per center and stratified."""
    return [{"analysis": index, **{k: e.get(k) for k in EFFECT_COLUMNS[1:]}}
            for index, mwu in _mann_whitney(view) for e in mwu.get("effects") or []]


DP_MWU_COLUMNS = ["analysis", "center", "n_x_hat", "n_y_hat", "cap", "epsilon", "size_epsilon",
                  "u_epsilon", "noise_scale", "n_x", "n_y"]


def dp_mwu_releases(view: dict[str, Any]) -> list[Row]:
    """What each center released for each dp_mwu analysis, and the sizes its tests used."""
    return [{"analysis": index, **{k: r.get(k) for k in DP_MWU_COLUMNS[1:]}}
            for index, a in _indexed(view, "dp_mwu") for r in a.get("releases") or []]


BOX_COLUMNS = ["analysis", "group", "box", "n", "lower_outliers", "lower_whisker", "q1",
               "median", "q3", "upper_whisker", "upper_outliers", "lower_branch",
               "upper_branch", "outlier_halfwidth", "quartile_rank_halfwidth",
               "extreme_rank_halfwidth", "epsilon", "method"]


def boxplots(view: dict[str, Any]) -> list[Row]:
    """Each DP box (a center's, then the pooled one) of each dp_boxplot analysis."""
    rows = []
    for index, analysis in _indexed(view, "dp_boxplot"):
        found = list((analysis.get("per_center") or {}).items())
        if analysis.get("pooled"):
            found.append(("pooled", analysis["pooled"]))
        for label, box in found:
            rows.append({"analysis": index, "group": analysis.get("group"), "box": label,
                         **{k: box.get(k) for k in BOX_COLUMNS[3:]}})
    return rows


def dp_quantiles(view: dict[str, Any]) -> list[Row]:
    """Each center's DP quantile at each level, with its n and rank error."""
    rows = []
    for index, analysis in _indexed(view, "dp_quantiles"):
        for center, values in (analysis.get("per_center") or {}).items():
            for level, value in zip(analysis["levels"], values, strict=True):
                rows.append({"analysis": index, "group": analysis.get("group"),
                             "center": center, "algorithm": analysis.get("algorithm"),
                             "level": level, "value": value,
                             "n": (analysis.get("n") or {}).get(center),
                             "rank_halfwidth": (analysis.get("rank_halfwidth") or {}).get(center),
                             "epsilon": (analysis.get("spent") or {}).get(center)})
    return rows


def quantiles(view: dict[str, Any]) -> list[Row]:
    """Each federated quantile estimate (estimator, group, level), with the table's bracket."""
    rows = []
    for index, analysis in _indexed(view, "quantiles"):
        levels = analysis["levels"]
        brackets = analysis.get("brackets") or {}
        for estimator, by_group in (analysis.get("estimates") or {}).items():
            for group, est in by_group.items():
                values = est.get("quantiles") or [None] * len(levels)
                for i, (level, value) in enumerate(zip(levels, values, strict=True)):
                    bracket = (brackets.get(group) or [])
                    low, high = bracket[i] if i < len(bracket) else (None, None)
                    rows.append({"analysis": index, "estimator": estimator, "group": group,
                                 "level": level, "value": value, "error": est.get("error"),
                                 "bracket_low": low, "bracket_high": high})
    return rows


def table(view: dict[str, Any]) -> list[Row]:
    """The federated table's bins: (low, high] and each group's count."""
    groups = list((view.get("spec") or {}).get("groups") or ["all"])
    rows = []
    for index, analysis in _indexed(view, "table"):
        limits = analysis["limits"]
        for i in range(len(limits) - 1):
            rows.append({"analysis": index, "bin": i, "low": limits[i], "high": limits[i + 1],
                         **{f"count_{g}": row[i] for g, row in
                            zip(groups, analysis["counts"], strict=False)}})
    return rows


def centers(view: dict[str, Any]) -> list[Row]:
    """Each center asked: included or excluded (and why), its epoch and the ε it spent."""
    result = view.get("result") or {}
    record = {c["center"]: c for c in (view.get("reproducibility") or {}).get("centers") or []}
    return [{"center": c, "status": status, "note": note or None,
             "epoch": record.get(c, {}).get("epoch"), "k": record.get(c, {}).get("k"),
             "neighbouring": record.get(c, {}).get("neighbouring"),
             "epsilon": record.get(c, {}).get("epsilon"),
             "mechanisms": record.get(c, {}).get("mechanisms")}
            for c, status, note in center_rows(result)] if result else []


def reproducibility(view: dict[str, Any]) -> list[Row]:
    """The reproducibility record as (field, value) rows, and the study's own fields."""
    spec = view.get("spec") or {}
    record = view.get("reproducibility") or {}
    software = record.get("software") or {}
    rows: list[Row] = [
        {"field": "study", "value": view.get("id")},
        {"field": "title", "value": spec.get("title")},
        {"field": "status", "value": view.get("status")},
        {"field": "created_at", "value": view.get("created_at")},
        {"field": "software", "value": software.get("name")},
        {"field": "version", "value": software.get("version")},
        {"field": "commit", "value": software.get("commit") or software.get("commit_note")
         or record.get("software_note")},
        {"field": "spec_sha256", "value": record.get("spec_sha256")},
        {"field": "k", "value": spec.get("k")},
    ]
    for c in record.get("centers") or []:
        rows.append({"field": f"center {c['center']}",
                     "value": f"K {c.get('k')}, {c.get('neighbouring')}, epoch {c.get('epoch')}, "
                              f"ε {cell(c.get('epsilon'))}"})
    for i, algorithm in enumerate(record.get("algorithms") or []):
        rows.append({"field": f"analysis {i}", "value": algorithm})
    rows.append({"field": "seeds", "value": record.get("seeds")})
    return rows


KRUSKAL_COLUMNS = ["analysis", "test", "method", "statistic", "df", "pvalue", "mean",
                   "variance", "zstatistic", "alternative", "null"]


def kruskal(view: dict[str, Any]) -> list[Row]:
    """Each k-arm test: Kruskal-Wallis on the federated table, stratified (sum, weighted) and
    each center's own (``center:<id>``), then Jonckheere-Terpstra's trend when asked."""
    rows: list[Row] = []
    for index, result in _indexed(view, "kruskal"):
        for name, test in result["tests"].items():
            rows.append({"analysis": index, "test": name, "method": test.get("method"),
                         "statistic": test["statistic"], "df": test["df"],
                         "pvalue": test["pvalue"]})
        for c in result.get("centers") or []:
            rows.append({"analysis": index, "test": f"center:{c['center']}", "method": "center",
                         "statistic": c["statistic"], "df": c["df"], "pvalue": c["pvalue"]})
        for name, trend in (result.get("trend") or {}).items():
            rows.append({"analysis": index, "test": f"trend:{name}", "method": trend["method"],
                         "statistic": trend["statistic"], "pvalue": trend["pvalue"],
                         "mean": trend["mean"], "variance": trend["variance"],
                         "zstatistic": trend["zstatistic"],
                         "alternative": result.get("alternative"),
                         "null": trend.get("null") or "normal"})
    return rows


HETEROGENEITY_COLUMNS = ["analysis", "kind", "statistic", "df", "pvalue", "i_squared",
                         "i_squared_low", "i_squared_high", "tau_squared", "tau_squared_low",
                         "tau_squared_high", "level", "variance_at", "centers"]


def heterogeneity(view: dict[str, Any]) -> list[Row]:
    """Between-center heterogeneity of θ̂ for each Mann-Whitney analysis (exact and DP twin):
    Cochran's Q, I² and τ² with their Q-profile intervals, the pooled θ the variances were
    taken at (blank in results stored before either was computed)."""
    rows: list[Row] = []
    for kind in ("mwu", "dp_mwu"):
        for index, result in _indexed(view, kind):
            h = result.get("heterogeneity")
            if h is None:
                continue
            i_low, i_high = h.get("i_squared_interval") or (None, None)
            t_low, t_high = h.get("tau_squared_interval") or (None, None)
            rows.append({"analysis": index, "kind": kind, "statistic": h["statistic"],
                         "df": h["df"], "pvalue": h["pvalue"], "i_squared": h["i_squared"],
                         "i_squared_low": i_low, "i_squared_high": i_high,
                         "tau_squared": h["tau_squared"], "tau_squared_low": t_low,
                         "tau_squared_high": t_high, "level": h["level"],
                         "variance_at": h.get("variance_at"),
                         "centers": " ".join(h["centers"])})
    return rows


SHIFT_COLUMNS = ["analysis", "estimate_low", "estimate_high", "low_low", "low_high", "high_low",
                 "high_high", "level", "achieved_level", "rank", "n_x", "n_y", "method",
                 "whole_counts", "estimate", "interval_low", "interval_high", "allowance"]


def shift(view: dict[str, Any]) -> list[Row]:
    """Each Hodges-Lehmann shift: the bounds the bins give its estimate and its interval's ends,
    then the printed figures (the midpoints' estimate and the widened interval, empty for a
    result made before them; docs/methods.md §12.3)."""
    rows = []
    for index, r in _indexed(view, "shift"):
        printed = r.get("binned_interval") or (None, None)
        rows.append({"analysis": index, **{k: r.get(k) for k in SHIFT_COLUMNS[1:-3]},
                     "interval_low": printed[0], "interval_high": printed[1],
                     "allowance": r.get("allowance")})
    return rows


CATEGORY_COLUMNS = ["analysis", "variable", "center", "arm", "n", "missing", "category",
                    "categories", "count", "percent", "low", "high", "count_low", "count_high"]


def categorical(view: dict[str, Any]) -> list[Row]:
    """Each released cell of a categorical variable, per center (or pooled) and arm: n (%)
    with its interval, from the categorical analyses and Table 1's categorical rows."""
    rows: list[Row] = []
    for kind in ("categorical", "describe"):
        for index, result in _indexed(view, kind):
            for arm in (result.get("arms") if kind == "categorical"
                        else result.get("categorical")) or []:
                for c in arm["cells"]:
                    low, high = c.get("count_interval") or (None, None)
                    rows.append({
                        "analysis": index, "variable": arm["variable"], "center": arm["center"],
                        "arm": arm["arm"], "n": arm["n"], "missing": arm.get("missing"),
                        "category": c["label"], "categories": c["categories"],
                        "count": c["count"], "percent": c.get("percent"), "low": c.get("low"),
                        "high": c.get("high"), "count_low": low, "count_high": high})
    return rows


CATEGORICAL_TEST_COLUMNS = ["analysis", "variable", "test", "method", "statistic", "df",
                            "pvalue", "odds_ratio", "low", "high"]


def categorical_tests(view: dict[str, Any]) -> list[Row]:
    """Each test of arm against category: χ², Fisher's exact, CMH by center."""
    return [{"analysis": index, "variable": r["variable"], "test": t["name"],
             **{k: t.get(k) for k in CATEGORICAL_TEST_COLUMNS[4:]}, "method": t.get("method")}
            for index, r in _indexed(view, "categorical") for t in r.get("tests") or []]


TABLES: dict[str, tuple[Callable[[dict[str, Any]], list[Row]], list[str] | None]] = {
    "table1": (table1, TABLE1_COLUMNS),
    "table1_formatted": (table1_formatted, None),
    "tests": (tests, TEST_COLUMNS),
    "test_parts": (test_parts, PART_COLUMNS),
    "effects": (effects, EFFECT_COLUMNS),
    "boxplots": (boxplots, BOX_COLUMNS),
    "dp_quantiles": (dp_quantiles, None),
    "quantiles": (quantiles, None),
    "table": (table, None),
    "kruskal": (kruskal, KRUSKAL_COLUMNS),
    "heterogeneity": (heterogeneity, HETEROGENEITY_COLUMNS),
    "shift": (shift, SHIFT_COLUMNS),
    "categorical": (categorical, CATEGORY_COLUMNS),
    "categorical_tests": (categorical_tests, CATEGORICAL_TEST_COLUMNS),
    "centers": (centers, None),
    "reproducibility": (reproducibility, ["field", "value"]),
    "dp_mwu_releases": (dp_mwu_releases, DP_MWU_COLUMNS),
}


def part_csv(view: dict[str, Any], part: str) -> str:
    """One table as CSV (a header alone when the study has nothing of it)."""
    make, columns = TABLES[part]
    return to_csv(make(view), columns)


def csv_files(view: dict[str, Any]) -> dict[str, str]:
    """``<part>.csv`` -> CSV text of every table the study has rows for, then ``methods.txt``,
    ``spec.json`` and ``reproducibility.json``: what :func:`bundle` zips and ``fedstats study
    get --csv DIR`` writes."""
    files = {f"{part}.csv": to_csv(rows, columns)
             for part, (make, columns) in TABLES.items() if (rows := make(view))}
    files["methods.txt"] = methods_text.methods_paragraph(view) + "\n"
    files["spec.json"] = json.dumps(view.get("spec"), indent=2) + "\n"
    if view.get("reproducibility") is not None:
        files["reproducibility.json"] = json.dumps(view["reproducibility"], indent=2) + "\n"
    return files


def bundle(view: dict[str, Any]) -> bytes:
    """Every file of :func:`csv_files` in one zip, under ``study-<id>/`` (fixed timestamps: the
    same study gives the same bytes)."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in csv_files(view).items():
            info = zipfile.ZipInfo(f"study-{view['id']}/{name}", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, text)
    return out.getvalue()



def xlsx_cell(value: Any) -> Any:
    """A value as a spreadsheet cell: numbers and booleans as themselves (a spreadsheet sums
    them), the open ends and NaN as the CSV's text (a spreadsheet has no infinity), lists as
    ``;``-separated text, none as an empty cell."""
    if isinstance(value, str) and value in ("Infinity", "-Infinity"):
        return cell(value)
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return value
    return cell(value)


# A workbook's document properties carry times; fixed ones give the same bytes for the same study.
_FIXED_TIME = (1980, 1, 1)


def workbook(view: dict[str, Any]) -> bytes:
    """Every table of :func:`csv_files` as a sheet of one XLSX workbook (the part's name; a
    header row, then one row per observation), then ``methods`` (the paragraph, a line per
    row) and ``spec`` (the spec as JSON). The same study gives the same bytes."""
    import datetime

    from openpyxl import Workbook  # imported here: only this export needs it

    book = Workbook()
    book.remove(book.active)
    for part, (make, columns) in TABLES.items():
        rows = make(view)
        if not rows:
            continue
        names = columns or list(dict.fromkeys(k for r in rows for k in r))
        sheet = book.create_sheet(part)
        sheet.append(names)
        for r in rows:
            sheet.append([xlsx_cell(r.get(c)) for c in names])
        sheet.freeze_panes = "A2"
    methods = book.create_sheet("methods")
    for line in methods_text.methods_paragraph(view).splitlines():
        methods.append([line])
    book.create_sheet("spec").append([json.dumps(view.get("spec"), indent=2)])
    book.properties.creator = "fedstats"
    book.properties.created = datetime.datetime(*_FIXED_TIME)
    out = io.BytesIO()
    book.save(out)
    # openpyxl stamps each zip entry, and the document's "modified" property, with the time of
    # writing: both rewritten to a fixed time.
    data = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(out.getvalue())) as src, \
            zipfile.ZipFile(data, "w", zipfile.ZIP_DEFLATED) as dst:
        for item in src.infolist():
            content = src.read(item.filename)
            if item.filename == "docProps/core.xml":
                content = re.sub(rb"(<dcterms:modified[^>]*>)[^<]*(</dcterms:modified>)",
                                 rb"\g<1>1980-01-01T00:00:00Z\g<2>", content)
            info = zipfile.ZipInfo(item.filename, date_time=(*_FIXED_TIME, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            dst.writestr(info, content)
    return data.getvalue()
