"""All routes under ``/v1``: health is public, every other router requires a bearer token of
its role: the coordinator's (``protected``) or the operator's (``operator``, the audit trail).

A new release kind is declared to the gate (``center_agent.gate.kinds``) and gets its route from
``api/routes/releases``; any other resource is one module in ``api/routes`` whose router is added
to ``protected`` below. Either way it inherits authentication and the coordinator's role.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends

from center_agent.api.deps import coordinator_only, operator_only
from center_agent.api.routes import audit, budget, health, info, releases
from fedstats_service.errors import error_responses

public = APIRouter()
public.include_router(health.router)

protected = APIRouter(dependencies=[Depends(coordinator_only)], responses=error_responses())
protected.include_router(info.router)
protected.include_router(budget.router)
protected.include_router(releases.router)

operator = APIRouter(dependencies=[Depends(operator_only)], responses=error_responses())
operator.include_router(audit.router)

api_router = APIRouter(prefix="/v1")
api_router.include_router(public)
api_router.include_router(protected)
api_router.include_router(operator)
