"""The registry as the coordinator sees it now: health and remaining budgets per center."""

from __future__ import annotations

from fastapi import APIRouter

from coordinator.api.deps import RegistryDep
from coordinator.models import CenterStatus

router = APIRouter(tags=["centers"])


@router.get("/centers")
async def list_centers(registry: RegistryDep) -> list[CenterStatus]:
    """Every registered center with its health and remaining budgets (asked in parallel;
    concurrent calls share one round of questions)."""
    return await registry.statuses()
