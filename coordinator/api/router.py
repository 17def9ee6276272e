"""All routes under ``/v1``: health is public, every other router requires an analyst token (an
account's or a configured one; ``coordinator.accounts``); the analysts and audit routers also
want an admin (``coordinator.api.deps.AdminDep``).

A new resource is one module in ``api/routes`` whose router is added to ``protected`` below; it
then inherits authentication.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends

from coordinator.api.deps import authenticate
from coordinator.api.routes import analysts, audit, catalog, centers, health, shares, studies
from fedstats_service.errors import error_responses

public = APIRouter()
public.include_router(health.router)

protected = APIRouter(dependencies=[Depends(authenticate)], responses=error_responses())
protected.include_router(centers.router)
protected.include_router(catalog.router)
protected.include_router(studies.router)
protected.include_router(shares.router)
protected.include_router(analysts.router)
protected.include_router(audit.router)

api_router = APIRouter(prefix="/v1")
api_router.include_router(public)
api_router.include_router(protected)
