"""The app factory: ``create_app(settings)`` builds a center from validated settings."""

from __future__ import annotations

from fastapi import FastAPI

from center_agent.api.deps import roles
from center_agent.api.router import api_router
from center_agent.core.config import Settings, load_settings
from center_agent.services import Services
from center_agent.warmup import warm_kernels, warm_routes
from fedstats_service.app import create_service_app


def create_app(settings: Settings | None = None, *, services: Services | None = None) -> FastAPI:
    """A center app; settings default to :func:`load_settings` (``FEDSTATS_CENTER_CONFIG``).

    The datasets are checked and the ledger opened here, so a bad configuration fails at start-up,
    not at the first request. ``/docs`` and ``/openapi.json`` are served only in dev mode (every
    endpoint but health needs a token). Tokens are the coordinator's or the operator's
    (``center_agent.api.deps.roles``). As the server starts, its routes are warmed, and
    its compiled kernels loaded unless ``warm_kernels`` is off (``center_agent.warmup``).
    """
    built = services if services is not None else Services.build(
        settings if settings is not None else load_settings())

    async def close() -> None:
        built.close()

    async def warm(app: FastAPI) -> None:
        await warm_routes(app, built.settings.tokens[0].get_secret_value())
        if built.settings.warm_kernels:
            await warm_kernels()

    return create_service_app(built.settings, api_router,
                              title=f"fedstats center agent ({built.settings.center_id})",
                              services=built, close=close, authenticate=roles(built.settings),
                              trust_context_ids=True, on_start=warm)
