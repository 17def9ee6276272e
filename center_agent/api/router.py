"""All routes under ``/v1``: health is public, every other router requires a bearer token.

A new resource (bin tables, MWU, DP quantiles, ...) is one module in ``api/routes`` whose router
is added to ``protected`` below; it then inherits authentication.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends

from center_agent.api.deps import authenticate
from center_agent.api.routes import budget, dp, health, info, mwu, quantiles, tables
from fedstats_service.errors import error_responses

public = APIRouter()
public.include_router(health.router)

protected = APIRouter(dependencies=[Depends(authenticate)], responses=error_responses())
protected.include_router(info.router)
protected.include_router(budget.router)
protected.include_router(tables.router)
protected.include_router(mwu.router)
protected.include_router(dp.router)
protected.include_router(quantiles.router)

api_router = APIRouter(prefix="/v1")
api_router.include_router(public)
api_router.include_router(protected)
