"""Differentially private releases: quantiles, DPBoxplot and the pooled-boxplot rounds.

Every answer is paid for from the dataset's budget before it is computed, in the ledger's
transaction, and stored: an identical request returns the stored answer without spending again,
so averaging repeated answers gains nothing. The neighbouring relation is the center's setting.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from fastapi import APIRouter
from numpy.typing import NDArray

from center_agent.api.deps import DatasetDep, LedgerDep, RngDep, SettingsDep
from center_agent.core.config import Settings
from center_agent.core.errors import KAnonymityRefusal, core_errors
from center_agent.data import Dataset, round_down
from center_agent.ledger import JSONPayload, Ledger, request_key
from shared.dp import approx_quantiles, dp_boxplot, joint_exp, private_quantile, unbounded_quantile
from shared.dp.pooled import center_extremes, threshold_counts, tree_histogram
from shared.protocol import (
    DPBoxplotRelease,
    DPBoxplotRequest,
    DPQuantilesRelease,
    DPQuantilesRequest,
    DPRequest,
    ExtremesRelease,
    ExtremesRequest,
    ThresholdCountsRelease,
    ThresholdCountsRequest,
    TreeHistogramRelease,
    TreeHistogramRequest,
    WireModel,
)

router = APIRouter(prefix="/datasets/{dataset}/dp", tags=["differential privacy"])


def _usable(dataset: Dataset, body: DPRequest, settings: Settings) -> NDArray[np.float64]:
    """The values a DP release may use; fewer than K records are refused before any spend."""
    values = dataset.values(body.variable, body.group)
    if values.size < settings.k:
        raise KAnonymityRefusal(
            f"the selection holds fewer than K = {settings.k} usable records; no DP release"
        )
    return values


def _release(
    dataset: Dataset, body: DPRequest, kind: str, ledger: Ledger, compute: Callable[[], WireModel]
) -> JSONPayload:
    def run() -> JSONPayload:
        with core_errors():
            return compute().to_payload()

    key = request_key(dataset.name, body.variable, kind, body.to_payload(), body.epsilon)
    return ledger.release(dataset.name, key, body.epsilon, run)


@router.post("/quantiles")
def dp_quantiles(
    dataset: DatasetDep,
    body: DPQuantilesRequest,
    settings: SettingsDep,
    ledger: LedgerDep,
    rng: RngDep,
) -> DPQuantilesRelease:
    """ε-DP quantiles by JointExp, PrivateQuantile (ε split evenly), ApproxQuantile or the
    unbounded walk (ε split evenly)."""
    x = _usable(dataset, body, settings)
    relation = settings.neighbouring

    def compute() -> WireModel:
        eps, bounds, levels = body.epsilon, body.bounds, body.levels
        if body.algorithm == "joint_exp":
            values = joint_exp(x, levels, epsilon=eps, bounds=bounds, neighbouring=relation,
                               rng=rng).values
        elif body.algorithm == "approx_quantile":
            values = approx_quantiles(x, levels, epsilon=eps, bounds=bounds,
                                      neighbouring=relation, rng=rng).values
        else:
            # One level at a time: sequential composition, ε split evenly.
            single = private_quantile if body.algorithm == "private_quantile" else (
                unbounded_quantile
            )
            share = eps / len(levels)
            # Independent releases per level may cross; sorting them is post-processing.
            values = tuple(sorted(
                single(x, q, epsilon=share, bounds=bounds, neighbouring=relation, rng=rng)
                .values[0]
                for q in levels
            ))
        return DPQuantilesRelease(
            levels=body.levels,
            values=list(values),
            algorithm=body.algorithm,
            epsilon=body.epsilon,
            neighbouring=relation,
        )

    payload = _release(dataset, body, "dp_quantiles", ledger, compute)
    return DPQuantilesRelease.model_validate(payload)


@router.post("/boxplot")
def dp_box(
    dataset: DatasetDep,
    body: DPBoxplotRequest,
    settings: SettingsDep,
    ledger: LedgerDep,
    rng: RngDep,
) -> DPBoxplotRelease:
    """ε-DP boxplot (DPBoxplot, NOTES §2). Under add/remove the whisker buffer uses a public
    size: ``n_public`` or this center's size rounded down to a multiple of K."""
    x = _usable(dataset, body, settings)
    relation = settings.neighbouring
    n_public = None
    if relation == "add_remove":
        n_public = body.n_public or max(4, round_down(x.size, settings.k))

    def compute() -> WireModel:
        result = dp_boxplot(x, epsilon=body.epsilon, bounds=body.bounds, neighbouring=relation,
                            rng=rng, n_public=n_public)
        return DPBoxplotRelease.from_result(result)

    return DPBoxplotRelease.model_validate(_release(dataset, body, "dp_boxplot", ledger, compute))


@router.post("/extremes")
def extremes(
    dataset: DatasetDep,
    body: ExtremesRequest,
    settings: SettingsDep,
    ledger: LedgerDep,
    rng: RngDep,
) -> ExtremesRelease:
    """Pooled boxplot round 1: ε-DP minimum and maximum (unbounded walks, ε/2 each)."""
    x = _usable(dataset, body, settings)

    def compute() -> WireModel:
        e = center_extremes(x, epsilon=body.epsilon, bounds=body.bounds,
                            neighbouring=settings.neighbouring, rng=rng)
        return ExtremesRelease(psi_min=e.psi_min, psi_max=e.psi_max, epsilon=e.spent.epsilon)

    return ExtremesRelease.model_validate(_release(dataset, body, "dp_extremes", ledger, compute))


@router.post("/tree-histogram")
def tree(
    dataset: DatasetDep,
    body: TreeHistogramRequest,
    settings: SettingsDep,
    ledger: LedgerDep,
    rng: RngDep,
) -> TreeHistogramRelease:
    """Pooled boxplot round 2: an ε-DP hierarchical histogram on the coordinator's grid."""
    x = np.clip(_usable(dataset, body, settings), *body.bounds)

    def compute() -> WireModel:
        t = tree_histogram(x, grid=body.grid, depth=body.depth, branching=body.branching,
                           epsilon=body.epsilon, neighbouring=settings.neighbouring, rng=rng)
        return TreeHistogramRelease(
            levels=[level.tolist() for level in t.levels],
            branching=t.branching,
            noise_scale=t.noise_scale,
            epsilon=t.spent.epsilon,
        )

    payload = _release(dataset, body, "dp_tree_histogram", ledger, compute)
    return TreeHistogramRelease.model_validate(payload)


@router.post("/threshold-counts")
def counts(
    dataset: DatasetDep,
    body: ThresholdCountsRequest,
    settings: SettingsDep,
    ledger: LedgerDep,
    rng: RngDep,
) -> ThresholdCountsRelease:
    """Pooled boxplot round 3 (and any outlier count): ε-DP #{x < lower} and #{x > upper}."""
    x = _usable(dataset, body, settings)

    def compute() -> WireModel:
        c = threshold_counts(x, lower=body.lower, upper=body.upper, epsilon=body.epsilon,
                             neighbouring=settings.neighbouring, rng=rng)
        return ThresholdCountsRelease(below=c.below, above=c.above, epsilon=c.spent.epsilon)

    payload = _release(dataset, body, "dp_threshold_counts", ledger, compute)
    return ThresholdCountsRelease.model_validate(payload)
