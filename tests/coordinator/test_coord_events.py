"""``GET /v1/studies/{id}/events`` (``coordinator.feed``): a study's progress as server-sent
events over in-process centers, counted exactly — one event per state a reader could see, one
``end`` — and followed by re-reading the store when nothing in this process announces a change
(a study run by another coordinator process)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest

from coordinator import feed
from coordinator.main import create_app
from shared.kinds import Kind, Rel, Req
from tests.helpers.coordinator import AUTH, CountingCenter, Federations, K, settings_for, sqlite_url

pytestmark = pytest.mark.anyio

SPEC: dict[str, Any] = {
    "dataset": "cohort", "variable": "crp", "groups": ["ctl", "trt"], "k": K,
    "analyses": [
        {"kind": "table"},
        {"kind": "dp_boxplot", "group": "trt", "epsilon": 1.0, "bounds": [0.0, 100.0],
         "depth": 4, "branching": 4},
    ],
}


class HeldBoxes(CountingCenter):
    """A center whose DP releases wait for ``hold`` before the center is asked."""

    def __init__(self, port: Any, hold: asyncio.Event) -> None:
        super().__init__(port)
        self.hold = hold

    async def release(self, kind: Kind[Req, Rel], dataset: str, request: Req) -> Rel:
        if kind.name.startswith("dp_"):
            await self.hold.wait()
        return await super().release(kind, dataset, request)


@contextlib.asynccontextmanager
async def serving(tmp_path: Path, centers: Mapping[str, Any]
                  ) -> AsyncIterator[tuple[Any, httpx.AsyncClient]]:
    app = create_app(settings_for(sqlite_url(tmp_path)), centers=centers)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://coordinator") as client:
        try:
            yield app, client
        finally:
            await app.state.services.aclose()


def parse(body: str) -> list[tuple[str, dict[str, Any]]]:
    """(event name, data) of each event of a ``text/event-stream`` body; comments skipped."""
    out = []
    for block in body.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines()
                      if line and not line.startswith(":"))
        if fields:
            out.append((fields["event"], json.loads(fields["data"])))
    return out


async def events(client: httpx.AsyncClient, study_id: str, **params: Any
                 ) -> list[tuple[str, dict[str, Any]]]:
    answer = await client.get(f"/v1/studies/{study_id}/events", headers=AUTH, params=params)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/event-stream")
    return parse(answer.text)


async def watched(app: Any, study_id: str) -> None:
    """Until a stream of the study waits for its next change (it sent its first event)."""
    feed_ = feed.for_store(app.state.services.store)
    while not feed_.watching(study_id):
        await asyncio.sleep(0)


async def test_a_held_study_then_cancelled_is_exactly_two_events(
    tmp_path: Path, federation: Federations
) -> None:
    """The stream opened while the study waits for its boxes sends its state (running, the
    answers so far), and after the cancel exactly one ``end`` (cancelled, the same count)."""
    hold = asyncio.Event()
    centers = {cid: HeldBoxes(port, hold) for cid, port in federation().items()}
    async with serving(tmp_path, centers) as (app, client):
        study_id = (await client.post("/v1/studies", json=SPEC, headers=AUTH)).json()["id"]
        store = app.state.services.store
        # Held: every center answered its info and table, and each waits at its box.
        while not all(c.calls["table"] + c.calls["refine"] for c in centers.values()) or \
                store.count_releases(study_id) < 2 * len(centers):
            await asyncio.sleep(0.01)
        received = store.count_releases(study_id)
        stream = asyncio.create_task(events(client, study_id))
        await watched(app, study_id)
        cancelled = await client.post(f"/v1/studies/{study_id}/cancel", headers=AUTH)
        assert cancelled.status_code == 200
        got = await stream
        hold.set()
    assert [(name, data["status"], data["releases_received"]) for name, data in got] == [
        ("progress", "running", received), ("end", "cancelled", received)]
    assert {data["id"] for _, data in got} == {study_id}


async def test_a_running_study_streams_to_its_end(
    tmp_path: Path, federation: Federations
) -> None:
    """Every event differs from the one before, the counts never fall, exactly one ``end``,
    the last, with the status and count a read of the study gives."""
    hold = asyncio.Event()
    centers = {cid: HeldBoxes(port, hold) for cid, port in federation().items()}
    async with serving(tmp_path, centers) as (app, client):
        study_id = (await client.post("/v1/studies", json=SPEC, headers=AUTH)).json()["id"]
        stream = asyncio.create_task(events(client, study_id))
        await watched(app, study_id)
        hold.set()
        got = await stream
        view = (await client.get(f"/v1/studies/{study_id}", headers=AUTH)).json()
    names = [name for name, _ in got]
    assert names == ["progress"] * (len(got) - 1) + ["end"]
    states = [(d["status"], d["releases_received"]) for _, d in got]
    assert all(a != b for a, b in itertools.pairwise(states))
    counts = [n for _, n in states]
    assert counts == sorted(counts)
    assert states[-1] == ("succeeded", view["releases_received"]) and view["status"] == (
        "succeeded")


async def test_an_ended_study_is_one_event_and_a_stranger_gets_404(
    tmp_path: Path, federation: Federations
) -> None:
    async with serving(tmp_path, federation()) as (app, client):
        study_id = (await client.post("/v1/studies", json=SPEC, headers=AUTH)).json()["id"]
        await app.state.services.runner.wait(study_id)
        count = app.state.services.store.count_releases(study_id)
        assert await events(client, study_id) == [("end", {
            "id": study_id, "status": "succeeded", "releases_received": count,
            "updated_at": app.state.services.store.get_study(study_id).updated_at})]
        other = app.state.services.accounts.add("Bob", "analyst")
        stranger = await client.get(f"/v1/studies/{study_id}/events",
                                    headers={"Authorization": f"Bearer {other.token}"})
        assert stranger.status_code == 404 and stranger.json()["error"] == "study_not_found"
        bad = await client.get(f"/v1/studies/{study_id}/events", headers=AUTH,
                               params={"heartbeat_s": 0})
        assert bad.status_code == 422


async def test_a_change_nobody_announces_is_read_at_the_heartbeat(
    tmp_path: Path, federation: Federations
) -> None:
    """A study another process ends (its status written to the shared store, no notice here):
    the stream reads the store again at its heartbeat and sends the ``end``."""
    hold = asyncio.Event()
    centers = {cid: HeldBoxes(port, hold) for cid, port in federation().items()}
    async with serving(tmp_path, centers) as (app, client):
        store = app.state.services.store
        study_id = (await client.post("/v1/studies", json=SPEC, headers=AUTH)).json()["id"]
        await app.state.services.runner.cancel(study_id)  # announced: ends before the stream
        assert store.set_status(study_id, "running")  # another process resumed it
        stream = asyncio.create_task(events(client, study_id, heartbeat_s=0.05))
        await watched(app, study_id)
        assert store.set_status(study_id, "failed_resumable")  # and stopped: not announced
        got = await stream
    assert [(name, d["status"]) for name, d in got] == [
        ("progress", "running"), ("end", "failed_resumable")]


@pytest.mark.parametrize("how", ["rotate", "expire", "revoke"])
async def test_a_stream_ends_when_its_token_ends(tmp_path: Path, federation: Federations,
                                                 how: str) -> None:
    """A stream opened with an account's token (a study that does not change: heartbeats only)
    sends its state, then stops at the first check after the token is rotated, expires or its
    account is revoked: exactly one event and one heartbeat, counted, not timed."""
    from types import SimpleNamespace

    from tests.console.test_console_sessions import end_by

    async with serving(tmp_path, federation()) as (app, client):
        services = app.state.services
        ann = services.accounts.add("Ann", "analyst")
        study = services.store.create_study("e" * 32, "{}", analyst_id=ann.analyst.id)
        stream = asyncio.create_task(client.get(
            f"/v1/studies/{study.id}/events", params={"heartbeat_s": 0.05},
            headers={"Authorization": f"Bearer {ann.token}"}))
        await watched(app, study.id)  # open, its first event sent
        end_by(how, SimpleNamespace(app=app), ann.analyst.id)
        answer = await stream
        assert answer.status_code == 200, answer.text
        assert [name for name, _ in parse(answer.text)] == ["progress"]
        assert answer.text.count(": heartbeat") == 1
        after = await client.get(f"/v1/studies/{study.id}/events",
                                 headers={"Authorization": f"Bearer {ann.token}"})
        assert after.status_code == 401
