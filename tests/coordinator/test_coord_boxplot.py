"""DP boxplots over in-process centers (real center apps): the pooled box is the core's
arithmetic on the releases the centers really sent, the per-center boxes are relayed as sent, the
ε each center spent agrees with its ledger, and implausible or failing centers are named."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from coordinator.core.errors import AnalysisFailed, CenterFailure, TooFewCenters
from coordinator.protocols import federated_dp_boxplot
from shared import kinds
from shared.dp.pooled import TreeHistogram, pooled_range, pooled_result, pooled_whiskers
from shared.privacy import PrivacySpent
from tests.helpers.coordinator import (
    SIZES,
    CountingCenter,
    Federations,
    K,
    lying,
    named_implausible,
)

pytestmark = pytest.mark.anyio
BOUNDS = (0.0, 100.0)


async def spent(center: Any) -> float:
    """What the center's own ledger says the dataset has spent."""
    return float((await center.budget()).datasets["cohort"].spent_epsilon)


async def test_the_pooled_box_is_the_core_on_the_releases_received(
    federation: Federations,
) -> None:
    centers = [CountingCenter(p) for p in federation.ports()]
    fed = await federated_dp_boxplot(centers, dataset="cohort", variable="crp", group="ctl",
                                     epsilon=1.0, bounds=BOUNDS, per_center=False)
    # shared.dp.pooled's coordinator half, on the three rounds' releases as received.
    pairs = [(c.answers["dp_extremes"][0].psi_min, c.answers["dp_extremes"][0].psi_max)
             for c in centers]
    grid = pooled_range(pairs, BOUNDS)
    trees = [TreeHistogram(tuple(np.asarray(level) for level in t.levels), t.branching,
                           t.noise_scale, PrivacySpent(t.epsilon))
             for t in (c.answers["dp_tree_histogram"][0] for c in centers)]
    whiskers = pooled_whiskers(trees, grid=grid, extremes=pairs, bounds=BOUNDS)
    counts = [(c.answers["dp_threshold_counts"][0].below_noisy,
               c.answers["dp_threshold_counts"][0].above_noisy) for c in centers]
    assert fed.pooled is not None
    assert fed.pooled.grid == grid
    assert fed.pooled.box == pooled_result(whiskers, counts, 1.0)
    assert fed.pooled.centers == ("alpha", "beta", "gamma")
    assert fed.spent == pytest.approx({"alpha": 1.0, "beta": 1.0, "gamma": 1.0})
    assert [await spent(c) for c in centers] == pytest.approx([1.0] * 3)
    assert fed.per_center == {}


async def test_per_center_boxes_are_relayed_and_both_cost_two_epsilon(
    federation: Federations,
) -> None:
    centers = [CountingCenter(p) for p in federation.ports()]
    fed = await federated_dp_boxplot(centers, dataset="cohort", variable="crp", group=None,
                                     epsilon=0.5, bounds=BOUNDS)
    for center in centers:
        box = fed.per_center[center.center_id]
        assert [box] == center.answers["dp_boxplot"]  # as the center sent it
        assert box.outlier_scale == pytest.approx(8 / 0.5)  # the pair at ε/8, add/remove
        assert box.n == 2 * SIZES[center.center_id] // K * K  # its public size, both levels
        assert box.epsilon == 0.5 and box.within(BOUNDS)
        assert box.lower_whisker <= box.q1 <= box.median <= box.q3 <= box.upper_whisker
    assert fed.pooled is not None and fed.pooled.centers == tuple(SIZES)
    # ε for the own box and ε for the pooled one, as the centers' ledgers agree.
    assert fed.spent == pytest.approx({cid: 1.0 for cid in SIZES})
    assert [await spent(c) for c in centers] == pytest.approx([1.0] * 3)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"dp_boxplot": {"epsilon": 0.1}}, "reports spending"),
        ({"dp_extremes": {"epsilon": 2.0}}, "reports spending"),
        ({"dp_tree_histogram": {"levels": [[1.0]]}}, "grid's shape"),
        ({"dp_tree_histogram": {"branching": 2}}, "grid's shape"),
        ({"dp_threshold_counts": {"below": -3}}, "negative count"),
        # The outlier pair's scale is 8/ε or 16/ε; its half-width the one that scale gives.
        ({"dp_boxplot": {"outlier_scale": 1.0}}, "outlier count noise scale"),
        ({"dp_boxplot": {"outlier_halfwidth": 1.0}}, "half-width its noise scale"),
    ],
)
async def test_implausible_dp_releases_are_named(
    federation: Federations, change: dict[str, Any], match: str
) -> None:
    await named_implausible("beta", match, federated_dp_boxplot(
        lying(federation, "beta", **change), dataset="cohort", variable="crp", group="trt",
        epsilon=1.0, bounds=BOUNDS))


