"""The study builder's forms, generated from the analyses' spec models
(``coordinator.ui.schema_form``): every registered analysis gets one, whose sample values its
own model accepts; each kind of schema property gets its widget; an analysis added to the
registry is offered with a label from its model unless it opts out; a bad field is named, by
the builder (``FormError``) or by the spec model's error mapped back to it."""

from __future__ import annotations

import json
import math
from typing import Any, ClassVar, Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from coordinator.analyses import REGISTRY, Analysis, FormError
from coordinator.models import Catalog, CatalogDataset, CatalogEntry, StudySpec
from coordinator.ui import forms
from coordinator.ui.schema_form import (
    MAX_INSTANCES,
    OMIT,
    FormField,
    builder_forms,
    field_value,
    form_of,
    instance_key,
    parse_key,
    part_from_form,
    posted_values,
)
from shared.fields import Bounds

VARIABLES = ["crp", "age"]
LEVELS = ["ctl", "trt"]
CATEGORICAL = ["smoking", "stage"]
STUDY = {"dataset": "cohort", "variable": "crp", "group_x": "ctl", "group_y": "trt", "k": "10"}


def samples(f: FormField) -> list[dict[str, Any]]:
    """Posted values of one field that its property's own schema allows (one per option of a
    select), as an analyst would pick them from the page."""
    if f.widget in ("number", "integer"):
        low = f.minimum if f.minimum is not None else -math.inf
        high = f.maximum if f.maximum is not None else math.inf
        value = f.default if isinstance(f.default, int | float) else min(max(1, low), high)
        return [{f.input: str(int(value) if f.widget == "integer" else value)}]
    if f.widget in ("select", "choice_or_number"):
        return [{f.input: option} for option in f.options]
    if f.widget == "checks":
        return [{f.input: [option]} for option in f.options]
    if f.widget == "checkbox":
        return [{f.input: "true"}, {f.input: ""}]
    if f.widget == "numbers":
        return [{f.input: "0.25, 0.75"}]
    if f.widget == "pair":
        return [{f"{f.input}.0": "0", f"{f.input}.1": "1"}]
    if f.widget == "mapping":
        return [{f.input: f"{VARIABLES[0]}: 0, 1"}]
    if f.widget == "variable_pairs":
        return [{f"{f.input}.{VARIABLES[0]}.0": "0", f"{f.input}.{VARIABLES[0]}.1": "1"}]
    if f.widget == "variable":
        return [{f.input: VARIABLES[0]}]
    if f.widget == "variables":
        return [{f.input: VARIABLES[:1]}, {f.input: VARIABLES}]
    if f.widget == "level":
        return [{f.input: LEVELS[1]}]
    if f.widget == "categorical":
        return [{f.input: CATEGORICAL[0]}]
    if f.widget == "categoricals":
        return [{f.input: CATEGORICAL[:1]}, {f.input: CATEGORICAL}]
    if f.widget == "time_to_event":
        return [{f.input: "readmission"}]
    if f.widget == "text":
        return [{f.input: "x"}]
    assert not f.required, f"{f.input}: a required field the builder can only read as JSON"
    return [{f.input: json.dumps(f.default)}]


def required_values(fields: tuple[FormField, ...]) -> dict[str, Any]:
    return {k: v for f in fields if f.required for k, v in samples(f)[0].items()}


