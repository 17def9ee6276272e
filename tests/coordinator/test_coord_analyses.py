"""The analyses' registry (``coordinator.analyses``): one registered analysis per kind of the
spec, the spec's ``groups`` a list of two or more levels that each analysis bounds (its spec
model's ``min_groups`` and ``max_groups``), and the console's builder read off the registry."""

from __future__ import annotations

from pathlib import Path
from typing import Any, get_args

import httpx
import pytest
from pydantic import ValidationError

from coordinator.analyses import REGISTRY, analysis_of
from coordinator.main import create_app
from coordinator.models import Analysis, AnalysisKind, StudySpec
from coordinator.ui.forms import ANALYSES, FormError, spec_from_form
from tests.helpers.coordinator import AUTH, Federations, K, settings_for, sqlite_url

BASE: dict[str, Any] = {"dataset": "cohort", "variable": "crp", "k": K}
THREE = ["ctl", "trt", "plc"]
# The spec models of the ``Analysis`` union, by kind.
SPEC_MODELS: dict[str, Any] = {get_args(m.model_fields["kind"].annotation)[0]: m
                               for m in get_args(get_args(Analysis)[0])}
# A valid part of each kind, its other fields left to their defaults.
PARTS: dict[str, dict[str, Any]] = {
    "table": {"kind": "table"}, "mwu": {"kind": "mwu"},
    "quantiles": {"kind": "quantiles", "levels": [0.5]},
    "dp_boxplot": {"kind": "dp_boxplot", "epsilon": 1.0, "bounds": [0, 10]},
    "dp_quantiles": {"kind": "dp_quantiles", "epsilon": 1.0, "bounds": [0, 10],
                     "levels": [0.5]},
    "describe": {"kind": "describe"}, "shift": {"kind": "shift"},
    "categorical": {"kind": "categorical", "variable": "smoking"},
    "kruskal": {"kind": "kruskal"}, "dp_mwu": {"kind": "dp_mwu", "epsilon": 1.0},
    "survival": {"kind": "survival", "variable": "readmission", "epsilon": 1.0, "horizon": 90},
}
# The refusal of a spec without the levels an analysis compares, as the API words it.
NEEDS_GROUPS = {
    "mwu": "an mwu analysis needs `groups` (the two levels X and Y)",
    "dp_mwu": "a dp_mwu analysis needs `groups` (the two levels X and Y)",
    "shift": "a shift analysis needs `groups` (the two levels X and Y)",
    "kruskal": "a kruskal analysis needs `groups` (the arms compared, 2 to 32 levels)",
    "survival": "a survival analysis needs `groups` (the two levels X and Y)",
}


def test_every_kind_of_the_spec_has_one_registered_analysis() -> None:
    assert set(REGISTRY) == set(get_args(AnalysisKind))
    for kind, analysis in REGISTRY.items():
        assert analysis.kind == kind
        assert get_args(analysis.spec_model.model_fields["kind"].annotation) == (kind,)
    spec = StudySpec.model_validate({**BASE, "groups": ["ctl", "trt"], "analyses": [
        {"kind": "mwu"}, {"kind": "quantiles", "levels": [0.5]}]})
    assert [analysis_of(a) for a in spec.analyses] == [REGISTRY["mwu"], REGISTRY["quantiles"]]


def test_groups_stay_two_by_default_and_take_a_list() -> None:
    spec = StudySpec.model_validate({**BASE, "groups": ["ctl", "trt"],
                                     "analyses": [{"kind": "table"}]})
    assert spec.groups == ("ctl", "trt") and spec.pair == ("ctl", "trt")
    assert StudySpec.model_validate({**BASE, "analyses": [{"kind": "table"}]}).pair is None


