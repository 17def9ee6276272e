"""The study builder's form as a study spec (the same JSON the API takes), and the figures and
tables a study page offers to download.

The page holds instances of the analyses' forms (``coordinator.ui.schema_form``): one of every
offered kind at first; the analyst adds and removes instances (:func:`edited`), each keyed
``<kind>`` or ``<kind>-<n>``, listed in the hidden ``instances`` fields; those ticked
(``analyses``) make the spec's analyses, in the page's order."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, get_args, get_origin

from coordinator.analyses import REGISTRY, FormError
from coordinator.models import Catalog, StudySpec
from coordinator.quotas import analysis_spends
from coordinator.reporting.figures import FIGURE_LABELS, figure_names
from coordinator.ui.schema_form import (
    MAX_INSTANCES,
    AnalysisForm,
    FormField,
    as_list,
    builder_forms,
    form_label,
    initial_values,
    instance_forms,
    parse_key,
    part_from_form,
    text_of,
)
from coordinator.ui.schema_form import posted_values as posted_fields
from fedstats_service.errors import dotted

__all__ = ["ANALYSES", "DEFAULTS", "FIGURE_LABELS", "FORMS", "PRIMARY_GROUPS",
           "PRIMARY_TESTS",
           "FormError", "catalog_names", "chosen_keys", "edited", "export_links", "field_of",
           "figure_links", "form_errors", "instance_groups", "instances", "marked_fields",
           "posted_values", "spec_from_form"]

# What the builder offers: a form for every registered analysis that does not opt out,
# generated from its spec model (``coordinator.ui.schema_form``).
FORMS: tuple[AnalysisForm, ...] = builder_forms()
ANALYSES = tuple(form.kind for form in FORMS)
_BY_KIND = {form.kind: form for form in FORMS}


def _declared_tests(form: AnalysisForm) -> tuple[str, ...]:
    """The tests an analysis declares: the choices of its spec model's ``tests`` list (none
    without one)."""
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
# The study's own fields, by the spec's name: (HTML name, label).
STUDY_FIELDS = {"title": ("title", "Title"), "description": ("description", "Description"),
                "dataset": ("dataset", "Dataset"), "variable": ("variable", "Variable"),
                "k": ("k", "K"), "centers": ("centers", "Centers"),
                "primary": ("primary", "Primary test")}
# What a field of every instance of a kind shows at first besides its schema's default.
PRESETS: dict[str, dict[str, str]] = {"quantiles": {"levels": "0.25, 0.5, 0.75"},
                                      "dp_quantiles": {"levels": "0.25, 0.5, 0.75"}}
DEFAULTS: dict[str, Any] = {
    "dataset": "", "variable": "", "group_x": "", "group_y": "", "groups_more": [], "k": "10",
    "analyses": [kind for kind in ("table", "mwu", "quantiles") if kind in ANALYSES],
    "centers": [], "toml": "", "title": "", "description": "", "primary": "", "alpha": "0.05",
    **initial_values(), **{f"{kind}.{name}": value for kind, preset in PRESETS.items()
                           if kind in ANALYSES for name, value in preset.items()},
}


def posted_values(items: Sequence[tuple[str, Any]],
                  forms: Sequence[AnalysisForm] | None = None) -> dict[str, Any]:
    """The posted fields as the builder reads them (``schema_form.posted_values``), the
    study's lists of checkboxes as lists even when one box is ticked."""
    values = posted_fields(items, forms)
    for name in ("centers", "groups_more"):
        if name in values:
            values[name] = as_list(values[name])
    return values


def instance_defaults(form: AnalysisForm) -> dict[str, Any]:
    """What an instance's fields show when it is added: its schema's defaults and presets."""
    preset = PRESETS.get(form.kind, {})
    return {**initial_values([form]),
            **{f.input: preset[f.name] for f in form.fields if f.name in preset}}


def instances(values: Mapping[str, Any]) -> list[str]:
    """The keys of the instances on the page: those it lists (``instances``, posted with a
    blank first so that none listed is not taken for a form made elsewhere), else the first
    of every offered kind, and any chosen one it does not list; in the page's order (the
    registry's, then by number)."""
    listed = as_list(values["instances"]) if "instances" in values else list(ANALYSES)
    found = instance_forms([*listed, *as_list(values.get("analyses"))], FORMS)
    return [f.key for f in sorted(found, key=lambda f: (ANALYSES.index(f.kind), f.number))]