@pytest.mark.parametrize("kind", list(REGISTRY))
def test_every_registered_analysis_gets_a_form_its_spec_model_accepts(kind: str) -> None:
    analysis = REGISTRY[kind]
    assert analysis.form_offered and kind in forms.ANALYSES
    form = form_of(analysis)
    assert form.label and form.fields is not None
    # The required fields alone: the model's defaults for the rest, blank fields left out.
    base = required_values(form.fields)
    part = part_from_form(form, base)
    model = analysis.spec_model.model_validate(part)
    left_out = {f.name for f in form.fields if not f.required}
    assert not left_out & set(part), part
    declared = analysis.spec_model.model_fields
    for f in form.fields:
        if not f.required:
            default = declared[f.name].get_default(call_default_factory=True)
            assert getattr(model, f.name) == default, f.input
    # In a whole study, as the page posts it: the same model the API validates with.
    spec = StudySpec.model_validate(forms.spec_from_form({**STUDY, "analyses": [kind], **base}))
    assert [a.kind for a in spec.analyses] == [kind]
    # Each optional field on its own, each of its options: the model takes the value as given
    # (an error, if any, is the model's rule across fields, never the field's own).
    for f in form.fields:
        for sample in samples(f):
            part = part_from_form(form, {**base, **sample})
            try:
                got = analysis.spec_model.model_validate(part).model_dump(mode="json")
            except ValidationError as exc:
                assert all(len(e["loc"]) == 0 for e in exc.errors()), (f.input, exc)
                continue
            assert got[f.name] == json.loads(json.dumps(part[f.name])), (f.input, part)


def test_the_builder_offers_every_registered_analysis_in_the_registrys_order() -> None:
    assert forms.ANALYSES == tuple(REGISTRY)
    assert [f.kind for f in builder_forms()] == list(REGISTRY)


