"""Dependencies, as ``Annotated`` aliases so a handler's signature lists what it needs.

Every router except health is mounted with :func:`authenticate` as a dependency
(``coordinator.api.router``; built by ``fedstats_service.auth.bearer_auth``), so handlers need
not ask for :data:`AnalystDep` themselves.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends

from coordinator.core.config import Settings
from coordinator.db import Store
from coordinator.registry import Registry
from coordinator.runner import StudyRunner
from fedstats_service.app import services_part
from fedstats_service.auth import Caller, bearer_auth

# The parts of the coordinator's ``Services`` (coordinator.services), built once per app.
get_settings = services_part("settings")
SettingsDep = Annotated[Settings, Depends(get_settings)]
StoreDep = Annotated[Store, Depends(services_part("store"))]
RunnerDep = Annotated[StudyRunner, Depends(services_part("runner"))]
RegistryDep = Annotated[Registry, Depends(services_part("registry"))]

authenticate = bearer_auth(get_settings, description="one of the coordinator's analyst tokens")
AnalystDep = Annotated[Caller, Depends(authenticate)]
