"""Dependencies, as ``Annotated`` aliases so a handler's signature lists what it needs.

Every router except health is mounted with :func:`authenticate` as a dependency
(``coordinator.api.router``), so handlers need not ask for :data:`Analyst` themselves.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from coordinator.core.config import Settings
from coordinator.db import Store
from coordinator.registry import Registry
from coordinator.runner import StudyRunner
from coordinator.services import Services
from fedstats_service.auth import check_bearer


def get_services(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


ServicesDep = Annotated[Services, Depends(get_services)]


def get_settings(services: ServicesDep) -> Settings:
    return services.settings


def get_store(services: ServicesDep) -> Store:
    return services.store


def get_runner(services: ServicesDep) -> StudyRunner:
    return services.runner


def get_registry(services: ServicesDep) -> Registry:
    return services.registry


SettingsDep = Annotated[Settings, Depends(get_settings)]
StoreDep = Annotated[Store, Depends(get_store)]
RunnerDep = Annotated[StudyRunner, Depends(get_runner)]
RegistryDep = Annotated[Registry, Depends(get_registry)]


@dataclass(frozen=True)
class Analyst:
    """Who called: a short fingerprint of the token (never the token itself)."""

    token_id: str


bearer = HTTPBearer(auto_error=False, description="one of the coordinator's analyst tokens")


def authenticate(
    settings: SettingsDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> Analyst:
    """401 unless the bearer token equals one of the analyst tokens (constant time)."""
    presented = credentials.credentials if credentials is not None else None
    return Analyst(token_id=check_bearer(presented, settings.analyst_tokens, "coordinator"))


AnalystDep = Annotated[Analyst, Depends(authenticate)]