@pytest.mark.parametrize(("groups", "message"), [
    (["ctl"], "at least 2"),
    (["ctl", "ctl"], "the two group levels must differ"),
    (["ctl", "trt", "ctl"], "the group levels must differ"),
    (["ctl", "trt", ""], "1 to 128 characters"),
    ([f"g{i}" for i in range(33)], "at most 32"),
])
def test_bad_group_lists_are_refused(groups: list[str], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        StudySpec.model_validate({**BASE, "groups": groups, "analyses": [{"kind": "table"}]})


def test_every_analysis_declares_how_few_and_how_many_levels_it_compares() -> None:
    assert set(SPEC_MODELS) == set(REGISTRY) == set(PARTS)
    for kind, model in SPEC_MODELS.items():
        assert REGISTRY[kind].spec_model is model
        assert isinstance(model.min_groups, int) and model.min_groups >= 0, kind
        assert model.max_groups is None or model.min_groups <= model.max_groups, kind
    assert sorted(k for k, m in SPEC_MODELS.items() if m.min_groups) == sorted(NEEDS_GROUPS)


@pytest.mark.parametrize("kind", sorted(SPEC_MODELS))
def test_a_spec_of_fewer_levels_than_an_analysis_compares_is_refused_naming_it(
        kind: str) -> None:
    least = SPEC_MODELS[kind].min_groups
    # Fewer than two levels is no `groups` at all (a list names at least two).
    assert least <= 2
    no_groups = {**BASE, "analyses": [PARTS[kind]]}
    if least == 0:
        assert StudySpec.model_validate(no_groups).groups is None
        return
    with pytest.raises(ValidationError) as refused:
        StudySpec.model_validate(no_groups)
    assert [e["msg"] for e in refused.value.errors()] == [f"Value error, {NEEDS_GROUPS[kind]}"]
    assert StudySpec.model_validate({**no_groups, "groups": THREE[:least]}).groups == \
        tuple(THREE[:least])


def test_of_several_analyses_lacking_levels_the_first_in_the_spec_is_named() -> None:
    cases = [(["kruskal", "shift", "dp_mwu", "mwu"], "kruskal"),
             (["dp_mwu", "kruskal", "shift"], "dp_mwu"),
             (["table", "shift", "kruskal"], "shift"), (["describe", "kruskal"], "kruskal")]
    for kinds, named in cases:
        with pytest.raises(ValidationError) as refused:
            StudySpec.model_validate({**BASE, "analyses": [PARTS[k] for k in kinds]})
        assert [e["msg"] for e in refused.value.errors()] == [
            f"Value error, {NEEDS_GROUPS[named]}"], kinds


@pytest.mark.parametrize("kind", sorted(k for k, m in SPEC_MODELS.items() if m.max_groups == 2))
def test_an_analysis_of_two_groups_refuses_three_naming_itself(kind: str) -> None:
    part = PARTS[kind]
    with pytest.raises(ValidationError, match=rf"analysis 0 \({kind}\) compares at most 2 "
                                               r"group levels; the spec's `groups` names 3"):
        StudySpec.model_validate({**BASE, "groups": THREE, "analyses": [part]})


def test_the_analyses_of_more_than_two_arms_take_up_to_32() -> None:
    many = [k for k, m in SPEC_MODELS.items() if m.max_groups != 2]
    assert many == ["kruskal"]
    for kind in many:
        assert SPEC_MODELS[kind].max_groups == 32
        levels = [f"g{i}" for i in range(32)]
        spec = StudySpec.model_validate({**BASE, "groups": levels,
                                         "analyses": [{"kind": kind}]})
        assert spec.groups == tuple(levels)
        # Beside it, an analysis of two groups still refuses the spec, naming itself.
        with pytest.raises(ValidationError, match=r"analysis 1 \(mwu\) compares at most 2"):
            StudySpec.model_validate({**BASE, "groups": THREE,
                                      "analyses": [{"kind": kind}, {"kind": "mwu"}]})


@pytest.mark.anyio
async def test_the_api_refuses_three_groups_with_a_422(tmp_path: Path,
                                                       federation: Federations) -> None:
    app = create_app(settings_for(sqlite_url(tmp_path)), centers=federation())
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://coordinator") as client:
        try:
            answer = await client.post("/v1/studies", headers=AUTH, json={
                **BASE, "groups": THREE, "analyses": [{"kind": "describe"}]})
        finally:
            await app.state.services.aclose()
    assert answer.status_code == 422
    body = answer.json()
    assert body["error"] == "validation_error"
    assert "analysis 0 (describe) compares at most 2 group levels" in body["detail"]


def test_the_builder_offers_every_registered_analysis_with_its_own_fields() -> None:
    assert ANALYSES == tuple(REGISTRY)
    values = {"dataset": "cohort", "variable": "crp", "group_x": "ctl", "group_y": "trt",
              "k": "10", "analyses": list(ANALYSES), "mwu.epsilon": "0.5",
              "quantiles.levels": "0.25; 0.75", "dp_boxplot.epsilon": "1",
              "dp_boxplot.bounds.0": "0", "dp_boxplot.bounds.1": "300",
              "dp_quantiles.epsilon": "2", "dp_quantiles.bounds.0": "-1",
              "dp_quantiles.bounds.1": "30", "dp_quantiles.levels": "0.5",
              "dp_quantiles.group": "trt", "describe.variables": ["crp", "age"],
              "categorical.variable": "smoking", "dp_mwu.epsilon": "1",
              "dp_mwu.size_share": "0.3", "survival.variable": "readmission",
              "survival.epsilon": "0.5", "survival.horizon": "90"}
    spec = StudySpec.model_validate(spec_from_form(values))
    assert [a.kind for a in spec.analyses] == list(ANALYSES)
    assert spec.analyses[1].epsilon == 0.5  # type: ignore[union-attr]
    # Each DP analysis its own ε, bounds and group.
    assert (spec.analyses[3].epsilon, spec.analyses[3].bounds,  # type: ignore[union-attr]
            spec.analyses[3].group) == (1.0, (0.0, 300.0), None)  # type: ignore[union-attr]
    assert (spec.analyses[4].epsilon, spec.analyses[4].bounds,  # type: ignore[union-attr]
            spec.analyses[4].group) == (2.0, (-1.0, 30.0), "trt")  # type: ignore[union-attr]
    assert spec.analyses[5].variables == ["crp", "age"]  # type: ignore[union-attr]
    dp_mwu = spec.analyses[ANALYSES.index("dp_mwu")]
    assert (dp_mwu.epsilon, dp_mwu.size_share) == (1.0, 0.3)  # type: ignore[union-attr]
    with pytest.raises(FormError, match="DP boxplots › bounds \\(upper\\)"):
        spec_from_form({**values, "dp_boxplot.bounds.1": "high"})
    # An analysis' fields are read only when it is chosen.
    assert spec_from_form({**values, "dp_boxplot.bounds.1": "high", "analyses": ["table"]})[
        "analyses"] == [{"kind": "table"}]