async def test_partial_pooled_box_leaves_out_a_center_failing_early(
    federation: Federations,
) -> None:
    down = CenterFailure("beta", "unreachable", "cannot connect")
    fed = await federated_dp_boxplot(lying(federation, "beta", dp_extremes=down),
                                     dataset="cohort", variable="crp", group="trt", epsilon=1.0,
                                     bounds=BOUNDS, per_center=False, allow_partial=True,
                                     min_centers=2)
    assert fed.pooled is not None and fed.pooled.centers == ("alpha", "gamma")
    assert [(f.center, f.kind) for f in fed.excluded] == [("beta", "unreachable")]
    assert set(fed.spent) == {"alpha", "gamma"}
    with pytest.raises(TooFewCenters):
        await federated_dp_boxplot(lying(federation, "beta", dp_extremes=down),
                                   dataset="cohort", variable="crp", group="trt", epsilon=1.0,
                                   bounds=BOUNDS, per_center=False, allow_partial=True,
                                   min_centers=3)
    # Round 3 cannot leave a center out: its records are already in the pooled histogram.
    late = CenterFailure("beta", "timeout", "no answer")
    with pytest.raises(CenterFailure, match="no answer"):
        await federated_dp_boxplot(lying(federation, "beta", dp_threshold_counts=late),
                                   dataset="cohort", variable="crp", group="trt", epsilon=1.0,
                                   bounds=BOUNDS, per_center=False, allow_partial=True,
                                   min_centers=2)


async def test_an_unknown_level_is_named(federation: Federations) -> None:
    with pytest.raises(CenterFailure) as caught:
        await federated_dp_boxplot(federation.ports(), dataset="cohort", variable="crp",
                                   group="placebo", epsilon=1.0, bounds=BOUNDS)
    assert (caught.value.center, caught.value.center_error) == ("alpha", "unknown_level")


class Drowned(CountingCenter):
    """A center whose tree histogram came out of its noise with every node below zero."""

    async def release(self, kind: Any, dataset: str, request: Any) -> Any:
        release = await super().release(kind, dataset, request)
        if kind is not kinds.DP_TREE_HISTOGRAM:
            return release
        levels = [[-abs(v) for v in level] for level in release.levels]
        return release.model_copy(update={"levels": levels})


async def test_a_histogram_empty_after_its_noise_is_an_analysis_failure(
    federation: Federations,
) -> None:
    # Found by generating study specs: at ε = 1e-5 the tree's noise drowns 1140 records and
    # the summed histogram often holds no records. The centers' noise comes from the OS, so
    # here every center's tree is such a draw (each node negative, as that noise can give it).
    # (Centers that accept such an ε: the default least ε per release is 10^-3.)
    centers = [Drowned(p) for p in federation.ports(min_epsilon_per_release=0)]
    with pytest.raises(AnalysisFailed, match="holds no records") as caught:
        await federated_dp_boxplot(centers, dataset="cohort", variable="crp", group=None,
                                   epsilon=1e-5, bounds=BOUNDS, per_center=False)
    assert caught.value.body()["error"] == "analysis_failed"
