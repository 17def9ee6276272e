"""Each center's DP quantiles over in-process centers: the core's values for the same generator
stream, every algorithm, and implausible releases named."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from coordinator_helpers import CountingCenter, in_process_centers, make_data

from coordinator.core.errors import CenterFailure
from coordinator.protocols import center_dp_quantiles
from shared.dp import joint_exp

pytestmark = pytest.mark.anyio
BOUNDS = (0.0, 100.0)
LEVELS = [0.25, 0.5, 0.75]


def ports(seed: int) -> list[Any]:
    return list(in_process_centers(make_data(), np.random.default_rng(seed)).values())


async def test_values_equal_the_core_for_the_same_stream() -> None:
    fed = await center_dp_quantiles(ports(6), dataset="cohort", variable="crp", group="ctl",
                                    levels=LEVELS, epsilon=1.0, bounds=BOUNDS)
    rng = np.random.default_rng(6)
    for cid, (x, _) in make_data().items():
        expected = joint_exp(x, LEVELS, epsilon=1.0, bounds=BOUNDS, neighbouring="add_remove",
                             rng=rng).values
        assert fed.per_center[cid].values == list(expected)
        assert fed.per_center[cid].epsilon == 1.0


@pytest.mark.parametrize("algorithm",
                         ["joint_exp", "private_quantile", "approx_quantile", "unbounded"])
async def test_every_algorithm_answers_near_the_truth(algorithm: str) -> None:
    fed = await center_dp_quantiles(ports(1), dataset="cohort", variable="crp", group=None,
                                    levels=[0.5], epsilon=5.0, bounds=BOUNDS,
                                    algorithm=algorithm)  # type: ignore[arg-type]
    for cid, (x, y) in make_data().items():
        assert fed.per_center[cid].values[0] == pytest.approx(
            np.median(np.concatenate([x, y])), abs=5.0)


class Odd(CountingCenter):
    def __init__(self, port: Any, **update: Any) -> None:
        super().__init__(port)
        self.update = update

    async def dp_quantiles(self, dataset: str, request: Any) -> Any:
        release = await super().dp_quantiles(dataset, request)
        return release.model_copy(update=self.update)


@pytest.mark.parametrize(
    ("update", "match"),
    [
        ({"epsilon": 0.1}, "reports ε"),
        ({"levels": [0.5]}, "other levels"),
        ({"values": [1.0, 2.0, 500.0]}, "outside the bounds"),
        ({"values": [1.0, float("nan"), 3.0]}, "finite"),
    ],
)
async def test_implausible_releases_are_named(update: dict[str, Any], match: str) -> None:
    centers = [Odd(p, **update) if p.center_id == "gamma" else p for p in ports(2)]
    with pytest.raises(CenterFailure, match=match) as caught:
        await center_dp_quantiles(centers, dataset="cohort", variable="crp", group="trt",
                                  levels=LEVELS, epsilon=1.0, bounds=BOUNDS)
    assert (caught.value.center, caught.value.kind) == ("gamma", "implausible")
    partial = await center_dp_quantiles(centers, dataset="cohort", variable="crp", group="trt",
                                        levels=LEVELS, epsilon=1.0, bounds=BOUNDS,
                                        allow_partial=True, min_centers=2)
    assert list(partial.per_center) == ["alpha", "beta"]
    assert [f.center for f in partial.excluded] == ["gamma"]
