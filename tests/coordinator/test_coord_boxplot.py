"""DP boxplots over in-process centers: the same boxes as ``shared/`` in-process for the same
generator stream, the ε each center spent, and implausible or failing centers named."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from coordinator_helpers import CountingCenter, K, in_process_centers, make_data

from coordinator.core.errors import AnalysisFailed, CenterFailure, TooFewCenters
from coordinator.protocols import federated_dp_boxplot
from shared.dp.boxplot import dp_boxplot
from shared.dp.pooled import pooled_boxplot
from shared.protocol import DPBoxplotRelease

pytestmark = pytest.mark.anyio
BOUNDS = (0.0, 100.0)


def ports(seed: int) -> list[Any]:
    return list(in_process_centers(make_data(), np.random.default_rng(seed)).values())


async def test_the_pooled_box_equals_the_core_in_process() -> None:
    data = make_data()
    fed = await federated_dp_boxplot(ports(3), dataset="cohort", variable="crp", group="ctl",
                                     epsilon=1.0, bounds=BOUNDS, per_center=False)
    reference = pooled_boxplot([x for x, _ in data.values()], epsilon=1.0, bounds=BOUNDS,
                               neighbouring="add_remove", rng=np.random.default_rng(3))
    assert fed.pooled is not None
    assert fed.pooled.box == reference.box and fed.pooled.grid == reference.grid
    assert fed.pooled.centers == ("alpha", "beta", "gamma")
    assert fed.spent == pytest.approx({"alpha": 1.0, "beta": 1.0, "gamma": 1.0})
    assert fed.per_center == {}


async def test_per_center_boxes_equal_the_core_and_both_cost_two_epsilon() -> None:
    data = make_data()
    fed = await federated_dp_boxplot(ports(4), dataset="cohort", variable="crp", group=None,
                                     epsilon=0.5, bounds=BOUNDS)
    rng = np.random.default_rng(4)  # the centers draw from it in registry order
    for cid, (x, y) in data.items():
        values = np.concatenate([x, y])
        expected = dp_boxplot(values, epsilon=0.5, bounds=BOUNDS, neighbouring="add_remove",
                              rng=rng, n_public=values.size // K * K)
        assert fed.per_center[cid] == DPBoxplotRelease.from_result(expected)
    assert fed.pooled is not None and fed.pooled.centers == tuple(data)
    assert fed.spent == pytest.approx({cid: 1.0 for cid in data})


class Odd(CountingCenter):
    """A center whose DP releases are altered by ``change`` (per method) before they leave."""

    def __init__(self, port: Any, **change: Any) -> None:
        super().__init__(port)
        self.change = change

    async def _altered(self, name: str, release: Any) -> Any:
        if name in self.change:
            if isinstance(self.change[name], Exception):
                raise self.change[name]
            return release.model_copy(update=self.change[name])
        return release

    async def dp_boxplot(self, dataset: str, request: Any) -> Any:
        return await self._altered("dp_boxplot", await super().dp_boxplot(dataset, request))

    async def dp_extremes(self, dataset: str, request: Any) -> Any:
        return await self._altered("dp_extremes", await super().dp_extremes(dataset, request))

    async def dp_tree_histogram(self, dataset: str, request: Any) -> Any:
        release = await super().dp_tree_histogram(dataset, request)
        return await self._altered("dp_tree_histogram", release)

    async def dp_threshold_counts(self, dataset: str, request: Any) -> Any:
        release = await super().dp_threshold_counts(dataset, request)
        return await self._altered("dp_threshold_counts", release)


def with_beta(seed: int, **change: Any) -> list[Any]:
    return [Odd(p, **change) if p.center_id == "beta" else p for p in ports(seed)]


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"dp_boxplot": {"epsilon": 0.1}}, "reports spending"),
        ({"dp_extremes": {"epsilon": 2.0}}, "reports spending"),
        ({"dp_tree_histogram": {"levels": [[1.0]]}}, "grid's shape"),
        ({"dp_tree_histogram": {"branching": 2}}, "grid's shape"),
        ({"dp_threshold_counts": {"below": -3}}, "negative count"),
    ],
)
async def test_implausible_dp_releases_are_named(change: dict[str, Any], match: str) -> None:
    with pytest.raises(CenterFailure, match=match) as caught:
        await federated_dp_boxplot(with_beta(1, **change), dataset="cohort", variable="crp",
                                   group="trt", epsilon=1.0, bounds=BOUNDS)
    assert (caught.value.center, caught.value.kind) == ("beta", "implausible")


async def test_partial_pooled_box_leaves_out_a_center_failing_early() -> None:
    down = CenterFailure("beta", "unreachable", "cannot connect")
    fed = await federated_dp_boxplot(with_beta(2, dp_extremes=down), dataset="cohort",
                                     variable="crp", group="trt", epsilon=1.0, bounds=BOUNDS,
                                     per_center=False, allow_partial=True, min_centers=2)
    assert fed.pooled is not None and fed.pooled.centers == ("alpha", "gamma")
    assert [(f.center, f.kind) for f in fed.excluded] == [("beta", "unreachable")]
    assert set(fed.spent) == {"alpha", "gamma"}
    with pytest.raises(TooFewCenters):
        await federated_dp_boxplot(with_beta(2, dp_extremes=down), dataset="cohort",
                                   variable="crp", group="trt", epsilon=1.0, bounds=BOUNDS,
                                   per_center=False, allow_partial=True, min_centers=3)
    # Round 3 cannot leave a center out: its records are already in the pooled histogram.
    late = CenterFailure("beta", "timeout", "no answer")
    with pytest.raises(CenterFailure, match="no answer"):
        await federated_dp_boxplot(with_beta(2, dp_threshold_counts=late), dataset="cohort",
                                   variable="crp", group="trt", epsilon=1.0, bounds=BOUNDS,
                                   per_center=False, allow_partial=True, min_centers=2)


async def test_an_unknown_level_is_named() -> None:
    with pytest.raises(CenterFailure) as caught:
        await federated_dp_boxplot(ports(0), dataset="cohort", variable="crp", group="placebo",
                                   epsilon=1.0, bounds=BOUNDS)
    assert (caught.value.center, caught.value.center_error) == ("alpha", "unknown_variable")


async def test_a_histogram_empty_after_its_noise_is_an_analysis_failure() -> None:
    # Found by generating study specs: ε this small drowns 1140 records in the tree's noise.
    with pytest.raises(AnalysisFailed, match="holds no records") as caught:
        await federated_dp_boxplot(ports(0), dataset="cohort", variable="crp", group=None,
                                   epsilon=1e-5, bounds=BOUNDS, per_center=False)
    assert caught.value.body()["error"] == "analysis_failed"
