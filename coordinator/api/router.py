"""All routes under ``/v1``: health is public, every other router requires an analyst token.

A new resource is one module in ``api/routes`` whose router is added to ``protected`` below; it
then inherits authentication.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends

from coordinator.api.deps import authenticate
from coordinator.api.routes import centers, health, studies
from fedstats_service.errors import error_responses

public = APIRouter()
public.include_router(health.router)

protected = APIRouter(dependencies=[Depends(authenticate)], responses=error_responses())
protected.include_router(centers.router)
protected.include_router(studies.router)

api_router = APIRouter(prefix="/v1")
api_router.include_router(public)
api_router.include_router(protected)
