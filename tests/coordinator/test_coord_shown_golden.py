"""The shown half of every analysis kind held fixed: six stored studies (the demo's, the DP
demo's, ``examples/study.toml``'s, a categorical Table 1, a k-arm study and a survival study:
every registered kind at least once, ``golden/*.json``) rendered as text summary, HTML report,
Methods paragraph, CSV parts, workbook cells, figure and export links, provenance names and the
uninformative notes, compared with what the same code rendered when the studies were stored
(``golden/*.shown.json``).

The inputs are stored JSON, so every number shown is a formatting of a stored number (no
computation across library versions); figures are compared by their names (matplotlib's SVG
bytes are its own). Regenerate after an intended change of what is shown with
``python -m tests.coordinator.test_coord_shown_golden`` and review the diff.
"""

from __future__ import annotations

import io
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from coordinator.analyses import REGISTRY, algorithms
from coordinator.reporting import exports, methods_text
from coordinator.reporting.figures import figure_names
from coordinator.reporting.report import render_html, summary
from coordinator.reporting.report_flags import uninformative_notes
from coordinator.reporting.shown import Shown
from coordinator.ui import forms

GOLDEN = Path(__file__).parent / "golden"
STUDIES = ("demo", "dp_demo", "study", "categorical", "kruskal", "survival")


def _without_figures(page: str) -> str:
    page = re.sub(r"<svg.*?</svg>", "<svg/>", page, flags=re.S)
    return re.sub(r"data:image/[a-z+]+;base64,[A-Za-z0-9+/=]+", "data:image", page)


def _cells(book: bytes) -> dict[str, list[list[Any]]]:
    from openpyxl import load_workbook

    loaded = load_workbook(io.BytesIO(book))
    return {sheet.title: [list(row) for row in sheet.iter_rows(values_only=True)]
            for sheet in loaded.worksheets}


def shown(view: dict[str, Any]) -> dict[str, Any]:
    """Everything the coordinator shows of a stored study, as JSON-able values."""
    spec = Shown(view).spec  # the spec as validated, its readable analyses
    return {
        "summary": summary(view),
        "report": _without_figures(render_html(view)),
        "methods": methods_text.methods_paragraph(view),
        "csv": exports.csv_files(view),
        "workbook": json.loads(json.dumps(_cells(exports.workbook(view)), default=str)),
        "figures": [figure_names(a) for a in view["result"]["analyses"]],
        "figure_links": [list(link) for link in forms.figure_links(view)],
        "export_links": [list(link) for link in forms.export_links(view)],
        "algorithms": algorithms(spec),
        "notes": uninformative_notes(view),
    }


def test_the_stored_studies_hold_every_kind() -> None:
    kinds = {a["kind"] for name in STUDIES
             for a in json.loads((GOLDEN / f"{name}.json").read_text())["spec"]["analyses"]}
    assert kinds == set(REGISTRY)


@pytest.mark.parametrize("name", STUDIES)
def test_what_is_shown_is_unchanged(name: str) -> None:
    view = json.loads((GOLDEN / f"{name}.json").read_text())
    expected = json.loads((GOLDEN / f"{name}.shown.json").read_text())
    got = json.loads(json.dumps(shown(view)))
    for part in expected:
        assert got[part] == expected[part], part
    assert set(got) == set(expected)



def test_an_analysis_this_version_does_not_read_is_left_out_and_the_rest_shown() -> None:
    """A store outlives versions: an analysis of a kind from a newer coordinator, and a result
    stored in an older shape, are left out of what is read (``coordinator.reporting.shown``);
    everything else is shown as before."""
    view = json.loads((GOLDEN / "demo.json").read_text())
    expected = json.loads((GOLDEN / "demo.shown.json").read_text())
    first = view["result"]["analyses"][0]["kind"]
    future = json.loads(json.dumps(view))
    future["spec"]["analyses"][0] = {"kind": "future_kind", "epsilon": 1.0}
    future["result"]["analyses"][0] = {"kind": "future_kind", "status": "succeeded", "x": 1}
    older = json.loads(json.dumps(view))
    del older["result"]["analyses"][0]["excluded"]  # a field this version requires
    for changed in (future, older):
        got = shown(changed)
        assert got["figures"][0] == [] and all(i != 0 for i, *_ in got["figure_links"])
        assert got["figures"][1:] == expected["figures"][1:]
        assert "future_kind" in got["summary"] or first in got["summary"]
        assert got["csv"].keys() <= expected["csv"].keys()
        assert got["algorithms"][-len(expected["algorithms"]) + 1:] == expected["algorithms"][1:]


if __name__ == "__main__":
    for study in sys.argv[1:] or STUDIES:
        stored = json.loads((GOLDEN / f"{study}.json").read_text())
        (GOLDEN / f"{study}.shown.json").write_text(
            json.dumps(shown(stored), indent=1, ensure_ascii=False) + "\n")
