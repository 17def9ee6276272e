"""All routes under ``/v1``: health is public, every other router requires a bearer token.

A new release kind is declared to the gate (``center_agent.gate.kinds``) and gets its route from
``api/routes/releases``; any other resource is one module in ``api/routes`` whose router is added
to ``protected`` below. Either way it inherits authentication.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends

from center_agent.api.deps import authenticate
from center_agent.api.routes import budget, health, info, releases
from fedstats_service.errors import error_responses

public = APIRouter()
public.include_router(health.router)

protected = APIRouter(dependencies=[Depends(authenticate)], responses=error_responses())
protected.include_router(info.router)
protected.include_router(budget.router)
protected.include_router(releases.router)

api_router = APIRouter(prefix="/v1")
api_router.include_router(public)
api_router.include_router(protected)
