"""The study builder's form of each analysis, generated from its spec model's JSON schema
(``Analysis.spec_model.model_json_schema()``, the model the API validates the spec with), and
the spec part read back from the posted fields.

How a property of the schema becomes a field:

* a number or integer: a number box; optional (it has a default or may be null): blank is the
  default;
* an enum (a ``Literal``): a select, with a blank "default" option when optional;
* a boolean: a checkbox (after a blank hidden field: unticked is false; not posted at all,
  the default);
* a list of enum values: one checkbox per value (none ticked: the default);
* a list of numbers: one box of numbers separated by commas (or semicolons);
* a pair of numbers (``prefixItems`` of two: bounds): a lower and an upper box, both or none;
* an enum or a number (``lower = "buffer"``): a box with the names offered;
* an object of lists of numbers (bounds per variable): ``name: lower, upper; name: ...``, or,
  hinted ``variable_pairs`` by ``form_widgets``, a lower and an upper box per catalog variable
  (``<field>.<variable>.0`` and ``.1``; a variable left blank is left out);
* a name the catalog knows (by the analysis' :attr:`~coordinator.analyses.base.Analysis.
  form_widgets`, else by the field's name: ``group`` a declared level, ``variable`` and
  ``variables`` declared variables; ``categorical`` and ``categoricals`` by ``form_widgets``
  only, declared categorical variables; ``time_to_event`` likewise, declared time-to-event
  variables): a select or checkboxes of the catalog's names, each
  marked with the datasets declaring it (the page offers only the chosen dataset's);
* any other string: a text box; anything else: a box of JSON.

A study may hold several analyses of one kind: each is an *instance* of the kind's form, keyed
``<kind>`` (the first) or ``<kind>-<n>`` (``n`` from 2; :func:`instance_key`). Every field's
HTML name is ``<key>.<field>`` (``.0`` and ``.1`` for a pair's ends), so a validation error's
location (``analyses.<i>.<kind>.<field>``) leads back, through the keys of the analyses chosen,
to the field."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from coordinator.analyses import REGISTRY, Analysis, FormError

Widget = Literal["number", "integer", "select", "checkbox", "checks", "numbers", "pair",
                 "choice_or_number", "mapping", "variable_pairs", "variable", "variables", "level",
                 "categorical", "categoricals", "time_to_event", "text", "json"]
# The catalog's names by the field's name, unless the analysis says otherwise (form_widgets).
CATALOG_NAMES: dict[str, Widget] = {"group": "level", "variable": "variable",
                                    "variables": "variables"}
LABELS = {"epsilon": "ε", "k": "K", "per_center": "per center"}
NULL = {"type": "null"}
# The most instances of one kind (a spec holds at most 16 analyses: ``StudySpec.analyses``).
MAX_INSTANCES = 16
_KEY = re.compile(r"^([a-z][a-z0-9_]*?)(?:-([2-9]|1[0-6]))?$")


def instance_key(kind: str, number: int) -> str:
    """The key of the ``number``-th instance of ``kind`` (from 1): its fields' HTML prefix."""
    return kind if number == 1 else f"{kind}-{number}"


def parse_key(key: str) -> tuple[str, int] | None:
    """(kind, number) of an instance key; none for anything else (no registered kind, no key
    of :func:`instance_key`'s form)."""
    found = _KEY.match(key)
    if found is None or found.group(1) not in REGISTRY:
        return None
    return found.group(1), int(found.group(2) or 1)


@dataclass(frozen=True)
class FormField:
    """One property of an analysis' spec model as a field of the builder."""

    kind: str
    name: str
    label: str
    widget: Widget
    analysis_label: str
    required: bool
    default: Any = None
    options: tuple[str, ...] = ()
    hint: str = ""
    minimum: float | None = None
    maximum: float | None = None
    key: str = ""  # the instance's key (none: the kind's first)

    @property
    def input(self) -> str:
        """The field's HTML name (a pair's ends add ``.0`` and ``.1``)."""
        return f"{self.key or self.kind}.{self.name}"

    @property
    def id(self) -> str:
        return f"f-{self.key or self.kind}-{self.name}"

    @property
    def multiple(self) -> bool:
        return self.widget in ("checks", "variables", "categoricals")

    @property
    def placeholder(self) -> str:
        if self.required:
            return ""
        if self.default is None:
            return "blank: none"
        shown = ", ".join(map(str, self.default)) if isinstance(self.default, list) \
            else str(self.default)
        return f"blank: {shown}"

    def initial(self) -> Any:
        """What the field shows before anything is posted: the schema's default."""
        if self.widget == "checkbox":
            return "true" if self.default else ""
        if self.multiple:
            return [str(v) for v in self.default or []]
        return ""


