"""The study builder's form as a study spec (the same JSON the API takes), and the figures and
tables a study page offers to download."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, get_args, get_origin

from coordinator.analyses import FormError
from coordinator.figures import figure_names
from coordinator.models import Catalog
from coordinator.ui.schema_form import (
    AnalysisForm,
    FormField,
    as_list,
    builder_forms,
    form_label,
    initial_values,
    part_from_form,
    posted_values,
    text_of,
)
from fedstats_service.errors import dotted

__all__ = ["ANALYSES", "DEFAULTS", "EXPORT_KINDS", "FIGURE_LABELS", "FORMS", "PRIMARY_GROUPS",
           "PRIMARY_TESTS",
           "FormError", "catalog_names", "export_links", "field_of", "figure_links",
           "form_errors", "marked_fields", "posted_values", "spec_from_form"]

# What the builder offers: a form for every registered analysis that does not opt out,
# generated from its spec model (``coordinator.ui.schema_form``).
FORMS: tuple[AnalysisForm, ...] = builder_forms()
ANALYSES = tuple(form.kind for form in FORMS)
_BY_KIND = {form.kind: form for form in FORMS}
DEFAULTS: dict[str, Any] = {
    "dataset": "", "variable": "", "group_x": "", "group_y": "", "groups_more": [], "k": "10",
    "analyses": [kind for kind in ("table", "mwu", "quantiles") if kind in ANALYSES],
    "centers": [], "toml": "", "title": "", "description": "", "primary": "", "alpha": "0.05",
    **initial_values(), "quantiles.levels": "0.25, 0.5, 0.75",
    "dp_quantiles.levels": "0.25, 0.5, 0.75",
}


def _declared_tests(form: AnalysisForm) -> tuple[str, ...]:
    """The tests an analysis declares: the choices of its spec model's ``tests`` list (none
    without one)."""
    from coordinator.analyses import REGISTRY

    found = REGISTRY[form.kind].spec_model.model_fields.get("tests")
    if found is None:
        return ()
    (item,) = get_args(found.annotation) or (None,)
    return tuple(str(t) for t in get_args(item)) if get_origin(item) is Literal else ()


def primary_value(kind: str, test: str) -> str:
    """The picker's value of one test: ``kind:test`` (the mwu analysis' own tests by their bare
    name, as the picker has always posted them)."""
    return test if kind == "mwu" else f"{kind}:{test}"


# The primary-test picker: every offered analysis that declares tests, as (kind, its label,
# its tests as (value, name)); the spec model decides which may be primary.
PRIMARY_GROUPS: tuple[tuple[str, str, tuple[tuple[str, str], ...]], ...] = tuple(
    (form.kind, form.label, tuple((primary_value(form.kind, t), t) for t in tests))
    for form in FORMS if (tests := _declared_tests(form)))
PRIMARY_TESTS = tuple(value for _kind, _label, tests in PRIMARY_GROUPS for value, _t in tests)
_PRIMARY = {value: (kind, test) for kind, _label, tests in PRIMARY_GROUPS
            for value, test in tests}
FIGURE_LABELS = {"table": "federated table", "effects": "effect sizes",
                 "boxplots": "DP boxplots", "quantiles": "quantiles"}
# The study's own fields, by the spec's name: (HTML name, label).
STUDY_FIELDS = {"title": ("title", "Title"), "description": ("description", "Description"),
                "dataset": ("dataset", "Dataset"), "variable": ("variable", "Variable"),
                "k": ("k", "K"), "centers": ("centers", "Centers"),
                "primary": ("primary", "Primary test")}


def _number(values: Mapping[str, Any], name: str, label: str) -> float:
    text = text_of(values, name)
    try:
        return float(text)
    except ValueError:
        raise FormError(f"{label}: give a number (got {text!r})", field=name) from None


def spec_from_form(values: Mapping[str, Any]) -> dict[str, Any]:
    """The spec the form describes: the study's fields, and each chosen analysis' part from
    its generated fields; the spec model validates it (the same rules as the API)."""
    groups = [text_of(values, g) for g in ("group_x", "group_y")]
    more = [g for g in as_list(values.get("groups_more")) if g.strip() and g not in groups]
    chosen = [a for a in as_list(values.get("analyses")) if a in _BY_KIND]
    if not chosen:
        raise FormError("analyses: choose at least one", field="analyses")
    k = text_of(values, "k")
    if not k.isdigit():
        raise FormError(f"K: give a whole number (got {k!r})", field="k")
    spec: dict[str, Any] = {
        **{key: text_of(values, key) for key in ("title", "description")
           if text_of(values, key)},
        "dataset": text_of(values, "dataset"),
        "variable": text_of(values, "variable"),
        "groups": [*groups, *more] if all(groups) else None,
        "k": int(k),
        "analyses": [part_from_form(_BY_KIND[kind], values) for kind in chosen],
    }
    if more and not all(groups):
        raise FormError("further groups: choose groups X and Y first", field="groups_more")
    if values.get("centers"):
        spec["centers"] = as_list(values["centers"])
    primary = text_of(values, "primary")
    if primary:
        kind, test = _PRIMARY.get(primary, ("", ""))
        if kind not in chosen:
            label = next((g[1] for g in PRIMARY_GROUPS if g[0] == kind), "its analysis")
            raise FormError("primary test: choose one of the tests offered, and the analysis "
                            f"it belongs to ({label})", field="primary")
        spec["primary"] = {"analysis": chosen.index(kind), "test": test,
                           "alpha": _number(values, "alpha", "α of the primary test")}
    return spec


def field_of(location: Sequence[Any] | str, spec: Mapping[str, Any]) -> tuple[str, str] | None:
    """The builder's field (HTML name, label) a location in ``spec`` comes from: a pydantic
    error's ``loc`` or an API error's dotted field (``body.analyses.0.group``); none when
    it is not one field of the form."""
    parts = location.split(".") if isinstance(location, str) else [str(p) for p in location]
    if parts[:1] == ["body"]:
        parts = parts[1:]
    if not parts:
        return None
    head = parts[0]
    if head == "groups":
        index = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
        return (("group_x", "Group X"), ("group_y", "Group Y"))[index] if index < 2 \
            else ("groups_more", "Further groups")
    if head == "primary" and parts[1:2] == ["alpha"]:
        return "alpha", "α of the primary test"
    if head in STUDY_FIELDS:
        return STUDY_FIELDS[head]
    if head != "analyses" or len(parts) < 2 or not parts[1].isdigit():
        return None
    analyses = spec.get("analyses") or []
    index = int(parts[1])
    if index >= len(analyses) or analyses[index].get("kind") not in _BY_KIND:
        return None
    form = _BY_KIND[analyses[index]["kind"]]
    rest = parts[2:]
    if rest[:1] == [form.kind]:  # the discriminated union names the kind
        rest = rest[1:]
    found: FormField | None = form.field_named(rest[0]) if rest else None
    if found is None:
        return f"analysis-{form.kind}", form.label
    if found.widget == "pair":
        end = rest[1] if len(rest) > 1 and rest[1] in ("0", "1") else "0"
        return f"{found.input}.{end}", form_label(found)
    return found.input, form_label(found)


def form_errors(errors: Sequence[Mapping[str, Any]], spec: Mapping[str, Any]) -> tuple[
        list[str], dict[str, str]]:
    """The spec model's errors (pydantic's, as the API's 422 gives them) each named by the
    builder's field it comes from, and the message of each field to mark."""
    problems: list[str] = []
    marks: dict[str, str] = {}
    for err in errors:
        location = err.get("loc", ())
        message = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        found = field_of(location, spec)
        if found is None:
            problems.append(f"{dotted(location) or 'study'}: {message}")
            continue
        name, label = found
        problems.append(f"{label}: {message}")
        marks.setdefault(name, f"{label}: {message}")
    return problems, marks


