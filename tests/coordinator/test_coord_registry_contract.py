"""The registry's contract: every registered analysis kind (``coordinator.analyses.REGISTRY``)
brings each part of its life, run and shown, or says it has none, and the places that loop over
the registry (the API models' unions, the console, the exports, the Methods text, the figures,
the reproducibility record, both clients) each know it.

Read on the stored studies of the golden test (``golden/*.json``: every kind at least once), so
each part is checked on a real result of its kind.
"""

from __future__ import annotations

import json
import re
import typing
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from coordinator.analyses import REGISTRY, Analysis
from coordinator.analyses.base import MethodsContext
from coordinator.models import Analysis as AnalysisSpec
from coordinator.models import AnalysisResult, StudyResult
from coordinator.reporting import exports, methods_text
from coordinator.reporting.figures import FIGURE_LABELS
from coordinator.reporting.shown import Shown
from coordinator.ui import forms

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).parent / "golden"
STUDIES = ("demo", "dp_demo", "study", "categorical", "kruskal", "survival")
VIEWS = {name: json.loads((GOLDEN / f"{name}.json").read_text()) for name in STUDIES}
KINDS = sorted(REGISTRY)

# The clients read a kind under its own name except where the name says what it is better.
CLIENT_NAME = {"dp_boxplot": "boxplots"}


def _members(union: Any) -> dict[str, type[BaseModel]]:
    """The models of a discriminated union, by their ``kind``."""
    members = typing.get_args(typing.get_args(union)[0])
    return {typing.get_args(m.model_fields["kind"].annotation)[0]: m for m in members}


def _first(kind: str) -> tuple[dict[str, Any], int, Any, Any]:
    """(view, index, spec analysis, result) of the first stored analysis of ``kind``."""
    for view in VIEWS.values():
        for index, asked, found in Shown(view).succeeded():
            if asked.kind == kind:
                return view, index, asked, found
    raise AssertionError(f"no stored study has a succeeded {kind} analysis (golden/*.json)")


def test_every_kind_is_in_the_models_unions_with_its_own_models() -> None:
    specs, results = _members(AnalysisSpec), _members(AnalysisResult)
    assert set(specs) == set(REGISTRY) == set(results) - {"failed"}
    for kind, analysis in REGISTRY.items():
        assert isinstance(analysis, Analysis) and analysis.kind == kind
        assert specs[kind] is analysis.spec_model and results[kind] is analysis.result_model


@pytest.mark.parametrize("kind", KINDS)
def test_a_kind_writes_its_methods_and_cites_what_it_names(kind: str) -> None:
    view, index, asked, found = _first(kind)
    analysis = REGISTRY[kind]
    cited: list[str] = []
    said = analysis.methods(asked, found, MethodsContext(Shown(view).spec, index, cited.append))
    assert said and all(isinstance(s, str) and s.strip() for s in said)
    assert set(cited) <= set(analysis.references), "cites a work it does not list"
    known = methods_text.references()
    assert all(known[key] == work for key, work in analysis.references.items())
    assert analysis.algorithm(asked)  # the reproducibility record's name


@pytest.mark.parametrize("kind", KINDS)
def test_a_kind_fills_the_export_parts_it_declares(kind: str) -> None:
    view, index, asked, found = _first(kind)
    analysis = REGISTRY[kind]
    assert analysis.export_parts, "every kind exports its result"
    filled = 0
    for part in analysis.export_parts:
        assert exports.PARTS_BY_NAME[part.name] is part
        rows = analysis.export_rows(part, index, asked, found, Shown(view))
        filled += bool(rows)
        if part.columns is not None:  # a declared header holds every row's keys
            assert all(set(row) <= set(part.columns) for row in rows), part.name
        assert f"{part.name}.csv" in exports.csv_files(view)
    assert filled, "none of its parts has a row"
    labelled = {p.name for p in analysis.export_parts if p.label is not None}
    assert labelled <= {name for name, _label in forms.export_links(view)}


@pytest.mark.parametrize("kind", KINDS)
def test_a_kind_draws_the_figures_it_names(kind: str) -> None:
    view, index, asked, found = _first(kind)
    analysis = REGISTRY[kind]
    names = analysis.figure_names(found)
    assert set(names) <= set(analysis.figure_labels)
    assert set(analysis.figure_labels) <= set(FIGURE_LABELS)
    for name in names:
        drawn = analysis.figure(name, asked, found, Shown(view).spec, "svg")
        assert b"<svg" in drawn[:2000], name
    assert [(i, n) for i, n, _label in forms.figure_links(view) if i == index] == [
        (index, n) for n in names]


@pytest.mark.parametrize("kind", KINDS)
def test_a_kind_is_summarised_reported_and_flagged(kind: str) -> None:
    view, index, asked, found = _first(kind)
    analysis = REGISTRY[kind]
    raw = view["result"]["analyses"][index]
    assert analysis.summary_lines(raw, view, [])
    assert analysis.report_parts(raw, view)
    notes = analysis.uninformative(index, asked, found)
    assert all(n is None or isinstance(n, str) for n in notes)


@pytest.mark.parametrize("kind", KINDS)
def test_a_kind_is_offered_in_the_console(kind: str) -> None:
    if REGISTRY[kind].form_offered:
        assert kind in {form.kind for form in forms.builder_forms()}


@pytest.mark.parametrize("kind", KINDS)
def test_both_clients_read_a_kind(kind: str) -> None:
    from fedstats_client.results import Results

    view, _index, _asked, _found = _first(kind)
    name = CLIENT_NAME.get(kind, kind)
    read = getattr(Results(StudyResult.model_validate(view["result"]), Shown(view).spec.groups),
                   name)
    assert read is not None
    r_results = (ROOT / "clients" / "r" / "R" / "results.R").read_text()
    assert re.search(rf"^fs_{name} <- function", r_results, re.M), f"R has no fs_{name}"


@pytest.mark.parametrize("kind", KINDS)
def test_both_clients_build_a_kind(kind: str) -> None:
    from fedstats_client.spec import Study

    assert callable(getattr(Study, kind, None)), f"the Python client has no Study.{kind}"
    r_spec = (ROOT / "clients" / "r" / "R" / "spec.R").read_text()
    assert re.search(rf"^fs_add_{kind} <- function", r_spec, re.M), f"R has no fs_add_{kind}"
