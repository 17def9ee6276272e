"""Federated quantiles from the federated table: the ``shared.quantiles`` estimators on each
group's row of the table the centers' releases fold into, and estimators that cannot run
recorded."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from coordinator.protocols import federated_bin_table
from coordinator.protocols.quantiles import ESTIMATORS, table_quantiles
from shared.binning import BinTable
from shared.quantiles import (
    extrapolation_quantiles,
    interpolation_quantiles,
    yj_shaped_quantiles,
    yj_table_quantiles,
)
from tests.helpers.coordinator import CountingCenter, Federations, K, fold_received, make_data

pytestmark = pytest.mark.anyio
LEVELS = [0.1, 0.25, 0.5, 0.75, 0.9]
CORE: dict[str, Callable[..., Any]] = {
    "yj_table": yj_table_quantiles,
    "interpolation": interpolation_quantiles,
    "extrapolation": extrapolation_quantiles,
    "yj_shaped": yj_shaped_quantiles,
}


async def test_estimates_equal_the_core_on_the_same_table(federation: Federations) -> None:
    data = make_data()
    centers = [CountingCenter(p) for p in federation.ports(data)]
    fed = await federated_bin_table(centers, dataset="cohort", variable="crp",
                                    groups=("ctl", "trt"), k=K)
    reference, _ = fold_received(centers)  # the table the centers' releases fold into
    assert set(ESTIMATORS) == set(CORE)
    estimates = table_quantiles(fed.table, LEVELS, estimators=list(ESTIMATORS),
                                groups=["ctl", "trt"])
    for name, estimate in CORE.items():
        for g, group in enumerate(["ctl", "trt"]):
            row = BinTable(limits=reference.limits, counts=reference.counts[g : g + 1], k=K)
            expected = estimate(row, LEVELS).quantiles
            got = estimates[name][group].quantiles
            assert got is not None
            np.testing.assert_allclose(got, expected, rtol=1e-12)
    # Sanity against the pooled sample: the shift between the groups shows in the medians.
    x = np.concatenate([d[0] for d in data.values()])
    y = np.concatenate([d[1] for d in data.values()])
    median = estimates["yj_shaped"]
    assert median["ctl"].quantiles[2] == pytest.approx(np.median(x), abs=1.5)  # type: ignore[index]
    assert median["trt"].quantiles[2] == pytest.approx(np.median(y), abs=1.5)  # type: ignore[index]


def test_an_estimator_that_cannot_run_records_why() -> None:
    table = BinTable(limits=np.array([-np.inf, 0.0, 1.0, 2.0, 3.0, np.inf]),
                     counts=np.array([[10.0, 20.0, 30.0, 20.0, 10.0]]), k=10)
    estimates = table_quantiles(table, [0.5], estimators=["interpolation", "yj_table"],
                                groups=["all"])
    assert estimates["interpolation"]["all"].quantiles is None
    assert "finite extreme limits" in (estimates["interpolation"]["all"].error or "")
    assert estimates["yj_table"]["all"].quantiles is not None  # needs no buffers
    with pytest.raises(ValueError, match="group names"):
        table_quantiles(table, [0.5], estimators=["yj_table"], groups=["a", "b"])
