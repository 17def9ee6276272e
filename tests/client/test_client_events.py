"""The client follows a study's pushed events (``GET /v1/studies/{id}/events``) instead of
polling, and polls when the coordinator has no such route (an older one): counted by the
requests it makes, against the real coordinator app and in-process centers."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from coordinator.main import create_app
from fedstats_client import AsyncClient, Study
from tests.helpers.coordinator import ANALYST_TOKEN, Federations, settings_for, sqlite_url

pytestmark = pytest.mark.anyio

BASE_URL = "http://coordinator.test"


class Recorded(httpx.AsyncBaseTransport):
    """The app's transport, recording each request's method, path and query; with
    ``no_events`` the events route answers 404, as a coordinator without it does."""

    def __init__(self, inner: httpx.AsyncBaseTransport, *, no_events: bool = False) -> None:
        self.inner = inner
        self.no_events = no_events
        self.requests: list[tuple[str, str, str]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.requests.append((request.method, request.url.path, request.url.query.decode()))
        if self.no_events and request.url.path.endswith("/events"):
            return httpx.Response(404, json={"error": "not_found", "detail": "Not Found"})
        return await self.inner.handle_async_request(request)


@pytest.mark.parametrize("no_events", [False, True], ids=["events", "polled"])
async def test_wait_follows_events_and_polls_without_them(tmp_path: Path,
                                                          no_events: bool) -> None:
    federation = Federations()
    app = create_app(settings_for(sqlite_url(tmp_path)), centers=federation())
    transport = Recorded(httpx.ASGITransport(app=app, raise_app_exceptions=False),
                         no_events=no_events)
    try:
        async with AsyncClient(BASE_URL, token=ANALYST_TOKEN, transport=transport,
                               poll_interval=0.01) as fs:
            lines: list[str] = []
            study = await fs.run(Study("cohort", "crp", groups=["ctl", "trt"]).table().mwu(),
                                 progress=lines.append)
        assert study.status == "succeeded" and study.result is not None
        assert lines[-1].startswith(f"study {study.id}: succeeded, "
                                    f"{study.view.releases_received} releases received")
        path = f"/v1/studies/{study.id}"
        after = transport.requests[[m for m, _, _ in transport.requests].index("POST") + 1:]
        polls = [r for r in after if r == ("GET", path, "provenance=false")]
        assert after[0] == ("GET", f"{path}/events", "")
        assert after[-1] == ("GET", path, "provenance=true")  # read in full once, at the end
        if no_events:
            assert polls and len(after) == 2 + len(polls)
        else:
            assert after == [("GET", f"{path}/events", ""), ("GET", path, "provenance=true")]
    finally:
        await app.state.services.aclose()
        await federation.aclose()
