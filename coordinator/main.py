"""The app factory: ``create_app(settings)`` builds a coordinator from validated settings."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

import httpx
from fastapi import FastAPI

from coordinator.api.router import api_router
from coordinator.core.config import Settings, load_settings
from coordinator.ports import CenterPort
from coordinator.services import Services
from fedstats_service import handlers
from fedstats_service.auth import check_bearer
from fedstats_service.middleware import BearerGate, BodySizeLimit


def create_app(
    settings: Settings | None = None,
    *,
    services: Services | None = None,
    centers: Mapping[str, CenterPort] | None = None,
    transports: Mapping[str, httpx.AsyncBaseTransport] | None = None,
) -> FastAPI:
    """A coordinator app; settings default to :func:`load_settings`
    (``FEDSTATS_COORDINATOR_CONFIG``).

    The store is opened here (studies a dead process left running become ``failed_resumable``),
    so a bad store URL fails at start-up. ``centers`` / ``transports`` are the test seams of
    :meth:`Services.build`. ``/docs`` and ``/openapi.json`` are served only in dev mode.
    """
    if services is None:
        services = Services.build(
            settings if settings is not None else load_settings(),
            centers=centers,
            transports=transports,
        )
    settings = services.settings

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        await services.aclose()

    dev = settings.dev_mode
    app = FastAPI(
        title="fedstats coordinator",
        version="1",
        lifespan=lifespan,
        docs_url="/docs" if dev else None,
        redoc_url=None,
        openapi_url="/openapi.json" if dev else None,
    )
    app.state.services = services
    handlers.install(app, "coordinator")
    # Added last, run first: the token is checked before the body is read.
    app.add_middleware(BodySizeLimit, max_body_bytes=settings.max_body_bytes,
                       body_timeout_s=settings.body_timeout_s)
    public = {"/v1/health", *(("/docs", "/openapi.json") if dev else ())}
    app.add_middleware(BearerGate, public=public,
                       check=lambda token: check_bearer(token, settings.analyst_tokens,
                                                        "coordinator"))
    app.include_router(api_router)
    return app
