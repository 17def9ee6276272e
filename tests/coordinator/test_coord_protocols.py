"""Protocols over in-process centers: the same numbers as the ``shared/`` core in-process, and
every implausible answer named."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest
from coordinator_helpers import (
    SIZES,
    CountingCenter,
    K,
    in_process_centers,
    local_dataset,
    make_data,
)
from scipy import stats

from coordinator.core.errors import CenterFailure, TooFewCenters
from coordinator.local import InProcessCenter, LocalDataset
from coordinator.protocols import federated_bin_table, federated_mwu, survey_centers
from coordinator.protocols.parallel import all_or_first_failure
from coordinator.study import StudySpec, run_study
from shared.binning import bin_table
from shared.federation import federated_table, refine_table
from shared.mwu import fisher_test, mann_whitney, sum_test, table_test, weighted_test
from shared.protocol import (
    BinTableRelease,
    RefinementRelease,
    RefinementRequest,
    TableRequest,
)

pytestmark = pytest.mark.anyio
GROUPS = ("ctl", "trt")


def ports(seed: int = 5, data: Any = None) -> list[Any]:
    data = data if data is not None else make_data()
    return list(in_process_centers(data, np.random.default_rng(seed)).values())


async def test_two_group_table_equals_the_core_in_process() -> None:
    data = make_data()
    fed = await federated_bin_table(ports(5, data), dataset="cohort", variable="crp",
                                    groups=GROUPS, k=K)
    # Largest first, and the same rng stream: the very same table as the core's.
    reference = federated_table(list(data.values()), k=K, rng=np.random.default_rng(5))
    assert fed.order == ("alpha", "beta", "gamma")
    np.testing.assert_array_equal(fed.table.limits, reference.limits)
    np.testing.assert_allclose(fed.table.counts, reference.counts, rtol=1e-12)
    np.testing.assert_allclose(fed.table.totals, [sum(SIZES.values())] * 2)
    assert fed.center_totals == {cid: (float(n), float(n)) for cid, n in SIZES.items()}


async def test_one_group_table_is_k_anonymous_per_release_with_consistent_totals() -> None:
    data = make_data(seed=3)
    centers = [CountingCenter(p) for p in ports(11, data)]
    fed = await federated_bin_table(centers, dataset="cohort", variable="crp", k=K)
    assert fed.table.n_groups == 1
    assert fed.table.totals[0] == pytest.approx(2 * sum(SIZES.values()), rel=1e-12)
    pooled = [(np.concatenate([x, y]), None) for x, y in data.values()]
    reference = federated_table(pooled, k=K, rng=np.random.default_rng(11))
    np.testing.assert_array_equal(fed.table.limits, reference.limits)
    assert [c.calls["table"] for c in centers] == [1, 0, 0]
    assert [c.calls["refine"] for c in centers] == [0, 1, 1]


async def test_mwu_p_values_equal_the_core_for_the_same_released_numbers() -> None:
    data = make_data()
    fed = await federated_mwu(ports(5, data), dataset="cohort", variable="crp", groups=GROUPS,
                              k=K, alternative="less")
    local = [mann_whitney(x, y) for x, y in data.values()]
    for name, test in (("sum", sum_test), ("weighted", weighted_test), ("fisher", fisher_test)):
        expected = test(local, alternative="less")
        assert fed.tests[name].pvalue == pytest.approx(expected.pvalue, rel=1e-12, abs=1e-300)
        assert fed.tests[name].statistic == pytest.approx(expected.statistic, rel=1e-12)
        for part, ref in zip(fed.tests[name].parts, expected.parts, strict=True):
            assert part.weight == pytest.approx(ref.weight, rel=1e-12)
    table = table_test(federated_table(list(data.values()), k=K, rng=np.random.default_rng(5)),
                       alternative="less")
    assert fed.tests["table"].pvalue == pytest.approx(table.pvalue, rel=1e-12)
    assert fed.centers == ("alpha", "beta", "gamma")
    assert list(fed.tests) == ["sum", "weighted", "fisher", "table"]


async def test_noisy_local_releases_use_the_inflated_variance() -> None:
    centers = ports(7)
    fed = await federated_mwu(centers, dataset="cohort", variable="crp", groups=GROUPS, k=K,
                              tests=["sum", "fisher"], epsilon=0.5)
    releases = list(fed.releases.values())
    sizes = [max(r.n_x, r.n_y) for r in releases]
    # Laplace of scale 2·max(n, m)/ε: variance 2·scale².
    assert [r.noise_variance for r in releases] == pytest.approx(
        [2 * (2 * n / 0.5) ** 2 for n in sizes])
    expected = sum_test([r.to_result() for r in releases])
    assert fed.tests["sum"].pvalue == pytest.approx(expected.pvalue, rel=1e-12)
    assert fed.tests["sum"].parts[0].variance == pytest.approx(
        releases[0].variance + releases[0].noise_variance)


async def test_one_distinct_value_per_bin_gives_the_pooled_scipy_test() -> None:
    # Integer values 1..6, each held >= K times per group at every center: every bin is one
    # value, nothing is split or shared out, and the table test is the pooled test with ties.
    rng = np.random.default_rng(17)
    data = {}
    for cid, n in (("alpha", 240), ("beta", 180), ("gamma", 120)):
        x = np.repeat(np.arange(1.0, 7.0), n // 6)
        y = np.repeat(np.arange(1.0, 7.0), n // 6 + rng.integers(0, 3, 6))
        y[: n // 12] += 1  # shift part of Y up one level
        data[cid] = (x, y)
    fed = await federated_mwu(ports(1, data), dataset="cohort", variable="crp", groups=GROUPS,
                              k=K, tests=["table"])
    assert fed.table is not None and fed.table.table.n_bins == 6  # one per value
    x = np.concatenate([d[0] for d in data.values()])
    y = np.concatenate([d[1] for d in data.values()])
    ref = stats.mannwhitneyu(x, y, method="asymptotic", use_continuity=False)
    assert fed.tests["table"].pvalue == pytest.approx(ref.pvalue, rel=1e-12)
    assert fed.releases == {}  # no local release was asked for


async def test_survey_names_a_center_without_the_dataset_variable_or_level() -> None:
    good = ports()
    odd = InProcessCenter("delta", {"other": local_dataset(*make_data()["gamma"])},
                          rng=np.random.default_rng(0))
    with pytest.raises(CenterFailure) as caught:
        await survey_centers([*good, odd], dataset="cohort", variable="crp", groups=GROUPS)
    assert (caught.value.center, caught.value.center_error) == ("delta", "unknown_dataset")
    with pytest.raises(CenterFailure) as caught:
        await survey_centers(good, dataset="cohort", variable="age", groups=GROUPS)
    assert caught.value.center_error == "unknown_variable"
    with pytest.raises(CenterFailure, match="level 'placebo'"):
        await survey_centers(good, dataset="cohort", variable="crp", groups=("ctl", "placebo"))
    with pytest.raises(CenterFailure) as caught:
        await survey_centers(good, dataset="cohort", variable="crp", groups=GROUPS, k=5)
    assert (caught.value.center, caught.value.kind) == ("alpha", "refused")
    assert "K >= 10" in caught.value.detail
    partial = await survey_centers([*good, odd], dataset="cohort", variable="crp", groups=GROUPS,
                                   allow_partial=True, min_centers=3)
    assert [f.center for f in partial.excluded] == ["delta"] and len(partial.usable) == 3
    with pytest.raises(TooFewCenters) as too_few:
        await survey_centers([*good, odd], dataset="cohort", variable="crp", groups=GROUPS,
                             allow_partial=True, min_centers=4)
    assert too_few.value.body()["usable"] == ["alpha", "beta", "gamma"]


class Tampered(CountingCenter):
    """A center whose releases are altered by ``change`` before they leave."""

    def __init__(self, port: Any, **change: Any) -> None:
        super().__init__(port)
        self.change = change

    async def table(self, dataset: str, request: Any) -> BinTableRelease:
        release = await super().table(dataset, request)
        if "table" in self.change:
            return BinTableRelease.model_validate(self.change["table"](release.model_dump()))
        return release

    async def refine(self, dataset: str, request: Any) -> RefinementRelease:
        release = await super().refine(dataset, request)
        if "refine" in self.change:
            return RefinementRelease.model_validate(self.change["refine"](release.model_dump()))
        return release

    async def mwu(self, dataset: str, request: Any) -> Any:
        release = await super().mwu(dataset, request)
        if "mwu" in self.change:
            return release.model_copy(update=self.change["mwu"])
        return release


def small_count(release: dict[str, Any]) -> dict[str, Any]:
    release["counts"][0][0] = 3.0
    return release


def inflated(release: dict[str, Any]) -> dict[str, Any]:
    release["counts"][0][-1] += 500.0
    return release


def wrong_k(release: dict[str, Any]) -> dict[str, Any]:
    return {**release, "k": 20}


def small_run(release: dict[str, Any]) -> dict[str, Any]:
    release["runs"][0]["totals"][0] = 4.0
    return release


def misplaced_split(release: dict[str, Any]) -> dict[str, Any]:
    return {**release, "split_bins": [0], "split_limits": [1e9]}


def short_runs(release: dict[str, Any]) -> dict[str, Any]:
    release["runs"][1]["run_of_cell"] = release["runs"][1]["run_of_cell"][:-1]
    return release


@pytest.mark.parametrize(
    ("who", "change", "match"),
    [
        ("alpha", {"table": small_count}, "count between 1 and k-1"),
        ("alpha", {"table": inflated}, "more than its declared size"),
        ("alpha", {"table": wrong_k}, "k=20"),
        ("beta", {"refine": small_run}, "run total"),
        ("beta", {"refine": misplaced_split}, "does not fit the table"),
        ("gamma", {"refine": short_runs}, "does not fit the table"),
        ("gamma", {"refine": wrong_k}, "k=20"),
    ],
)
async def test_implausible_table_releases_are_named(who: str, change: Any, match: str) -> None:
    centers = [Tampered(p, **change) if p.center_id == who else p for p in ports()]
    with pytest.raises(CenterFailure, match=match) as caught:
        await federated_bin_table(centers, dataset="cohort", variable="crp", groups=GROUPS, k=K)
    assert (caught.value.center, caught.value.kind) == (who, "implausible")


@pytest.mark.parametrize(
    ("update", "match"),
    [
        ({"n_x": 5}, "between 1 and k-1"),
        ({"n_y": 10_000}, "exceeds the declared size"),
        ({"variance": 1e12}, "variance"),
        ({"statistic": 1e9}, r"\|U\|"),
    ],
)
async def test_implausible_mwu_releases_are_named(update: dict[str, Any], match: str) -> None:
    centers = [Tampered(p, mwu=update) if p.center_id == "beta" else p for p in ports()]
    with pytest.raises(CenterFailure, match=match) as caught:
        await federated_mwu(centers, dataset="cohort", variable="crp", groups=GROUPS, k=K,
                            tests=["sum"])
    assert (caught.value.center, caught.value.kind) == ("beta", "implausible")


async def test_partial_studies_leave_a_failing_center_out_and_record_it() -> None:
    data = make_data()
    centers = [Tampered(p, refine=small_run, mwu={"n_x": 5}) if p.center_id == "beta" else p
               for p in ports(5, data)]
    fed = await federated_mwu(centers, dataset="cohort", variable="crp", groups=GROUPS, k=K,
                              allow_partial=True, min_centers=2)
    assert fed.centers == ("alpha", "gamma")
    assert {(f.center, f.kind) for f in fed.excluded} == {("beta", "implausible")}
    assert fed.table is not None and fed.table.order == ("alpha", "gamma")
    kept = [data["alpha"], data["gamma"]]
    expected = sum_test([mann_whitney(x, y) for x, y in kept])
    assert fed.tests["sum"].pvalue == pytest.approx(expected.pvalue, rel=1e-12)
    np.testing.assert_allclose(fed.table.table.totals, [SIZES["alpha"] + SIZES["gamma"]] * 2)
    with pytest.raises(TooFewCenters):
        await federated_mwu(centers, dataset="cohort", variable="crp", groups=GROUPS, k=K,
                            allow_partial=True, min_centers=3)


async def test_a_center_too_small_for_k_is_a_refusal() -> None:
    tiny = InProcessCenter(
        "tiny",
        {"cohort": LocalDataset({"crp": np.arange(25.0)},
                                groups=np.array(["ctl"] * 20 + ["trt"] * 5),
                                levels=("ctl", "trt"))},
        rng=np.random.default_rng(0),
    )
    with pytest.raises(CenterFailure) as caught:
        await federated_bin_table([*ports(), tiny], dataset="cohort", variable="crp",
                                  groups=GROUPS, k=K)
    assert (caught.value.center, caught.value.kind) == ("tiny", "refused")


def test_the_in_process_center_releases_what_the_core_releases() -> None:
    # The port adds no arithmetic of its own: same data and seed, same release.
    x, y = make_data()["beta"]
    center = InProcessCenter("beta", {"cohort": local_dataset(x, y)},
                             rng=np.random.default_rng(2))
    got = asyncio.run(center.table("cohort", TableRequest(variable="crp", groups=GROUPS, k=K)))
    ref = bin_table(x, y, k=K, rng=np.random.default_rng(2))
    assert got == BinTableRelease.from_table(ref)
    limits = [0.0, 40.0, 50.0, 60.0, 100.0]
    center.rng = np.random.default_rng(3)
    refined = asyncio.run(center.refine(
        "cohort", RefinementRequest(variable="crp", groups=GROUPS, k=K, limits=limits)))
    assert refined == refine_table(limits, x, y, k=K, rng=np.random.default_rng(3))


# -- analyses at once --------------------------------------------------------------------------


async def test_all_or_first_failure_keeps_order_and_cancels_the_rest() -> None:
    cancelled: list[str] = []

    async def value(v: int, delay: float) -> int:
        await asyncio.sleep(delay)
        return v

    async def fails(message: str, delay: float) -> int:
        await asyncio.sleep(delay)
        raise ValueError(message)

    async def hangs(name: str) -> int:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(name)
            raise
        return 0

    assert await all_or_first_failure([value(1, 0.02), value(2, 0.0), value(3, 0.01)]) == [1, 2, 3]
    with pytest.raises(ValueError, match="first"):
        # The later-listed failure happens first; the first listed one is still the one raised
        # when both have failed by then, and the run that would never end is cancelled.
        await all_or_first_failure([fails("first", 0.0), fails("second", 0.0), hangs("h")])
    assert cancelled == ["h"]


class SlowRefine(CountingCenter):
    """Refinements wait until the test lets them go."""

    def __init__(self, port: Any, gate: asyncio.Event) -> None:
        super().__init__(port)
        self.refine_gate = gate

    async def refine(self, dataset: str, request: Any) -> Any:
        await self.refine_gate.wait()
        return await super().refine(dataset, request)


async def test_a_study_runs_its_analyses_at_once_and_builds_one_table() -> None:
    gate = asyncio.Event()
    centers = [SlowRefine(p, gate) for p in ports(5)]
    spec = StudySpec.model_validate({
        "dataset": "cohort", "variable": "crp", "groups": list(GROUPS), "k": K,
        "analyses": [{"kind": "table"}, {"kind": "mwu"},
                     {"kind": "quantiles", "levels": [0.5]}],
    })
    study = asyncio.ensure_future(run_study(spec, centers, min_centers=2))
    while not all(c.calls["mwu"] for c in centers):  # the MWU does not wait for the table
        await asyncio.sleep(0.001)
    assert not study.done()
    gate.set()
    result = await study
    assert [a.kind for a in result.analyses] == ["table", "mwu", "quantiles"]
    assert sum(c.calls["table"] for c in centers) == 1  # one table for all three analyses
    assert all(c.calls["refine"] <= 1 for c in centers)