@dataclass(frozen=True)
class AnalysisForm:
    """The builder's part for one registered analysis: its label, what it is, its fields."""

    analysis: Analysis[Any, Any] = field(compare=False, repr=False)
    label: str
    hint: str
    fields: tuple[FormField, ...] = ()
    number: int = 1  # which instance of the kind (from 1)

    @property
    def kind(self) -> str:
        return self.analysis.kind

    @property
    def key(self) -> str:
        """The instance's key: its fields' HTML prefix (:func:`instance_key`)."""
        return instance_key(self.kind, self.number)

    @property
    def named(self) -> str:
        """How errors name the instance: the kind's label, numbered from the second."""
        return self.label if self.number == 1 else f"{self.label} #{self.number}"

    @property
    def title(self) -> str:
        """The instance's label as the page heads it."""
        return self.named[:1].upper() + self.named[1:]

    def instance(self, number: int) -> AnalysisForm:
        """The form of the ``number``-th instance of the kind: the same fields under its key,
        its errors named by its numbered label."""
        made = replace(self, number=number)
        return replace(made, fields=tuple(replace(f, key=made.key, analysis_label=made.named)
                                          for f in self.fields))

    def field_named(self, name: str) -> FormField | None:
        return next((f for f in self.fields if f.name == name), None)


def _resolve(schema: Mapping[str, Any], node: Mapping[str, Any]) -> Mapping[str, Any]:
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        return _resolve(schema, schema["$defs"][ref.removeprefix("#/$defs/")])
    if "allOf" in node and len(node["allOf"]) == 1:
        return _resolve(schema, {**node["allOf"][0], **{k: v for k, v in node.items()
                                                         if k != "allOf"}})
    return node


def _first_sentence(text: str | None) -> str:
    """A docstring's first sentence, without reST markup."""
    text = " ".join((text or "").split()).replace("``", "")
    found = re.match(r"(.+?)(?:[.;:](?:\s|$)|\s\()", text)
    return (found.group(1) if found else text).strip()


def label_of(analysis: Analysis[Any, Any]) -> str:
    """The builder's label: the analysis' own, else its model's docstring's first sentence,
    else its kind."""
    if analysis.form_label:
        return analysis.form_label
    sentence = _first_sentence(analysis.spec_model.__doc__)
    if sentence:
        return sentence[0].lower() + sentence[1:] if sentence[:2] != sentence[:2].upper() \
            else sentence
    return analysis.kind.replace("_", " ")


def _widget(analysis: Analysis[Any, Any], name: str, node: Mapping[str, Any]) -> tuple[
        Widget, tuple[str, ...]]:
    """The widget of one property (its optional ``null`` removed) and its options."""
    hinted = analysis.form_widgets.get(name) or CATALOG_NAMES.get(name)
    kind = node.get("type")
    items = node.get("items") or {}
    if hinted == "level" and kind == "string":
        return "level", ()
    if hinted == "variable" and kind == "string":
        return "variable", ()
    if hinted == "variables" and kind == "array" and items.get("type") == "string":
        return "variables", ()
    if hinted == "categorical" and kind == "string":
        return "categorical", ()
    if hinted == "categoricals" and kind == "array" and items.get("type") == "string":
        return "categoricals", ()
    if hinted == "time_to_event" and kind == "string":
        return "time_to_event", ()
    if "enum" in node:
        return "select", tuple(map(str, node["enum"]))
    if kind == "boolean":
        return "checkbox", ()
    if kind == "integer":
        return "integer", ()
    if kind == "number":
        return "number", ()
    if kind == "array":
        prefix = node.get("prefixItems") or []
        if len(prefix) == 2 and all(p.get("type") in ("number", "integer") for p in prefix):
            return "pair", ()
        if "enum" in items:
            return "checks", tuple(map(str, items["enum"]))
        if items.get("type") in ("number", "integer"):
            return "numbers", ()
    if kind == "string":
        return "text", ()
    if kind == "object":
        values = list((node.get("patternProperties") or {}).values())
        extra = node.get("additionalProperties")
        value = values[0] if len(values) == 1 else extra if isinstance(extra, dict) else None
        if value is not None and value.get("type") == "array":
            prefix = value.get("prefixItems") or []
            if hinted == "variable_pairs" and len(prefix) == 2 and all(
                    p.get("type") in ("number", "integer") for p in prefix):
                return "variable_pairs", ()
            return "mapping", ()
    choices = node.get("anyOf") or []
    enums = [c for c in choices if "enum" in c]
    if len(choices) == 2 and len(enums) == 1 and any(
            c.get("type") in ("number", "integer") for c in choices):
        return "choice_or_number", tuple(map(str, enums[0]["enum"]))
    return "json", ()


