"""Dependencies, as ``Annotated`` aliases so a handler's signature lists what it needs.

Release routes are made from the gate's kinds (``api/routes/releases.py``); each only hands its
request to :class:`center_agent.gate.ReleaseGate`, which is the one place data leave through.
Every router except health is mounted with :func:`authenticate` as a dependency
(``center_agent.api.router``), and the bearer check already ran in the middleware before the
body was read (``fedstats_service.middleware.BearerGate``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from center_agent.core.config import Settings
from center_agent.data import Dataset, Datasets
from center_agent.gate import ReleaseGate
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


def get_gate(services: ServicesDep) -> ReleaseGate:
    return services.gate


SettingsDep = Annotated[Settings, Depends(get_settings)]
DatasetsDep = Annotated[Datasets, Depends(get_datasets)]
LedgerDep = Annotated[Ledger, Depends(get_ledger)]
GateDep = Annotated[ReleaseGate, Depends(get_gate)]


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
    presented = credentials.credentials if credentials is not None else None
    return Caller(token_id=check_bearer(presented, settings.tokens, "center"))


Authenticated = Annotated[Caller, Depends(authenticate)]
