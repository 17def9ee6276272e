"""The app factory: ``create_app(settings)`` builds a center from validated settings."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from center_agent.api.router import api_router
from center_agent.core.config import Settings, load_settings
from center_agent.services import Services
from fedstats_service import handlers
from fedstats_service.auth import check_bearer
from fedstats_service.middleware import BearerGate, BodySizeLimit


def create_app(settings: Settings | None = None, *, services: Services | None = None) -> FastAPI:
    """A center app; settings default to :func:`load_settings` (``FEDSTATS_CENTER_CONFIG``).

    The datasets are checked and the ledger opened here, so a bad configuration fails at start-up,
    not at the first request. ``/docs`` and ``/openapi.json`` are served only in dev mode (every
    endpoint but health needs a token).
    """
    if services is None:
        services = Services.build(settings if settings is not None else load_settings())
    settings = services.settings

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        services.close()

    dev = settings.dev_mode
    app = FastAPI(
        title=f"fedstats center agent ({settings.center_id})",
        version="1",
        lifespan=lifespan,
        docs_url="/docs" if dev else None,
        redoc_url=None,
        openapi_url="/openapi.json" if dev else None,
    )
    app.state.services = services
    handlers.install(app, "center")
    # Added last, run first: the token is checked before the body is read.
    app.add_middleware(BodySizeLimit, max_body_bytes=settings.max_body_bytes,
                       body_timeout_s=settings.body_timeout_s)
    public = {"/v1/health", *(("/docs", "/openapi.json") if dev else ())}
    app.add_middleware(BearerGate, public=public,
                       check=lambda token: check_bearer(token, settings.tokens, "center"))
    app.include_router(api_router)
    return app