class ShiftSpec(BaseModel):
    """Shift of the variable's distribution between arms: a made-up analysis with one property
    of every kind the builder knows."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    max_groups: ClassVar[int | None] = None
    kind: Literal["shift_test"]
    epsilon: float = Field(gt=0, le=10, description="ε per center")
    bounds: Bounds
    reference: str | None = Field(default=None, description="the reference arm")
    cuts: list[float] = Field(default_factory=lambda: [0.5], min_length=1)
    method: Literal["exact", "asymptotic"] = "exact"
    sides: list[Literal["less", "greater"]] = Field(default_factory=lambda: ["less"])
    paired: bool = False
    rounds: int | None = Field(default=None, ge=1, le=9)
    lower: Literal["buffer", "infinite"] | float = "buffer"
    covariates: list[str] | None = None
    per_variable: dict[str, Bounds] | None = None
    note: str | None = None
    extra: dict[str, int] | None = None


class Shift(Analysis[ShiftSpec, ShiftSpec]):
    kind = "shift_test"
    spec_model = ShiftSpec
    result_model = ShiftSpec
    form_widgets: ClassVar[dict[str, str]] = {"reference": "level", "covariates": "variables"}


def test_each_kind_of_property_gets_its_widget_and_reads_back() -> None:
    form = form_of(Shift())
    widgets = {f.name: f.widget for f in form.fields}
    assert widgets == {
        "epsilon": "number", "bounds": "pair", "reference": "level", "cuts": "numbers",
        "method": "select", "sides": "checks", "paired": "checkbox", "rounds": "integer",
        "lower": "choice_or_number", "covariates": "variables", "per_variable": "mapping",
        "note": "text", "extra": "json"}
    # Optional: blank is the model's default (a default_factory's too), shown as such.
    cuts = form.field_named("cuts")
    assert cuts is not None and not cuts.required and cuts.placeholder == "blank: 0.5"
    assert form.field_named("sides").initial() == ["less"]  # type: ignore[union-attr]
    assert form.field_named("method").options == ("exact", "asymptotic")  # type: ignore[union-attr]
    assert form.field_named("epsilon").maximum == 10  # type: ignore[union-attr]
    posted = posted_values([
        ("shift_test.epsilon", "0.5"), ("shift_test.bounds.0", "-1"),
        ("shift_test.bounds.1", "2.5"), ("shift_test.reference", "trt"),
        ("shift_test.cuts", "0.1; 0.9"), ("shift_test.method", "asymptotic"),
        ("shift_test.sides", "less"), ("shift_test.sides", "greater"),
        ("shift_test.paired", "true"), ("shift_test.rounds", "3"),
        ("shift_test.lower", "-7.5"), ("shift_test.covariates", "age"),
        ("shift_test.per_variable", "age: 18, 99; crp: 0, 300"), ("shift_test.note", " hi "),
        ("shift_test.extra", '{"a": 1}')], [form])
    part = part_from_form(form, posted)
    assert part == {
        "kind": "shift_test", "epsilon": 0.5, "bounds": [-1.0, 2.5], "reference": "trt",
        "cuts": [0.1, 0.9], "method": "asymptotic", "sides": ["less", "greater"],
        "paired": True, "rounds": 3, "lower": -7.5, "covariates": ["age"],
        "per_variable": {"age": [18.0, 99.0], "crp": [0.0, 300.0]}, "note": "hi",
        "extra": {"a": 1}}
    ShiftSpec.model_validate(part)
    # Blank optional fields are left out; a box posted blank only is unticked (false).
    bare = part_from_form(form, posted_values([
        ("shift_test.epsilon", "1"), ("shift_test.bounds.0", "0"), ("shift_test.bounds.1", "1"),
        ("shift_test.lower", "buffer"), ("shift_test.rounds", " "), ("shift_test.paired", "")],
        [form]))
    assert bare == {"kind": "shift_test", "epsilon": 1.0, "bounds": [0.0, 1.0],
                    "lower": "buffer", "paired": False}
    # Not posted at all (no page behind it): the default.
    assert "paired" not in part_from_form(form, {"shift_test.epsilon": "1",
                                                 "shift_test.bounds.0": "0",
                                                 "shift_test.bounds.1": "1"})


def test_a_registered_analysis_is_offered_with_its_models_label_unless_it_opts_out(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(REGISTRY, "shift_test", Shift())
    offered = {f.kind: f for f in builder_forms()}
    assert offered["shift_test"].label == "shift of the variable's distribution between arms"
    assert offered["mwu"].label == "Mann-Whitney tests"  # its own label
    monkeypatch.setattr(Shift, "form_label", "shift test")
    assert {f.kind: f.label for f in builder_forms()}["shift_test"] == "shift test"
    monkeypatch.setattr(Shift, "form_offered", False)
    assert "shift_test" not in {f.kind for f in builder_forms()}


@pytest.mark.parametrize(("posted", "field", "message"), [
    ({"dp_boxplot.epsilon": "half"}, "dp_boxplot.epsilon", "DP boxplots › ε: give a number"),
    ({"dp_boxplot.epsilon": "nan"}, "dp_boxplot.epsilon", "DP boxplots › ε: give a finite"),
    ({"dp_boxplot.depth": "6.5"}, "dp_boxplot.depth", "depth: give a whole number"),
    ({"dp_boxplot.bounds.1": ""}, "dp_boxplot.bounds.1", "give both the lower and the upper"),
    ({"dp_boxplot.levels": "0.1, x"}, "dp_boxplot.levels", "levels: give numbers separated"),
    ({"k": "ten"}, "k", "K: give a whole number"),
    ({"analyses": []}, "analyses", "choose at least one"),
    ({"primary": "sum"}, "primary", r"the analysis it belongs to \(Mann-Whitney tests\)"),
    ({"primary": "dp_mwu:sum"}, "primary", r"belongs to \(Mann-Whitney tests, differentially"),
    ({"primary": "wilcoxon"}, "primary", "choose one of the tests offered"),
])
def test_a_field_the_builder_cannot_read_is_named(posted: dict[str, Any], field: str,
                                                  message: str) -> None:
    values = {**STUDY, "analyses": ["dp_boxplot"], "dp_boxplot.epsilon": "1",
              "dp_boxplot.bounds.0": "0", "dp_boxplot.bounds.1": "10", **posted}
    with pytest.raises(FormError, match=message) as raised:
        forms.spec_from_form(values)
    assert raised.value.field == field


def test_the_spec_models_errors_lead_back_to_the_fields() -> None:
    values = {**STUDY, "analyses": ["describe", "dp_boxplot"], "dp_boxplot.epsilon": "0",
              "dp_boxplot.bounds.0": "0", "dp_boxplot.bounds.1": "10",
              "describe.mode": "dp", "k": "1"}
    spec = forms.spec_from_form(values)
    with pytest.raises(ValidationError) as raised:
        StudySpec.model_validate(spec)
    problems, marks = forms.form_errors(raised.value.errors(), spec)
    assert set(marks) == {"k", "dp_boxplot.epsilon", "analysis-describe"}
    assert marks["dp_boxplot.epsilon"].startswith("DP boxplots › ε: Input should be greater")
    assert marks["analysis-describe"] == ("descriptive statistics (Table 1): a dp describe "
                                          "needs `epsilon` (per variable and arm, per center)")
    assert any(p.startswith("K: ") for p in problems)
    # The API's field paths (a 422's ``fields``): the same fields.
    assert forms.field_of("body.analyses.1.group", spec) == (
        "dp_boxplot.group", "DP boxplots › group")
    assert forms.field_of(("analyses", 1, "dp_boxplot", "bounds", 1), spec) == (
        "dp_boxplot.bounds.1", "DP boxplots › bounds")
    assert forms.field_of("body.groups.1", spec) == ("group_y", "Group Y")
    assert forms.field_of("body.variable", spec) == ("variable", "Variable")
    assert forms.field_of("body.analyses.7.group", spec) is None
    marked = forms.marked_fields({"fields": ["body.analyses.1.group"], "unknown": [
        {"what": "group level", "name": "nope", "field": "body.analyses.1.group",
         "centers": ["alpha"]}]}, spec)
    assert marked == {"dp_boxplot.group": "DP boxplots › group: group level 'nope' is not "
                                          "declared by alpha"}


def test_one_ticked_box_of_a_list_is_a_list() -> None:
    # Else the page would test a substring: "quantiles" in "dp_quantiles", "alpha" in "alpha2".
    values = forms.posted_values([("analyses", "dp_quantiles"), ("instances", "dp_quantiles"),
                                  ("centers", "alpha2"), ("groups_more", "trt2"),
                                  ("title", "t")])
    assert values["analyses"] == ["dp_quantiles"] and values["instances"] == ["dp_quantiles"]
    assert values["centers"] == ["alpha2"] and values["groups_more"] == ["trt2"]
    assert values["title"] == "t"


def test_posted_checkboxes_read_as_posted() -> None:
    values = posted_values([("analyses", "mwu"), ("analyses", "describe"),
                            ("describe.variables", "age"), ("mwu.tests", "sum")])
    assert values["analyses"] == ["mwu", "describe"]
    assert values["describe.variables"] == ["age"] and values["mwu.tests"] == ["sum"]
    assert "describe.pooled" not in values and values["quantiles.estimators"] == []
    form = {f.kind: f for f in builder_forms()}["describe"]
    pooled = form.field_named("pooled")
    # The page posts a blank before each box: unticked false, ticked true, unposted default.
    assert pooled is not None and field_value(pooled, values) is OMIT
    assert field_value(pooled, posted_values([("describe.pooled", "")])) is False
    assert field_value(pooled, posted_values([("describe.pooled", ""),
                                              ("describe.pooled", "true")])) is True
    per_center = form.field_named("per_center")
    assert per_center is not None and field_value(per_center, {}) is OMIT
    variables = form.field_named("variables")
    assert variables is not None and field_value(variables, {}) is OMIT


# -- several analyses of a kind ------------------------------------------------------------------


def test_instance_keys_are_the_kinds_numbered_from_the_second() -> None:
    assert [instance_key("dp_quantiles", n) for n in (1, 2, 16)] == [
        "dp_quantiles", "dp_quantiles-2", "dp_quantiles-16"]
    assert parse_key("dp_quantiles-2") == ("dp_quantiles", 2)
    assert parse_key("describe") == ("describe", 1)
    # Anything else is no key: a kind not registered, a number out of range, not a key's form.
    for bad in ("nope", "nope-2", "dp_quantiles-1", "dp_quantiles-17", "dp_quantiles-02",
                "dp_quantiles-2x", "dp_quantiles.2", "../describe", "", "DESCRIBE"):
        assert parse_key(bad) is None, bad
    form = {f.kind: f for f in builder_forms()}["dp_quantiles"].instance(3)
    assert form.key == "dp_quantiles-3" and form.title == "DP quantiles (per center) #3"
    epsilon = form.field_named("epsilon")
    assert epsilon is not None and epsilon.input == "dp_quantiles-3.epsilon"
    assert epsilon.id == "f-dp_quantiles-3-epsilon"
    assert epsilon.analysis_label == "DP quantiles (per center) #3"


def two_of_each(kind: str) -> dict[str, Any]:
    """The page's values with two instances of ``kind`` ticked, each its own sample values
    (the second its fields' last samples where they differ)."""
    form = {f.kind: f for f in builder_forms()}[kind]
    values: dict[str, Any] = {**STUDY, "instances": [kind, f"{kind}-2"],
                              "analyses": [kind, f"{kind}-2"]}
    for number in (1, 2):
        shown = form.instance(number)
        values.update(required_values(shown.fields))
    return values


@pytest.mark.parametrize("kind", list(REGISTRY))
def test_two_analyses_of_every_kind_round_trip_into_the_spec(kind: str) -> None:
    values = two_of_each(kind)
    spec = forms.spec_from_form(values)
    assert [a["kind"] for a in spec["analyses"]] == [kind, kind]
    StudySpec.model_validate(spec)


def test_each_instance_keeps_its_own_values_in_the_pages_order() -> None:
    posted = posted_values([
        ("instances", ""), ("instances", "describe"), ("instances", "dp_quantiles"),
        ("instances", "dp_quantiles-3"), ("instances", "describe-2"),
        *[(k, v) for k, v in STUDY.items()],
        ("analyses", "dp_quantiles"), ("analyses", "dp_quantiles-3"), ("analyses", "describe"),
        ("analyses", "describe-2"),
        ("dp_quantiles.epsilon", "0.5"), ("dp_quantiles.bounds.0", "0"),
        ("dp_quantiles.bounds.1", "100"), ("dp_quantiles.levels", "0.5"),
        ("dp_quantiles.group", "ctl"),
        ("dp_quantiles-3.epsilon", "0.25"), ("dp_quantiles-3.bounds.0", "-1"),
        ("dp_quantiles-3.bounds.1", "1"), ("dp_quantiles-3.levels", "0.1, 0.9"),
        ("dp_quantiles-3.group", "trt"),
        ("describe.variables", "crp"), ("describe-2.variables", "crp"),
        ("describe-2.variables", "age"), ("describe-2.categorical", "smoking"),
        ("describe-2.pooled", ""), ("describe-2.pooled", "true")])
    # Every instance's checkboxes are read (none ticked: empty), its own.
    assert posted["describe.variables"] == ["crp"]
    assert posted["describe-2.variables"] == ["crp", "age"]
    assert posted["describe.categorical"] == [] and posted["dp_quantiles-3.levels"] == "0.1, 0.9"
    assert forms.instances(posted) == ["dp_quantiles", "dp_quantiles-3", "describe",
                                       "describe-2"]
    spec = forms.spec_from_form(posted)
    assert spec["analyses"] == [
        {"kind": "dp_quantiles", "epsilon": 0.5, "bounds": [0.0, 100.0], "levels": [0.5],
         "group": "ctl"},
        {"kind": "dp_quantiles", "epsilon": 0.25, "bounds": [-1.0, 1.0], "levels": [0.1, 0.9],
         "group": "trt"},
        {"kind": "describe", "variables": ["crp"]},
        {"kind": "describe", "variables": ["crp", "age"], "pooled": True,
         "categorical": ["smoking"]}]
    StudySpec.model_validate(spec)
    # An instance on the page but not ticked is not asked; a key of no kind is ignored.
    spec = forms.spec_from_form({**posted, "analyses": ["describe-2", "nope-2", "describe-2"]})
    assert [a.get("variables") for a in spec["analyses"]] == [["crp", "age"]]


def test_analyses_are_added_and_removed_each_with_its_own_fields() -> None:
    values = posted_values([*STUDY.items(), ("analyses", "table")])
    assert forms.instances(values) == list(forms.ANALYSES)  # the first of every kind
    added = forms.edited(values, "add:dp_quantiles")
    assert added is not None
    assert added["instances"][-1] == "dp_quantiles-2"
    assert forms.instances(added).index("dp_quantiles-2") == \
        forms.instances(added).index("dp_quantiles") + 1
    assert added["analyses"] == ["table", "dp_quantiles-2"]  # ticked, as added to be asked
    assert added["dp_quantiles-2.levels"] == "0.25, 0.5, 0.75"  # the kind's preset
    added["dp_quantiles-2.epsilon"] = "0.5"
    third = forms.edited(added, "add:dp_quantiles")
    assert third is not None and "dp_quantiles-3" in third["instances"]
    assert third["dp_quantiles-2.epsilon"] == "0.5"  # the others keep what was posted
    # Removing one drops it, ticked or not, and what was posted in its fields.
    removed = forms.edited(third, "remove:dp_quantiles-2")
    assert removed is not None
    assert "dp_quantiles-2" not in forms.instances(removed)
    assert "dp_quantiles-2" not in removed["analyses"]
    assert not any(k.startswith("dp_quantiles-2.") for k in removed)
    # Numbered after the kind's highest: a new one is never an old one's values.
    again = forms.edited(removed, "add:dp_quantiles")
    assert again is not None and "dp_quantiles-4" in again["instances"]
    # The first of a kind may go too, then every instance of it: none of the kind is left,
    # and the page's list (posted with a blank first) is not taken for a form made elsewhere.
    gone = removed
    for key in ("dp_quantiles", "dp_quantiles-3"):
        gone = forms.edited(gone, f"remove:{key}")  # type: ignore[assignment]
    assert not [k for k in forms.instances(gone) if k.startswith("dp_quantiles")]
    empty = forms.edited({"instances": ["", "table"], "analyses": ["table"]}, "remove:table")
    assert empty is not None and forms.instances(empty) == []
    assert forms.instances(posted_values([("instances", "")])) == []
    # Anything else is no edit; at most MAX_INSTANCES of a kind.
    for action in ("add:nope", "remove:nope", "remove:describe-5", "plan", "add:", "drop:x"):
        assert forms.edited(values, action) is None, action
    many = {"instances": [instance_key("table", n) for n in range(1, MAX_INSTANCES + 1)]}
    with pytest.raises(FormError, match="at most 16") as raised:
        forms.edited(many, "add:table")
    assert raised.value.field == "add-table"


def test_errors_of_a_later_instance_lead_back_to_its_fields() -> None:
    values = {**STUDY, "instances": ["dp_boxplot", "dp_boxplot-2", "dp_boxplot-4"],
              "analyses": ["dp_boxplot", "dp_boxplot-4"]}
    for key, epsilon in (("dp_boxplot", "1"), ("dp_boxplot-4", "0")):
        values.update({f"{key}.epsilon": epsilon, f"{key}.bounds.0": "0",
                       f"{key}.bounds.1": "10"})
    keys = forms.chosen_keys(values)
    assert keys == ["dp_boxplot", "dp_boxplot-4"]
    spec = forms.spec_from_form(values)
    with pytest.raises(ValidationError) as raised:
        StudySpec.model_validate(spec)
    problems, marks = forms.form_errors(raised.value.errors(), spec, keys)
    assert list(marks) == ["dp_boxplot-4.epsilon"] and problems[0].startswith("DP boxplots #4")
    assert marks["dp_boxplot-4.epsilon"].startswith("DP boxplots #4 › ε: Input should be")
    assert forms.field_of("body.analyses.1.group", spec, keys) == (
        "dp_boxplot-4.group", "DP boxplots #4 › group")
    # Without the keys (an API error on a spec made elsewhere): the kind's n-th instance.
    assert forms.field_of("body.analyses.1.group", spec) == (
        "dp_boxplot-2.group", "DP boxplots #2 › group")
    assert forms.field_of(("analyses", 1), spec, keys) == ("analysis-dp_boxplot-4",
                                                           "DP boxplots #4")
    # A field the builder cannot read names its instance.
    with pytest.raises(FormError, match=r"DP boxplots #4 › ε: give a number") as bad:
        forms.spec_from_form({**values, "dp_boxplot-4.epsilon": "half"})
    assert bad.value.field == "dp_boxplot-4.epsilon"


def test_the_primary_test_is_the_first_mann_whitney_analysis() -> None:
    values = {**STUDY, "analyses": ["table", "mwu-2", "mwu-3"], "primary": "sum",
              "alpha": "0.01", "mwu-3.alternative": "less"}
    spec = forms.spec_from_form(values)
    assert spec["primary"] == {"analysis": 1, "test": "sum", "alpha": 0.01}
    assert spec["analyses"][2] == {"kind": "mwu", "alternative": "less"}
    StudySpec.model_validate(spec)


def test_catalog_names_carry_the_datasets_declaring_them() -> None:
    def entry(variables: list[str], levels: list[str],
              categorical: dict[str, list[str]]) -> CatalogEntry:
        return CatalogEntry(center="alpha", k=10, variables=variables, group_column="arm",
                            levels=levels, n_records=100, n_by_group={}, epoch=1,
                            paused=False, remaining_epsilon=1.0, categorical=categorical)
    catalog = Catalog(centers=[], datasets=[
        CatalogDataset(name="cohort", variables=["crp", "age"], levels=["ctl", "trt"],
                       categorical=["smoking"], centers=[entry(["crp", "age"], ["ctl", "trt"],
                                                               {"smoking": ["no", "yes"]})]),
        CatalogDataset(name="visits", variables=["sbp", "age"], levels=["ctl", "pre"],
                       categorical=[], centers=[entry(["sbp", "age"], ["ctl", "pre"], {})])])
    names = forms.catalog_names(catalog)
    assert names == {
        "variables": {"crp": ["cohort"], "age": ["cohort", "visits"], "sbp": ["visits"]},
        "levels": {"ctl": ["cohort", "visits"], "trt": ["cohort"], "pre": ["visits"]},
        "categorical": {"smoking": ["cohort"]}, "time_to_event": {},
        "centers": {"alpha": ["cohort", "visits"]}}


def test_categorical_variables_are_picked_from_the_catalogs_categorical_ones() -> None:
    offered = {f.kind: f for f in builder_forms()}
    variable = offered["categorical"].field_named("variable")
    assert variable is not None and variable.widget == "categorical"
    described = offered["describe"].field_named("categorical")
    assert described is not None and described.widget == "categoricals" and described.multiple
    # No field of any registered analysis is left to a box of JSON or of typed text but those
    # whose values are no names (a note).
    for form in builder_forms():
        for f in form.fields:
            assert f.widget not in ("json", "text"), (f.input, f.widget)


def test_bounds_per_variable_are_a_pair_of_boxes_per_catalog_variable() -> None:
    form = {f.kind: f for f in builder_forms()}["describe"].instance(2)
    bounds = form.field_named("bounds")
    assert bounds is not None and bounds.widget == "variable_pairs"
    values = {**STUDY, "analyses": ["describe-2"], "describe-2.variables": ["crp", "age"],
              "describe-2.epsilon": "1", "describe-2.bounds.crp.0": "0",
              "describe-2.bounds.crp.1": "300", "describe-2.bounds.age.0": "",
              "describe-2.bounds.age.1": "", "describe.bounds.crp.0": "5"}
    spec = forms.spec_from_form(values)
    # A variable left blank is left out (the centers' declared bounds hold); another
    # instance's boxes are its own.
    assert spec["analyses"] == [{"kind": "describe", "variables": ["crp", "age"],
                                 "epsilon": 1.0, "bounds": {"crp": [0.0, 300.0]}}]
    StudySpec.model_validate(spec)
    assert "bounds" not in forms.spec_from_form(
        {**values, "describe-2.bounds.crp.0": "", "describe-2.bounds.crp.1": ""})["analyses"][0]
    with pytest.raises(FormError, match=r"#2 › bounds of age: give both") as raised:
        forms.spec_from_form({**values, "describe-2.bounds.age.0": "1"})
    assert raised.value.field == "describe-2.bounds.age.1"
    with pytest.raises(FormError, match=r"bounds of crp \(upper\): give a number"):
        forms.spec_from_form({**values, "describe-2.bounds.crp.1": "lots"})
    # The model's error at one variable's bound leads back to its box.
    bad = {**values, "describe-2.bounds.crp.1": "inf"}
    with pytest.raises(FormError, match="finite"):
        forms.spec_from_form(bad)
    assert forms.field_of(("analyses", 0, "describe", "bounds", "crp", 1), spec,
                          ["describe-2"]) == ("describe-2.bounds.crp.1",
                                              "descriptive statistics (Table 1) #2 › bounds of crp")


def test_the_dry_run_lists_each_analysis_as_the_page_heads_it_with_its_epsilon() -> None:
    dp = {"epsilon": "0.5", "bounds.0": "0", "bounds.1": "10", "levels": "0.5"}
    values = {**STUDY, "analyses": ["table", "dp_quantiles-2", "dp_quantiles-5"],
              **{f"dp_quantiles-2.{k}": v for k, v in dp.items()},
              **{f"dp_quantiles-5.{k}": v for k, v in dp.items()},
              "dp_quantiles-5.epsilon": "0.25"}
    keys = forms.chosen_keys(values)
    spec = StudySpec.model_validate(forms.spec_from_form(values))
    assert forms.asked(spec, keys) == [
        (0, "Federated table", "none"), (1, "DP quantiles (per center) #2", "0.5"),
        (2, "DP quantiles (per center) #5", "0.25")]
    # A study file: each kind's instances counted in the spec's order; a request another
    # analysis already sends counted once (there).
    same = {**values, "dp_quantiles-5.epsilon": "0.5"}
    spec = StudySpec.model_validate(forms.spec_from_form(same))
    assert forms.asked(spec) == [
        (0, "Federated table", "none"), (1, "DP quantiles (per center)", "0.5"),
        (2, "DP quantiles (per center) #2", "none")]


def test_the_primary_test_picker_offers_every_analysis_that_declares_tests() -> None:
    """The picker is generic: each offered analysis whose spec model has a `tests` list of
    named choices offers them (mwu's by their bare names, as before; dp_mwu's as
    ``dp_mwu:test``), and the spec built names that analysis' index and the test."""
    groups = {kind: [value for value, _ in tests] for kind, _, tests in forms.PRIMARY_GROUPS}
    assert groups["mwu"] == ["sum", "weighted", "fisher", "table"]
    assert groups["dp_mwu"] == ["dp_mwu:sum", "dp_mwu:weighted", "dp_mwu:fisher"]
    # Exactly the analyses with a `tests` field are offered.
    with_tests = {f.kind for f in forms.FORMS
                  if "tests" in REGISTRY[f.kind].spec_model.model_fields}
    assert set(groups) == with_tests
    values = {**STUDY, "analyses": ["table", "mwu", "dp_mwu"], "dp_mwu.epsilon": "1",
              "primary": "dp_mwu:weighted", "alpha": "0.01"}
    spec = forms.spec_from_form(values)
    assert spec["analyses"][2]["kind"] == "dp_mwu"
    assert spec["primary"] == {"analysis": 2, "test": "weighted", "alpha": 0.01}
    assert StudySpec.model_validate(spec).primary is not None
    legacy = forms.spec_from_form({**values, "primary": "sum"})
    assert legacy["primary"]["analysis"] == 1 and legacy["primary"]["test"] == "sum"
    # A test the chosen analysis does not run: the spec model refuses it (the same rule as
    # the API), on the primary field.
    narrow = forms.spec_from_form({**values, "dp_mwu.tests": ["sum"]})
    with pytest.raises(ValidationError, match="is not one of analysis 2's tests"):
        StudySpec.model_validate(narrow)
