"""Study specs built without servers: :meth:`Study.add` adds any analysis the coordinator's
models know by its kind, gives the spec that kind's builder method gives, checks its keys at
once against the kind's spec model, and chains with the builders."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, get_args

import pytest

from coordinator.analyses import REGISTRY
from coordinator.models import AnalysisKind
from fedstats_client import SpecError, Study

BOUNDS = (0.0, 100.0)
BASE = Study("cohort", "crp", groups=["ctl", "trt"])

# Each kind with its fewest valid keys, and the builder call that asks the same.
MINIMAL: dict[str, tuple[dict[str, Any], Callable[[Study], Study]]] = {
    "table": ({}, lambda s: s.table()),
    "mwu": ({}, lambda s: s.mwu()),
    "dp_mwu": ({"epsilon": 1.0}, lambda s: s.dp_mwu(epsilon=1.0)),
    "shift": ({}, lambda s: s.shift()),
    "dp_boxplot": ({"epsilon": 1.0, "bounds": [0.0, 100.0]},
                   lambda s: s.dp_boxplot(epsilon=1.0, bounds=BOUNDS)),
    "quantiles": ({"levels": [0.5]}, lambda s: s.quantiles([0.5])),
    "dp_quantiles": ({"levels": [0.5], "epsilon": 1.0, "bounds": [0.0, 100.0]},
                     lambda s: s.dp_quantiles([0.5], epsilon=1.0, bounds=BOUNDS)),
    "describe": ({}, lambda s: s.describe()),
    "categorical": ({"variable": "smoking"}, lambda s: s.categorical("smoking")),
    "kruskal": ({}, lambda s: s.kruskal()),
    "survival": ({"variable": "readmission", "epsilon": 1.0, "horizon": 90.0},
                 lambda s: s.survival("readmission", epsilon=1.0, horizon=90.0)),
}


def test_every_kind_the_coordinator_knows_has_its_minimal_case() -> None:
    assert set(MINIMAL) == set(REGISTRY) == set(get_args(AnalysisKind))


@pytest.mark.parametrize("kind", sorted(MINIMAL))
def test_add_with_minimal_keys_is_the_spec_its_builder_gives(kind: str) -> None:
    fields, builder = MINIMAL[kind]
    added, built = BASE.add(kind, **fields), builder(BASE)
    assert added.to_dict() == built.to_dict()
    assert added.to_dict()["analyses"] == [{"kind": kind, **fields}]
    assert added.spec() == built.spec()


def test_add_with_options_is_the_spec_its_builder_gives() -> None:
    assert BASE.add("mwu", tests=["sum", "fisher"], alternative="less").to_dict() == \
        BASE.mwu(tests=("sum", "fisher"), alternative="less").to_dict()
    assert BASE.add("describe", variables=["crp", "age"], epsilon=0.5,
                    bounds={"crp": [0.0, 100.0]}, categorical=["smoking"]).spec() == \
        BASE.describe(["crp", "age"], epsilon=0.5, bounds={"crp": BOUNDS},
                      categorical=["smoking"]).spec()
    # None means "the coordinator's default", as in the builders: the key is left out.
    assert BASE.add("kruskal", ordered=True, alternative=None).to_dict()["analyses"] == [
        {"kind": "kruskal", "ordered": True}]


def test_an_unknown_kind_fails_at_once_listing_the_known_kinds() -> None:
    with pytest.raises(SpecError, match="no analysis kind 'krusal'") as raised:
        BASE.add("krusal", ordered=True)
    assert all(kind in str(raised.value) for kind in REGISTRY)
    with pytest.raises(SpecError, match="kind: give one analysis kind"):
        BASE.add("")
    with pytest.raises(SpecError, match="kind: give one analysis kind"):
        BASE.add(None)  # type: ignore[arg-type]
    with pytest.raises(SpecError, match="give it once"):
        BASE.add("mwu", kind="table")


def test_an_unknown_or_invalid_key_fails_at_once_naming_it() -> None:
    with pytest.raises(SpecError, match=r"mwu\.test: Extra inputs are not permitted "
                                        r"\(mwu's keys: tests, alternative, epsilon\)"):
        BASE.add("mwu", test=["sum"])
    with pytest.raises(SpecError, match=r"dp_boxplot\.epsilon: Input should be greater"):
        BASE.add("dp_boxplot", epsilon=-1.0, bounds=[0.0, 100.0])
    with pytest.raises(SpecError, match=r"dp_quantiles\.epsilon: Field required; "
                                        r"dp_quantiles\.bounds: Field required"):
        BASE.add("dp_quantiles", levels=[0.5])
    with pytest.raises(SpecError, match=r"quantiles\.levels"):
        BASE.add("quantiles", levels=[0.9, 0.1])
    with pytest.raises(SpecError, match=r"describe: .*needs `epsilon`"):
        BASE.add("describe", mode="dp")
    # What needs the whole study (its groups) is checked when the spec is built.
    ungrouped = Study("cohort", "crp").add("mwu")
    with pytest.raises(SpecError, match="needs `groups`"):
        ungrouped.spec()


def test_add_chains_with_the_builders_and_returns_a_new_study() -> None:
    chained = (BASE.table(lower=0.0)
               .add("mwu", tests=["sum"])
               .dp_boxplot(epsilon=0.5, bounds=BOUNDS, group="trt")
               .add("shift", level=0.9))
    assert isinstance(chained, Study)
    assert BASE.to_dict()["analyses"] == [], "add returns a new study"
    assert chained.to_dict() == (BASE.table(lower=0.0).mwu(tests=["sum"])
                                 .dp_boxplot(epsilon=0.5, bounds=BOUNDS, group="trt")
                                 .shift(level=0.9)).to_dict()
    assert [a.kind for a in chained.spec().analyses] == ["table", "mwu", "dp_boxplot", "shift"]