def form_of(analysis: Analysis[Any, Any]) -> AnalysisForm:
    """The builder's part for ``analysis``, from its spec model's JSON schema."""
    schema = analysis.spec_model.model_json_schema()
    required = set(schema.get("required") or ())
    label = label_of(analysis)
    fields = []
    for name, raw in (schema.get("properties") or {}).items():
        node = _resolve(schema, raw)
        if "const" in node:  # the kind: fixed by the analysis chosen
            continue
        choices = [_resolve(schema, c) for c in node.get("anyOf") or []]
        nullable = NULL in choices
        if nullable:
            rest = [c for c in choices if c != NULL]
            node = {**node, **rest[0]} if len(rest) == 1 else {**node, "anyOf": rest}
            if len(rest) == 1:
                node.pop("anyOf", None)
        widget, options = _widget(analysis, name, node)
        # The model's default, a default_factory's too (the schema leaves those out).
        declared = analysis.spec_model.model_fields.get(name)
        default = declared.get_default(call_default_factory=True) \
            if declared is not None and not declared.is_required() else node.get("default")
        fields.append(FormField(
            kind=analysis.kind, name=name, label=LABELS.get(name, name.replace("_", " ")),
            widget=widget, analysis_label=label, required=name in required, default=default,
            options=options, hint=" ".join(str(node.get("description") or "").split()),
            minimum=node.get("minimum", node.get("exclusiveMinimum")),
            maximum=node.get("maximum", node.get("exclusiveMaximum"))))
    return AnalysisForm(analysis=analysis, label=label,
                        hint=" ".join((analysis.spec_model.__doc__ or "").split())
                        .replace("``", ""), fields=tuple(fields))


def builder_forms() -> tuple[AnalysisForm, ...]:
    """Every registered analysis the builder offers (all but those opting out), in the
    registry's order."""
    return tuple(form_of(a) for a in REGISTRY.values() if a.form_offered)


# -- the posted fields as a spec part ----------------------------------------------------------


def as_list(value: Any) -> list[str]:
    if value is None or value == "":
        return []
    return [str(v) for v in value] if isinstance(value, list | tuple) else [str(value)]


def text_of(values: Mapping[str, Any], name: str) -> str:
    value = values.get(name)
    if isinstance(value, list | tuple):
        value = value[-1] if value else ""
    return str(value or "").strip()


def _number(text: str, f: FormField, what: str = "") -> float | int:
    where = f"{form_label(f)}{what}"
    try:
        number = int(text) if f.widget == "integer" else float(text)
    except ValueError:
        whole = "a whole number" if f.widget == "integer" else "a number"
        raise FormError(f"{where}: give {whole} (got {text!r})", field=f.input) from None
    if not math.isfinite(number):
        raise FormError(f"{where}: give a finite number (got {text!r})", field=f.input)
    return number


def _numbers(text: str, f: FormField) -> list[float]:
    try:
        numbers = [float(x) for x in text.replace(";", ",").split(",") if x.strip()]
    except ValueError:
        raise FormError(f"{form_label(f)}: give numbers separated by commas (got {text!r})",
                        field=f.input) from None
    if not all(math.isfinite(x) for x in numbers):
        raise FormError(f"{form_label(f)}: give finite numbers (got {text!r})", field=f.input)
    return numbers


def form_label(f: FormField) -> str:
    """How an error names the field: the analysis' label, then the field's."""
    return f"{f.analysis_label} › {f.label}"


def _mapping(text: str, f: FormField) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for part in text.split(";"):
        if not part.strip():
            continue
        key, colon, rest = part.partition(":")
        if not colon or not key.strip():
            raise FormError(f"{form_label(f)}: write name: lower, upper; name: lower, upper "
                            f"(got {part.strip()!r})", field=f.input)
        out[key.strip()] = _numbers(rest, f)
    return out


def _pair(f: FormField, values: Mapping[str, Any], name: str, what: str = "") -> Any:
    """The pair of boxes ``name.0`` and ``name.1``: both numbers, or :data:`OMIT` when both
    are blank."""
    ends = [text_of(values, f"{name}.{i}") for i in (0, 1)]
    if not any(ends):
        return OMIT
    if not all(ends):
        raise FormError(f"{form_label(f)}{what}: give both the lower and the upper bound",
                        field=f"{name}.{0 if not ends[0] else 1}")
    return [_number(ends[0], f, f"{what} (lower)"), _number(ends[1], f, f"{what} (upper)")]


