"""``fedstats study run`` / ``wait`` follow a study's pushed events
(``fedstats_cli.study.wait_study``), and poll when the coordinator has no events route: counted
by the requests made, against the real coordinator app and in-process centers (run on an event
loop in a thread, as a server runs it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio.from_thread
import httpx
import pytest

from coordinator.main import create_app
from fedstats_cli.study import wait_study
from tests.client.conftest import PortalTransport
from tests.helpers.coordinator import AUTH, Federations, K, settings_for, sqlite_url

SPEC: dict[str, Any] = {"dataset": "cohort", "variable": "crp", "groups": ["ctl", "trt"],
                        "k": K, "analyses": [{"kind": "table"}]}


class Recorded(PortalTransport):
    """Records each request (method, path, query); ``no_events``: the events route is 404."""

    def __init__(self, *args: Any, no_events: bool) -> None:
        super().__init__(*args)
        self.no_events = no_events
        self.requests: list[tuple[str, str, str]] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.requests.append((request.method, request.url.path, request.url.query.decode()))
        if self.no_events and request.url.path.endswith("/events"):
            return httpx.Response(404, json={"error": "not_found", "detail": "Not Found"})
        return super().handle_request(request)


@pytest.mark.parametrize("no_events", [False, True], ids=["events", "polled"])
def test_wait_study_follows_events_and_polls_without_them(tmp_path: Path,
                                                          no_events: bool) -> None:
    federation = Federations()
    with anyio.from_thread.start_blocking_portal() as portal:
        app = create_app(settings_for(sqlite_url(tmp_path)), centers=federation())
        transport = Recorded(app, portal, no_events=no_events)
        try:
            with httpx.Client(base_url="http://coordinator.test", headers=AUTH,
                              transport=transport) as client:
                created = client.post("/v1/studies", json=SPEC)
                assert created.status_code == 202, created.text
                lines: list[str] = []
                view = wait_study(client, created.json()["status_url"], progress=lines.append)
        finally:
            portal.call(app.state.services.aclose)
            portal.call(federation.aclose)
    assert view["status"] == "succeeded" and view["provenance"]
    assert lines[-1] == f"succeeded: {view['releases_received']} releases received"
    path = f"/v1/studies/{view['id']}"
    after = transport.requests[1:]
    assert after[0] == ("GET", f"{path}/events", "")
    assert after[-1] == ("GET", path, "")  # read in full once, at the end
    polls = after[1:-1]
    if no_events:
        assert polls and set(polls) == {("GET", path, "provenance=false")}
    else:
        assert polls == []
