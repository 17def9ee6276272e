"""The tables a study exports (CSV files, XLSX sheets), declared once each: an analysis lists
the parts it fills (``Analysis.export_parts``) and fills them (``Analysis.export_rows``);
``coordinator.reporting.exports`` writes them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

Row = dict[str, Any]


@dataclass(frozen=True)
class ExportPart:
    """One exported table: its file's name (``<name>.csv``, the sheet's), its columns (none: the
    rows' keys in order of appearance), the console's label of its download link (none: not
    linked) and its place among the files (``order``, ascending)."""

    name: str
    columns: tuple[str, ...] | None
    label: str | None
    order: int


def interval(row: Row, name: str) -> tuple[Any, Any]:
    """The ends of a row's ``<name>_interval`` (none, none when it has none)."""
    found = row.get(f"{name}_interval")
    return (found[0], found[1]) if found else (None, None)
