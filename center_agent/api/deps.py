"""Dependencies, as ``Annotated`` aliases so a handler's signature lists what it needs.

Release routes are made from the gate's kinds (``api/routes/releases.py``); each only hands its
request to :class:`center_agent.gate.ReleaseGate`, which is the one place data leave through.
Every router except health is mounted with :func:`authenticate` as a dependency
(``center_agent.api.router``; built by ``fedstats_service.auth.bearer_auth``), and the bearer
check already ran in the middleware before the body was read
(``fedstats_service.middleware.BearerGate``).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends

from center_agent.core.config import Settings
from center_agent.data import Dataset, Datasets
from center_agent.gate import ReleaseGate
from center_agent.ledger import Ledger
from fedstats_service.app import services_part
from fedstats_service.auth import Caller, bearer_auth

# The parts of the center's ``Services`` (center_agent.services), built once per app.
get_settings = services_part("settings")
SettingsDep = Annotated[Settings, Depends(get_settings)]
DatasetsDep = Annotated[Datasets, Depends(services_part("datasets"))]
LedgerDep = Annotated[Ledger, Depends(services_part("ledger"))]
GateDep = Annotated[ReleaseGate, Depends(services_part("gate"))]


def get_dataset(dataset: str, datasets: DatasetsDep) -> Dataset:
    """The dataset named in the path (``{dataset}``); 404 ``unknown_dataset`` otherwise."""
    return datasets[dataset]


DatasetDep = Annotated[Dataset, Depends(get_dataset)]


authenticate = bearer_auth(get_settings, description="one of the center's configured tokens")
Authenticated = Annotated[Caller, Depends(authenticate)]