def _variable_pairs(f: FormField, values: Mapping[str, Any]) -> Any:
    """A pair per variable whose boxes were posted (``<field>.<variable>.0`` and ``.1``), in
    the page's order; :data:`OMIT` when every pair is blank."""
    prefix = f"{f.input}."
    named = dict.fromkeys(key[len(prefix):-2] for key in values
                          if key.startswith(prefix) and key[-2:] in (".0", ".1"))
    out = {}
    for name in named:
        pair = _pair(f, values, f"{prefix}{name}", f" of {name}")
        if pair is not OMIT:
            out[name] = pair
    return out or OMIT


def field_value(f: FormField, values: Mapping[str, Any]) -> Any:
    """The field's value for the spec; :data:`OMIT` when blank (the model's default)."""
    text = text_of(values, f.input)
    if f.widget == "checkbox":
        # The page posts a blank hidden field before each box, so an unticked box is false
        # and a field not posted at all (a form made elsewhere) the model's default.
        if f.input not in values:
            return OMIT
        return any(v.strip() not in ("", "false", "off", "0")
                   for v in as_list(values.get(f.input)))
    if f.multiple:
        chosen = [v for v in as_list(values.get(f.input)) if v.strip()]
        return chosen or OMIT
    if f.widget == "pair":
        return _pair(f, values, f.input)
    if f.widget == "variable_pairs":
        return _variable_pairs(f, values)
    if not text:
        return OMIT
    if f.widget in ("number", "integer"):
        return _number(text, f)
    if f.widget == "numbers":
        return _numbers(text, f)
    if f.widget == "choice_or_number":
        return text if text in f.options else _number(text, f)
    if f.widget == "mapping":
        return _mapping(text, f)
    if f.widget == "json":
        try:
            return json.loads(text)
        except ValueError:
            return text
    return text


class _Omit:
    def __repr__(self) -> str:
        return "OMIT"


OMIT: Any = _Omit()


def part_from_form(form: AnalysisForm, values: Mapping[str, Any]) -> dict[str, Any]:
    """The spec part of one analysis from the posted fields (blank optional fields left out:
    the model's defaults), then the analysis' own :meth:`~coordinator.analyses.base.Analysis.
    from_form` for what its schema cannot say."""
    part: dict[str, Any] = {"kind": form.kind}
    for f in form.fields:
        value = field_value(f, values)
        if value is not OMIT:
            part[f.name] = value
    return form.analysis.from_form(part, values)


def instance_forms(keys: Iterable[str], forms: Sequence[AnalysisForm] | None = None) -> list[
        AnalysisForm]:
    """The form of each instance key (each once, in the order given; a key of no offered kind
    left out)."""
    by_kind = {f.kind: f for f in (builder_forms() if forms is None else forms)}
    out: dict[str, AnalysisForm] = {}
    for key in keys:
        parsed = parse_key(key)
        if parsed is not None and parsed[0] in by_kind and key not in out:
            out[key] = by_kind[parsed[0]].instance(parsed[1])
    return list(out.values())


def posted_values(items: Sequence[tuple[str, Any]],
                  forms: Sequence[AnalysisForm] | None = None) -> dict[str, Any]:
    """The posted text fields as the builder reads them: a field of several values (a group
    of checkboxes, a box and its blank hidden field) as a list, and every group of
    checkboxes present (none ticked: empty) for each instance on the page (``instances``,
    else the kinds' first) or chosen (``analyses``), so a page shown again keeps what was
    posted rather than the defaults."""
    values: dict[str, Any] = {}
    for key, value in items:
        if not isinstance(value, str):
            continue
        if key in values:
            values[key] = [*as_list(values[key]), value]
        else:
            values[key] = value
    # The analyses ticked and on the page as lists even when one is posted (a test of one
    # would be a test of a substring: "quantiles" in "dp_quantiles").
    for name in ("analyses", "instances"):
        if name in values:
            values[name] = as_list(values[name])
    offered = builder_forms() if forms is None else forms
    listed = as_list(values["instances"]) if "instances" in values else [f.kind for f in offered]
    keys = [*listed, *as_list(values.get("analyses"))]
    for form in instance_forms(keys, offered):
        for f in form.fields:
            if f.multiple:
                values[f.input] = as_list(values.get(f.input))
    return values


def initial_values(forms: Sequence[AnalysisForm] | None = None) -> dict[str, Any]:
    """Every generated field's value before anything is posted (of ``forms``: by default the
    first instance of every offered kind)."""
    return {f.input: f.initial() for form in (builder_forms() if forms is None else forms)
            for f in form.fields}
