"""Dependencies, as ``Annotated`` aliases so a handler's signature lists what it needs.

A release endpoint is a thin route (request/response models from ``shared/protocol.py``)::

    @router.post("/datasets/{dataset}/dp-quantiles")
    def dp_quantiles(
        dataset: DatasetDep, body: DPQuantileRequest, ledger: LedgerDep, settings: SettingsDep
    ) -> DPQuantileRelease:
        sample = dataset.load(body.variable, body.group)   # 404 for undeclared names
        key = request_key(dataset.name, body.variable, "dp_quantiles",
                          body.model_dump(mode="json"), body.epsilon)
        payload = ledger.release(dataset.name, key, body.epsilon,
                                 lambda: run_core(sample, ...).model_dump(mode="json"))
        return DPQuantileRelease.model_validate(payload)

A K-anonymous table goes through ``ledger.release`` with ε = 0 (so a repeated request gets the
same randomized limits back) and calls ``auditor.admit_table(...)`` inside its compute: the
admission joins the release's transaction, and a refusal rolls the whole release back.

Every router except health is mounted with :func:`authenticate` as a dependency
(``center_agent.api.router``), so handlers need not ask for :data:`Authenticated` themselves.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Annotated

import numpy as np
from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from center_agent.auditor import Auditor
from center_agent.core.config import Settings
from center_agent.core.errors import KAnonymityRefusal, ReleaseDisabled
from center_agent.data import Dataset, Datasets
from center_agent.ledger import Ledger
from center_agent.services import Services
from fedstats_service.auth import check_bearer


def get_services(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


ServicesDep = Annotated[Services, Depends(get_services)]


def get_settings(services: ServicesDep) -> Settings:
    return services.settings


def get_datasets(services: ServicesDep) -> Datasets:
    return services.datasets


def get_ledger(services: ServicesDep) -> Ledger:
    return services.ledger


def get_auditor(services: ServicesDep) -> Auditor:
    return services.auditor


SettingsDep = Annotated[Settings, Depends(get_settings)]
DatasetsDep = Annotated[Datasets, Depends(get_datasets)]
LedgerDep = Annotated[Ledger, Depends(get_ledger)]
AuditorDep = Annotated[Auditor, Depends(get_auditor)]


def get_dataset(dataset: str, datasets: DatasetsDep) -> Dataset:
    """The dataset named in the path (``{dataset}``); 404 ``unknown_dataset`` otherwise."""
    return datasets[dataset]


DatasetDep = Annotated[Dataset, Depends(get_dataset)]


def get_rng() -> np.random.Generator:
    """A generator seeded from the OS for each request: release noise and randomized limits must
    not be predictable from earlier answers (NOTES §4, Mironov 2012)."""
    return np.random.default_rng(secrets.randbits(128))


RngDep = Annotated[np.random.Generator, Depends(get_rng)]


def effective_k(requested: int, settings: Settings) -> int:
    """The K a release uses: the study's, which may not be below this center's K."""
    if requested < settings.k:
        raise KAnonymityRefusal(
            f"this center releases tables with K >= {settings.k}; the request asked for "
            f"K = {requested}"
        )
    return requested


@dataclass(frozen=True)
class Caller:
    """Who called: a short fingerprint of the token (never the token itself)."""

    token_id: str


bearer = HTTPBearer(auto_error=False, description="one of the center's configured tokens")


def authenticate(
    settings: SettingsDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> Caller:
    """401 unless the bearer token equals one of the configured tokens (constant time)."""
    presented = credentials.credentials if credentials is not None else None
    return Caller(token_id=check_bearer(presented, settings.tokens, "center"))


Authenticated = Annotated[Caller, Depends(authenticate)]


def require_quantile_loss(settings: SettingsDep) -> None:
    """403 ``release_disabled`` unless ``allow_quantile_loss`` is on (the release leaks data)."""
    if not settings.allow_quantile_loss:
        raise ReleaseDisabled(
            "quantile-loss values leak data and are disabled at this center "
            "(setting allow_quantile_loss)"
        )


QuantileLossAllowed = Depends(require_quantile_loss)