def chosen_keys(values: Mapping[str, Any]) -> list[str]:
    """The keys of the instances ticked (``analyses``, each once, as posted: in the page's
    order): the spec's analyses."""
    return [form.key for form in instance_forms(as_list(values.get("analyses")), FORMS)]


def instance_groups(values: Mapping[str, Any]) -> list[tuple[AnalysisForm, list[AnalysisForm]]]:
    """Every offered kind's form with its instances on the page, in the registry's order (the
    page shows each kind's instances together, then a button adding one)."""
    on_page = instance_forms(instances(values), FORMS)
    return [(form, [i for i in on_page if i.kind == form.kind]) for form in FORMS]


def edited(values: Mapping[str, Any], action: str) -> dict[str, Any] | None:
    """The page's values after ``action``: ``add:<kind>`` adds an instance of the kind (ticked,
    its fields at their defaults, numbered after the kind's highest), ``remove:<key>`` drops
    one (and what was posted in its fields); none for any other action."""
    verb, _, target = action.partition(":")
    keys = instances(values)
    parsed = [parse_key(k) or ("", 0) for k in keys]
    out = dict(values)
    if verb == "add" and target in _BY_KIND:
        number = max((n for kind, n in parsed if kind == target), default=0) + 1
        if number > MAX_INSTANCES:
            raise FormError(f"{_BY_KIND[target].label}: at most {MAX_INSTANCES} of a kind",
                            field=f"add-{target}")
        added = _BY_KIND[target].instance(number)
        out["instances"] = [*keys, added.key]
        out["analyses"] = [*as_list(values.get("analyses")), added.key]
        out.update(instance_defaults(added))
        return out
    if verb == "remove" and target in keys:
        out["instances"] = [k for k in keys if k != target]
        out["analyses"] = [k for k in as_list(values.get("analyses")) if k != target]
        for name in list(out):
            if name.startswith(f"{target}."):
                del out[name]
        return out
    return None


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
    chosen = instance_forms(chosen_keys(values), FORMS)
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
        "analyses": [part_from_form(form, values) for form in chosen],
    }
    if more and not all(groups):
        raise FormError("further groups: choose groups X and Y first", field="groups_more")
    if values.get("centers"):
        spec["centers"] = as_list(values["centers"])
    primary = text_of(values, "primary")
    if primary:
        # The primary test is one of the tests of the first chosen analysis of its kind.
        kinds = [form.kind for form in chosen]
        kind, test = _PRIMARY.get(primary, ("", ""))
        if kind not in kinds:
            label = next((g[1] for g in PRIMARY_GROUPS if g[0] == kind), "its analysis")
            raise FormError("primary test: choose one of the tests offered, and the analysis "
                            f"it belongs to ({label})", field="primary")
        spec["primary"] = {"analysis": kinds.index(kind), "test": test,
                           "alpha": _number(values, "alpha", "α of the primary test")}
    return spec


def _instance_of(spec: Mapping[str, Any], index: int,
                 keys: Sequence[str] | None) -> AnalysisForm | None:
    """The instance the spec's ``index``-th analysis came from: by the keys of the instances
    chosen (:func:`chosen_keys`), else the kind's instance counted in the spec's order."""
    analyses = spec.get("analyses") or []
    if index >= len(analyses) or analyses[index].get("kind") not in _BY_KIND:
        return None
    kind = analyses[index]["kind"]
    if keys is not None and index < len(keys) and (parse_key(keys[index]) or ("",))[0] == kind:
        found = instance_forms([keys[index]], FORMS)
        return found[0] if found else None
    number = sum(1 for a in analyses[:index + 1] if a.get("kind") == kind)
    return _BY_KIND[kind].instance(number) if number <= MAX_INSTANCES else None


def asked(spec: StudySpec, keys: Sequence[str] | None = None) -> list[tuple[int, str, str]]:
    """(index, label, ε per center) of each analysis of ``spec``, for the dry run: labelled as
    the page heads its instance (``keys``: :func:`chosen_keys`; none, a study file: each kind's
    instances counted in the spec's order), its ε that of :func:`coordinator.quotas.
    analysis_spends` (a request an earlier analysis sends counted there)."""
    raw = spec.model_dump(mode="json")
    out = []
    for i, spend in enumerate(analysis_spends(spec)):
        form = _instance_of(raw, i, keys)
        label = form.title if form is not None else spec.analyses[i].kind
        epsilon = "none" if spend.epsilon == 0 else \
            f"{'' if spend.exact else '≤ '}{spend.epsilon:.4g}"
        out.append((i, label, epsilon))
    return out


