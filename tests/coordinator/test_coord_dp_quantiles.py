"""Each center's DP quantiles over in-process centers (real center apps): the releases relayed
as the centers sent them and paid from their ledgers, every algorithm near the truth, and
implausible releases named."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from coordinator.protocols import center_dp_quantiles
from tests.helpers.coordinator import (
    CountingCenter,
    Federations,
    lying,
    make_data,
    named_implausible,
)

pytestmark = pytest.mark.anyio
BOUNDS = (0.0, 100.0)
LEVELS = [0.25, 0.5, 0.75]


async def test_releases_are_relayed_as_sent_and_paid_once(federation: Federations) -> None:
    centers = [CountingCenter(p) for p in federation.ports()]
    fed = await center_dp_quantiles(centers, dataset="cohort", variable="crp", group="ctl",
                                    levels=LEVELS, epsilon=1.0, bounds=BOUNDS)
    assert list(fed.per_center) == ["alpha", "beta", "gamma"]  # the registry's order
    for center in centers:
        release = fed.per_center[center.center_id]
        assert [release] == center.answers["dp_quantiles"]
        assert release.epsilon == 1.0 and release.levels == LEVELS
        assert BOUNDS[0] <= release.values[0] <= release.values[1] <= release.values[2] <= BOUNDS[1]
        budget = (await center.budget()).datasets["cohort"]
        assert budget.spent_epsilon == pytest.approx(1.0)


@pytest.mark.parametrize("algorithm",
                         ["joint_exp", "private_quantile", "approx_quantile", "unbounded"])
async def test_every_algorithm_answers_near_the_truth(
    federation: Federations, algorithm: str
) -> None:
    fed = await center_dp_quantiles(federation.ports(), dataset="cohort", variable="crp",
                                    group=None, levels=[0.5], epsilon=5.0, bounds=BOUNDS,
                                    algorithm=algorithm)  # type: ignore[arg-type]
    for cid, (x, y) in make_data().items():
        assert fed.per_center[cid].values[0] == pytest.approx(
            np.median(np.concatenate([x, y])), abs=5.0)


@pytest.mark.parametrize(
    ("update", "match"),
    [
        ({"epsilon": 0.1}, "reports ε"),
        ({"levels": [0.5]}, "other levels"),
        ({"values": [1.0, 2.0, 500.0]}, "outside the bounds"),
        ({"values": [1.0, float("nan"), 3.0]}, "finite"),
    ],
)
async def test_implausible_releases_are_named(
    federation: Federations, update: dict[str, Any], match: str
) -> None:
    centers = lying(federation, "gamma", dp_quantiles=update)
    await named_implausible("gamma", match, center_dp_quantiles(
        centers, dataset="cohort", variable="crp", group="trt", levels=LEVELS, epsilon=1.0,
        bounds=BOUNDS))
    partial = await center_dp_quantiles(centers, dataset="cohort", variable="crp", group="trt",
                                        levels=LEVELS, epsilon=1.0, bounds=BOUNDS,
                                        allow_partial=True, min_centers=2)
    assert list(partial.per_center) == ["alpha", "beta"]
    assert [f.center for f in partial.excluded] == ["gamma"]
