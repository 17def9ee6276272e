"""Dependencies, as ``Annotated`` aliases so a handler's signature lists what it needs.

A release endpoint will typically read::

    @router.post("/datasets/{dataset}/...")
    def release(dataset: DatasetDep, body: SomeRequest, ledger: LedgerDep, settings: SettingsDep):
        sample = dataset.load(body.variable, body.group)   # 404 for undeclared names
        return ledger.release(dataset.name, key, body.epsilon, lambda: ...)

Every router except health is mounted with :func:`authenticate` as a dependency
(``center_agent.api.router``), so handlers need not ask for :data:`Authenticated` themselves.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from center_agent.auditor import Auditor
from center_agent.core.config import Settings
from center_agent.core.errors import AuthenticationError, ReleaseDisabled
from center_agent.data import Dataset, Datasets
from center_agent.ledger import Ledger
from center_agent.services import Services


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
    if credentials is None or not credentials.credentials:
        raise AuthenticationError()
    presented = credentials.credentials.encode()
    matched = False
    for allowed in settings.tokens:  # compare against every token: timing tells nothing
        matched |= hmac.compare_digest(presented, allowed.get_secret_value().encode())
    if not matched:
        raise AuthenticationError("the bearer token is not valid for this center")
    return Caller(token_id=hashlib.sha256(presented).hexdigest()[:16])


Authenticated = Annotated[Caller, Depends(authenticate)]


def require_quantile_loss(settings: SettingsDep) -> None:
    """403 ``release_disabled`` unless ``allow_quantile_loss`` is on (the release leaks data)."""
    if not settings.allow_quantile_loss:
        raise ReleaseDisabled(
            "quantile-loss values leak data and are disabled at this center "
            "(setting allow_quantile_loss)"
        )


QuantileLossAllowed = Depends(require_quantile_loss)
