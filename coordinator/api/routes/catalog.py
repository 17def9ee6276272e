"""Discovery: what every center holds (``GET /v1/catalog``; docs/coordinator.md, "Catalog")."""

from __future__ import annotations

from fastapi import APIRouter

from coordinator.api.deps import RegistryDep
from coordinator.catalog import build_catalog
from coordinator.models import Catalog

router = APIRouter(tags=["catalog"])


@router.get("/catalog")
async def get_catalog(registry: RegistryDep) -> Catalog:
    """Each dataset across centers: its variables, group column and levels, the sizes each
    center publishes (rounded down to its K) and the ε its budget has left; every center, with
    its problem when it could not be asked. Any authenticated analyst may read it; the centers
    are asked in parallel and concurrent calls share one round (``coordinator.registry``)."""
    return build_catalog(await registry.declarations())
