"""The app factory both services share: a FastAPI app with the error handlers, the bearer gate
and the body limits of ``fedstats_service``, around a service's own router.

Order of the guards on every request: the call context (request id,
``CallContextMiddleware``), the bearer token (``BearerGate``; only the health check and, in dev
mode, the docs are public), then the body's size and time (``BodySizeLimit``), then
the route, whose router checks the token again (``fedstats_service.auth.bearer_auth``).

The OpenAPI schema (``/openapi.json``) and the interactive docs (``/docs``) are served by every
service: to any caller in dev mode, otherwise to a caller with a valid token only (the schema
holds no secret, but it maps every endpoint; a scanner without a token learns nothing). ``/docs``
is FastAPI's Swagger UI page, whose script and style come from a CDN (jsDelivr): a browser
without internet access shows nothing, and outside dev mode a browser cannot send the bearer
token by itself (use the schema with a tool that sends it, README.md "The API").
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from fastapi import APIRouter, FastAPI, Request

from fedstats_service import handlers
from fedstats_service.auth import Authenticator, static_tokens
from fedstats_service.errors import transport_responses
from fedstats_service.middleware import BearerGate, BodySizeLimit, CallContextMiddleware
from fedstats_service.settings import ServiceSettings

HEALTH_PATH = "/v1/health"
DOCS_PATHS = ("/docs", "/openapi.json")


def create_service_app(
    settings: ServiceSettings,
    router: APIRouter,
    *,
    title: str,
    services: object,
    close: Callable[[], Awaitable[None]],
    authenticate: Authenticator | None = None,
    trust_context_ids: bool = False,
    public_prefixes: tuple[str, ...] = (),
    on_start: Callable[[FastAPI], Awaitable[None]] | None = None,
) -> FastAPI:
    """An app serving ``router``, with ``services`` in ``app.state.services`` (what the
    service's dependencies read) and ``close`` awaited at shutdown. ``authenticate`` decides
    who a bearer token belongs to (default: the settings' ``bearer_tokens``,
    ``fedstats_service.auth.static_tokens``). ``trust_context_ids``: take the study and analyst
    ids from the request's headers (``fedstats_service.middleware.CallContextMiddleware``).

    ``/docs`` and ``/openapi.json`` are public in dev mode only; otherwise they need a token,
    as every endpoint but health does. ``on_start`` is awaited as the server starts, before it
    accepts a request (a center warms its routes: ``center_agent.warmup``).
    """

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if on_start is not None:
            await on_start(app)
        yield
        await close()

    dev = settings.dev_mode
    app = FastAPI(
        title=title,
        version="1",
        lifespan=lifespan,
        docs_url=DOCS_PATHS[0],
        redoc_url=None,
        openapi_url=DOCS_PATHS[1],
        # Any route, health included, may get the HTTP server's plain-text 400 or 503.
        responses=transport_responses(),
    )
    app.state.services = services
    check = authenticate or static_tokens(settings)
    app.state.authenticate = check
    handlers.install(app, settings.SERVICE)
    # Added last, run first: the token is checked before the body is read.
    app.add_middleware(BodySizeLimit, max_body_bytes=settings.max_body_bytes,
                       body_timeout_s=settings.body_timeout_s)
    public = {HEALTH_PATH, *(DOCS_PATHS if dev else ())}
    app.add_middleware(BearerGate, public=public, check=check, public_prefixes=public_prefixes)
    app.add_middleware(CallContextMiddleware, trust_ids=trust_context_ids)
    app.include_router(router)
    return app


def services_part(name: str) -> Callable[[Request], Any]:
    """A dependency giving ``services.<name>`` of the app (``create_service_app``'s
    ``services``: what the service built once at start-up). A service's ``api/deps.py`` gives it
    its type: ``StoreDep = Annotated[Store, Depends(services_part("store"))]``."""

    def get(request: Request) -> Any:
        return getattr(request.app.state.services, name)

    get.__name__ = f"get_{name}"
    return get
