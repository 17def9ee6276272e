"""The registry as the coordinator sees it now: health and remaining budgets per center."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter

from coordinator.api.deps import CentersDep, SettingsDep
from coordinator.api.schemas import CenterProblem, CenterStatus
from coordinator.core.errors import CenterFailure
from coordinator.ports import CenterPort

router = APIRouter(tags=["centers"])


async def _status(port: CenterPort, url: str | None) -> CenterStatus:
    problem: CenterProblem | None = None
    remaining: dict[str, float] | None = None
    healthy = False
    try:
        await port.health()
        healthy = True
        budget = await port.budget()
        remaining = {name: b.remaining_epsilon for name, b in budget.datasets.items()}
    except CenterFailure as failure:
        problem = CenterProblem(kind=failure.kind, detail=failure.reason)
    return CenterStatus(id=port.center_id, url=url, healthy=healthy, problem=problem,
                        remaining_epsilon=remaining)


@router.get("/centers")
async def list_centers(centers: CentersDep, settings: SettingsDep) -> list[CenterStatus]:
    """Every registered center with its health and remaining budgets (asked in parallel)."""
    urls = {cid: c.base_url for cid, c in settings.centers.items()}
    return list(
        await asyncio.gather(*(_status(port, urls.get(cid)) for cid, port in centers.items()))
    )
