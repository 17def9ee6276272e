"""Releases for the federated quantile estimators: YJ moment sums and quantile-loss values.

YJ moment sums are limited by number (``yj_max_calls_per_study`` per study, counted in the
ledger's transaction) and, when noised, paid for in ε. Quantile-loss values leak the data
(piecewise linear in u with a kink at every value) and are refused unless ``allow_quantile_loss``
is switched on. Both are stored like every release, so a repeat is answered from the ledger.
"""

from __future__ import annotations

from fastapi import APIRouter

from center_agent.api.deps import (
    DatasetDep,
    LedgerDep,
    QuantileLossAllowed,
    RngDep,
    SettingsDep,
)
from center_agent.core.errors import core_errors
from center_agent.ledger import JSONPayload, request_key
from shared.quantiles.wire import (
    QuantileLossRelease,
    QuantileLossRequest,
    YJMomentsRelease,
    YJMomentsRequest,
)
from shared.releases import quantile_loss_release, yj_moments_release

router = APIRouter(prefix="/datasets/{dataset}", tags=["federated quantiles"])


@router.post("/yj-moments")
def yj_moments(
    dataset: DatasetDep,
    body: YJMomentsRequest,
    settings: SettingsDep,
    ledger: LedgerDep,
    rng: RngDep,
) -> YJMomentsRelease:
    """n, Σ sign(x)·log(|x| + 1), Σ YJ(x; λ), Σ YJ(x; λ)² for one λ of one study."""
    x = dataset.usable(body.variable, body.group, settings.k)
    epsilon = body.epsilon or 0.0

    def compute() -> JSONPayload:
        # Counted inside the release: a cached repeat does not use up the study's calls.
        ledger.count_call(dataset.name, body.study, "yj_moments", settings.yj_max_calls_per_study)
        with core_errors():
            return yj_moments_release(x, body, settings.neighbouring, rng).model_dump(mode="json")

    key = request_key(dataset.name, body.variable, "yj_moments", body.model_dump(), epsilon)
    return YJMomentsRelease.model_validate(ledger.release(dataset.name, key, epsilon, compute))


@router.post("/quantile-loss", dependencies=[QuantileLossAllowed])
def quantile_loss(
    dataset: DatasetDep,
    body: QuantileLossRequest,
    settings: SettingsDep,
    ledger: LedgerDep,
) -> QuantileLossRelease:
    """Σ ρ_level(x − u) (the seed's benchmark; off unless ``allow_quantile_loss``)."""
    x = dataset.usable(body.variable, body.group, settings.k)

    def compute() -> JSONPayload:
        with core_errors():
            return quantile_loss_release(x, body).model_dump(mode="json")

    key = request_key(dataset.name, body.variable, "quantile_loss", body.model_dump(), 0.0)
    return QuantileLossRelease.model_validate(ledger.release(dataset.name, key, 0.0, compute))
