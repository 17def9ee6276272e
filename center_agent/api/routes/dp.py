"""Differentially private releases: quantiles, DPBoxplot and the pooled-boxplot rounds.

Every answer is paid for from the dataset's budget before it is computed, in the ledger's
transaction, and stored: an identical request returns the stored answer without spending again,
so averaging repeated answers gains nothing. The neighbouring relation is the center's setting.
"""

from __future__ import annotations

from collections.abc import Callable

from fastapi import APIRouter

from center_agent.api.deps import DatasetDep, LedgerDep, RngDep, SettingsDep
from center_agent.core.errors import core_errors
from center_agent.data import Dataset
from center_agent.ledger import JSONPayload, Ledger, request_key
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
from shared.releases import (
    dp_boxplot_release,
    dp_quantiles_release,
    extremes_release,
    threshold_counts_release,
    tree_histogram_release,
)

router = APIRouter(prefix="/datasets/{dataset}/dp", tags=["differential privacy"])


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
    x = dataset.usable(body.variable, body.group, settings.k)

    def compute() -> WireModel:
        return dp_quantiles_release(x, body, settings.neighbouring, rng)

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
    x = dataset.usable(body.variable, body.group, settings.k)

    def compute() -> WireModel:
        return dp_boxplot_release(x, body, settings.neighbouring, settings.k, rng)

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
    x = dataset.usable(body.variable, body.group, settings.k)

    def compute() -> WireModel:
        return extremes_release(x, body, settings.neighbouring, rng)

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
    x = dataset.usable(body.variable, body.group, settings.k)

    def compute() -> WireModel:
        return tree_histogram_release(x, body, settings.neighbouring, rng)

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
    x = dataset.usable(body.variable, body.group, settings.k)

    def compute() -> WireModel:
        return threshold_counts_release(x, body, settings.neighbouring, rng)

    payload = _release(dataset, body, "dp_threshold_counts", ledger, compute)
    return ThresholdCountsRelease.model_validate(payload)