def marked_fields(extra: Mapping[str, Any], spec: Mapping[str, Any]) -> dict[str, str]:
    """The builder's fields an API error names (its ``fields``, ``body.…`` paths, and for an
    unknown name what the centers lack), each with its message."""
    marks: dict[str, str] = {}
    for unknown in extra.get("unknown") or []:
        found = field_of(str(unknown.get("field", "")), spec)
        if found is not None:
            centers = ", ".join(unknown.get("centers") or [])
            marks.setdefault(found[0], f"{found[1]}: {unknown.get('what')} "
                                       f"{unknown.get('name')!r} is not declared by {centers}")
    for path in extra.get("fields") or []:
        found = field_of(str(path), spec)
        if found is not None:
            marks.setdefault(found[0], f"{found[1]}: see above")
    return marks


def catalog_names(catalog: Catalog) -> dict[str, list[str]]:
    """Every variable and every group level the catalog's datasets declare (each once)."""
    return {"variables": list(dict.fromkeys(v for ds in catalog.datasets for v in ds.variables)),
            "levels": list(dict.fromkeys(v for ds in catalog.datasets for v in ds.levels))}


def figure_links(view: dict[str, Any]) -> list[tuple[int, str, str]]:
    """(index, figure name, label) of each figure of each analysis
    (``coordinator.figures.figure_names``)."""
    result = view.get("result") or {}
    return [(i, name, FIGURE_LABELS[name])
            for i, a in enumerate(result.get("analyses") or []) for name in figure_names(a)]


EXPORT_KINDS = {"describe": [("table1", "Table 1"), ("table1_formatted", "Table 1 as shown")],
                "mwu": [("tests", "Tests"), ("effects", "Effect sizes")],
                "dp_boxplot": [("boxplots", "Boxplots")],
                "dp_quantiles": [("dp_quantiles", "DP quantiles")],
                "quantiles": [("quantiles", "Quantiles")], "table": [("table", "Table bins")],
                "kruskal": [("kruskal", "k-arm tests")], "shift": [("shift", "Shift")],
                "categorical": [("categorical", "Categories, n (%)"),
                                ("categorical_tests", "Category tests")],
                "dp_mwu": [("tests", "Tests"), ("effects", "Effect sizes"),
                           ("dp_mwu_releases", "DP releases")]}


def export_links(view: dict[str, Any]) -> list[tuple[str, str]]:
    """(part, label) of each CSV table the study has (``coordinator.exports``)."""
    kinds = {a.get("kind") for a in (view.get("result") or {}).get("analyses") or []
             if a.get("status") == "succeeded"}
    found = [link for kind, links in EXPORT_KINDS.items() if kind in kinds for link in links]
    return list(dict.fromkeys(found))  # mwu and dp_mwu share the tests and effects parts