def field_of(location: Sequence[Any] | str, spec: Mapping[str, Any],
             keys: Sequence[str] | None = None) -> tuple[str, str] | None:
    """The builder's field (HTML name, label) a location in ``spec`` comes from: a pydantic
    error's ``loc`` or an API error's dotted field (``body.analyses.0.group``); none when
    it is not one field of the form. ``keys``: the instances the spec's analyses came from
    (:func:`chosen_keys`)."""
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
    form = _instance_of(spec, int(parts[1]), keys)
    if form is None:
        return None
    rest = parts[2:]
    if rest[:1] == [form.kind]:  # the discriminated union names the kind
        rest = rest[1:]
    found: FormField | None = form.field_named(rest[0]) if rest else None
    if found is None:
        return f"analysis-{form.key}", form.named
    if found.widget == "pair":
        end = rest[1] if len(rest) > 1 and rest[1] in ("0", "1") else "0"
        return f"{found.input}.{end}", form_label(found)
    if found.widget == "variable_pairs" and len(rest) > 1:
        end = rest[2] if len(rest) > 2 and rest[2] in ("0", "1") else "0"
        return f"{found.input}.{rest[1]}.{end}", f"{form_label(found)} of {rest[1]}"
    return found.input, form_label(found)


def form_errors(errors: Sequence[Mapping[str, Any]], spec: Mapping[str, Any],
                keys: Sequence[str] | None = None) -> tuple[list[str], dict[str, str]]:
    """The spec model's errors (pydantic's, as the API's 422 gives them) each named by the
    builder's field it comes from, and the message of each field to mark."""
    problems: list[str] = []
    marks: dict[str, str] = {}
    for err in errors:
        location = err.get("loc", ())
        message = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        found = field_of(location, spec, keys)
        if found is None:
            problems.append(f"{dotted(location) or 'study'}: {message}")
            continue
        name, label = found
        problems.append(f"{label}: {message}")
        marks.setdefault(name, f"{label}: {message}")
    return problems, marks


def marked_fields(extra: Mapping[str, Any], spec: Mapping[str, Any],
                  keys: Sequence[str] | None = None) -> dict[str, str]:
    """The builder's fields an API error names (its ``fields``, ``body.…`` paths, and for an
    unknown name what the centers lack), each with its message."""
    marks: dict[str, str] = {}
    for unknown in extra.get("unknown") or []:
        found = field_of(str(unknown.get("field", "")), spec, keys)
        if found is not None:
            centers = ", ".join(unknown.get("centers") or [])
            marks.setdefault(found[0], f"{found[1]}: {unknown.get('what')} "
                                       f"{unknown.get('name')!r} is not declared by {centers}")
    for path in extra.get("fields") or []:
        found = field_of(str(path), spec, keys)
        if found is not None:
            marks.setdefault(found[0], f"{found[1]}: see above")
    return marks


def catalog_names(catalog: Catalog) -> dict[str, dict[str, list[str]]]:
    """Every variable, group level and categorical variable the catalog's datasets declare,
    and every center declaring one (each once, in the order first declared), with the
    datasets declaring it: the page offers a name only while one of its datasets is chosen
    (a registered center the catalog could not read is in none: always offered)."""
    names: dict[str, dict[str, list[str]]] = {"variables": {}, "levels": {}, "categorical": {},
                                              "time_to_event": {}, "centers": {}}
    for ds in catalog.datasets:
        for what, declared in (("variables", ds.variables), ("levels", ds.levels),
                               ("categorical", ds.categorical),
                               ("time_to_event", ds.time_to_event),
                               ("centers", [c.center for c in ds.centers])):
            for name in declared:
                names[what].setdefault(name, []).append(ds.name)
    return names


def figure_links(view: dict[str, Any]) -> list[tuple[int, str, str]]:
    """(index, figure name, label) of each figure of each analysis
    (``coordinator.reporting.figures.figure_names``)."""
    result = view.get("result") or {}
    return [(i, name, FIGURE_LABELS[name])
            for i, a in enumerate(result.get("analyses") or []) for name in figure_names(a)]


def export_links(view: dict[str, Any]) -> list[tuple[str, str]]:
    """(part, label) of each CSV table the study has (``coordinator.reporting.exports``)."""
    kinds = {a.get("kind") for a in (view.get("result") or {}).get("analyses") or []
             if a.get("status") == "succeeded"}
    found = {part for kind in kinds if kind in REGISTRY
             for part in REGISTRY[str(kind)].export_parts if part.label is not None}
    return [(part.name, part.label) for part in sorted(found, key=lambda part: part.order)
            if part.label is not None]
