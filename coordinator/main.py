"""The app factory: ``create_app(settings)`` builds a coordinator from validated settings."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

import httpx
from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from coordinator import ui
from coordinator.api.router import api_router
from coordinator.core.config import Settings, load_settings
from coordinator.ports import CenterPort
from coordinator.services import Services
from coordinator.ui.routes import UI_PREFIX
from fedstats_service.app import create_service_app


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
    so a bad store URL fails at start-up. Callers are analysts: accounts of the store or the
    configured ``analyst_tokens`` (``coordinator.accounts``). ``centers`` / ``transports`` are the
    test seams of :meth:`Services.build`. ``/docs`` and ``/openapi.json`` need a token, except
    in dev mode (``fedstats_service.app``). The web console is under ``/ui``.
    """
    built = services if services is not None else Services.build(
        settings if settings is not None else load_settings(),
        centers=centers,
        transports=transports,
    )
    app = create_service_app(built.settings, api_router, title="fedstats coordinator",
                             services=built, close=built.aclose,
                             authenticate=built.accounts.authenticate,
                             public_prefixes=(UI_PREFIX,), on_start=_start_runner(built))
    # The web console (coordinator.ui): its pages sign analysts in with a session cookie, and
    # every asset it uses is served here.
    app.include_router(ui.router)
    app.mount("/ui/static", StaticFiles(directory=ui.STATIC_DIR), name="ui-static")
    return app


def _start_runner(built: Services) -> Callable[[FastAPI], Awaitable[None]]:
    async def start(_app: FastAPI) -> None:
        # Several processes over the store: claim the studies a dead process left from the
        # start, not only once this one runs a study of its own.
        built.runner.start()

    return start
