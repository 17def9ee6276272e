"""A study's results as tidy CSV tables, and all of them as one zip: what an analyst puts in a
paper (docs/coordinator.md, "Exports and the reproducibility record").

Every table is drawn from the study's view only (``GET /v1/studies/{id}``, as JSON), the same
numbers the report shows, at full precision (no rounding: a float is written as its shortest
exact decimal, an open table end as ``Inf``/``-Inf``, a number not released as an empty cell).
One row per observation, one column per variable.

Each table is an :class:`~coordinator.reporting.export_parts.ExportPart` declared by the
analyses that fill it (``Analysis.export_parts``, their rows by ``Analysis.export_rows``; one
part may be filled by several kinds, e.g. ``tests`` by ``mwu`` and ``dp_mwu``), in the files'
order :data:`PARTS`; two are the study's own: ``centers`` (each center included or excluded,
its epoch and ε) and ``reproducibility`` (the record as (field, value) pairs). The parts and
their columns are listed in docs/coordinator.md, "Exports and the reproducibility record".

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
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from coordinator.analyses import REGISTRY
from coordinator.reporting import methods_text
from coordinator.reporting.export_parts import ExportPart, Row
from coordinator.reporting.rendering import center_rows
from coordinator.reporting.shown import Shown


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


# The study's own tables, beside those its analyses fill (``Analysis.export_parts``).
CENTERS_PART = ExportPart("centers", None, None, 150)
REPRODUCIBILITY_PART = ExportPart("reproducibility", ("field", "value"), None, 160)
STUDY_PARTS: dict[ExportPart, Callable[[dict[str, Any]], list[Row]]] = {
    CENTERS_PART: centers, REPRODUCIBILITY_PART: reproducibility}


def _parts() -> tuple[ExportPart, ...]:
    found = {part.name: part for part in STUDY_PARTS}
    for analysis in REGISTRY.values():
        for part in analysis.export_parts:
            assert found.setdefault(part.name, part) is part, f"two parts named {part.name!r}"
    return tuple(sorted(found.values(), key=lambda part: part.order))


PARTS_BY_NAME: dict[str, ExportPart] = {part.name: part for part in _parts()}
PARTS: tuple[str, ...] = tuple(PARTS_BY_NAME)
if TYPE_CHECKING:
    Part = str
else:
    Part = Literal[PARTS]  # the API's path parameter: one of the parts


def rows_of(view: dict[str, Any], part: ExportPart) -> list[Row]:
    """The rows of ``part``: the study's own, or each succeeded analysis' that fills it (by the
    analysis' rank for the part, then in the spec's order)."""
    if part in STUDY_PARTS:
        return STUDY_PARTS[part](view)
    study = Shown(view)
    filled = []
    for index, asked, result in study.succeeded():
        analysis = REGISTRY[asked.kind]
        if part in analysis.export_parts:
            filled.append((analysis.export_rank(part), index, analysis, asked, result))
    filled.sort(key=lambda found: found[:2])
    return [row for _rank, index, analysis, asked, result in filled
            for row in analysis.export_rows(part, index, asked, result, study)]


def part_rows(view: dict[str, Any], part: str) -> list[Row]:
    """The rows of the part named ``part`` (one of :data:`PARTS`)."""
    return rows_of(view, PARTS_BY_NAME[part])


def _columns(part: ExportPart) -> list[str] | None:
    return list(part.columns) if part.columns is not None else None


def part_csv(view: dict[str, Any], part: str) -> str:
    """One table as CSV (a header alone when the study has nothing of it)."""
    found = PARTS_BY_NAME[part]
    return to_csv(rows_of(view, found), _columns(found))


def csv_files(view: dict[str, Any]) -> dict[str, str]:
    """``<part>.csv`` -> CSV text of every table the study has rows for, then ``methods.txt``,
    ``spec.json`` and ``reproducibility.json``: what :func:`bundle` zips and ``fedstats study
    get --csv DIR`` writes."""
    files = {f"{part.name}.csv": to_csv(rows, _columns(part))
             for part in PARTS_BY_NAME.values() if (rows := rows_of(view, part))}
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
    for part in PARTS_BY_NAME.values():
        rows = rows_of(view, part)
        if not rows:
            continue
        names = _columns(part) or list(dict.fromkeys(k for r in rows for k in r))
        sheet = book.create_sheet(part.name)
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
