"""The client against the real coordinator app and real in-process centers, without a socket:
the async client through ``httpx.ASGITransport``; the sync one through :class:`PortalTransport`,
which runs the app on an event loop in a thread (an anyio blocking portal), as a server would,
so its background studies keep running between calls."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio.from_thread
import httpx
import pytest
from fastapi import FastAPI

from coordinator.main import create_app
from fedstats_client import Client
from tests.helpers.coordinator import ANALYST_TOKEN, Federations, settings_for, sqlite_url

BASE_URL = "http://coordinator.test"


class PortalTransport(httpx.BaseTransport):
    """A synchronous httpx transport into an ASGI app running on ``portal``'s event loop."""

    def __init__(self, app: FastAPI, portal: anyio.from_thread.BlockingPortal) -> None:
        self.inner = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        self.portal = portal

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        body = request.read()

        async def send() -> httpx.Response:
            answer = await self.inner.handle_async_request(httpx.Request(
                request.method, request.url, headers=request.headers, content=body))
            assert isinstance(answer.stream, httpx.AsyncByteStream)
            raw = b"".join([part async for part in answer.stream])
            return httpx.Response(answer.status_code, headers=answer.headers, content=raw)

        return self.portal.call(send)


@dataclass
class Served:
    """A coordinator app on a portal, and how to make clients of it."""

    app: FastAPI
    portal: anyio.from_thread.BlockingPortal
    federation: Federations

    def client(self, token: str = ANALYST_TOKEN, **options: Any) -> Client:
        return Client(BASE_URL, token=token, poll_interval=0.05,
                      transport=PortalTransport(self.app, self.portal), **options)

    def account(self, name: str, role: str = "analyst") -> tuple[str, str]:
        """A new account: (analyst id, token)."""
        made = self.app.state.services.accounts.add(name, role)
        return made.analyst.id, made.token


def serve(tmp_path: Path, portal: anyio.from_thread.BlockingPortal, federation: Federations,
          centers: dict[str, Any] | None = None) -> Served:
    app = create_app(settings_for(sqlite_url(tmp_path)),
                     centers=centers if centers is not None else federation())
    return Served(app, portal, federation)


@pytest.fixture
def portal() -> Iterator[anyio.from_thread.BlockingPortal]:
    with anyio.from_thread.start_blocking_portal() as running:
        yield running


@pytest.fixture
def federation(portal: anyio.from_thread.BlockingPortal) -> Iterator[Federations]:
    made = Federations()
    try:
        yield made
    finally:
        portal.call(made.aclose)


@pytest.fixture
def served(tmp_path: Path, portal: anyio.from_thread.BlockingPortal,
           federation: Federations) -> Iterator[Served]:
    running = serve(tmp_path, portal, federation)
    try:
        yield running
    finally:
        portal.call(running.app.state.services.aclose)
