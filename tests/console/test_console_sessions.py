"""A console session ends with the token that opened it (``coordinator.ui.sessions``): once the
token is rotated, expired or its account revoked, the old cookie reads no page, downloads
nothing, submits nothing (nothing spent) and its event stream ends — on every ``/ui`` route,
enumerated from the app so a new route is covered too."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from fastapi.routing import APIRoute
from sqlalchemy import update

from coordinator import feed
from coordinator.db import analysts
from coordinator.ui.routes import router
from tests.console.test_console_pages import STUDY_TOML, builder_post, csrf_of, sign_in
from tests.coordinator.test_coord_catalog import counted, serving
from tests.helpers.coordinator import Federations

pytestmark = pytest.mark.anyio

OPEN = {"/ui/login", "/ui/logout"}  # the sign-in itself; sign-out needs no live session
FILL = {"study_id": None, "index": "0", "fmt": "svg", "part": "tests", "action": "cancel"}


def ui_routes() -> list[tuple[str, str]]:
    """(method, path) of every route of the console's router but the sign-in and sign-out."""
    found = []
    for route in router.routes:
        path = route.path if isinstance(route, APIRoute) else None
        if path is not None and path not in OPEN:
            found += [(method, path) for method in sorted(route.methods)]
    return found


def filled(path: str, study_id: str) -> str:
    values = {**FILL, "study_id": study_id}
    return re.sub(r"\{(\w+)\}", lambda m: str(values[m.group(1)]), path)


def end_by(how: str, coord: Any, analyst_id: str) -> None:
    accounts = coord.app.state.services.accounts
    if how == "rotate":
        accounts.rotate(analyst_id)
    elif how == "revoke":
        accounts.revoke(analyst_id)
    else:  # the token's expiry passes (set in the store, as time passing would)
        with coord.app.state.services.store.engine.begin() as conn:
            conn.execute(update(analysts).where(analysts.c.id == analyst_id)
                         .values(expires_at="2000-01-01T00:00:00.000000+00:00"))


@pytest.mark.parametrize("how", ["rotate", "expire", "revoke"])
async def test_the_old_cookie_opens_nothing_once_the_token_ends(
        tmp_path: Path, federation: Federations, how: str) -> None:
    async with serving(tmp_path, counted(federation)) as coord:
        services = coord.app.state.services
        ann = services.accounts.add("ann", role="admin")
        client = coord.client
        assert (await sign_in(client, ann.token)).status_code == 303
        made = await builder_post(client, action="submit",
                                  files={"toml_file": ("s.toml", STUDY_TOML.encode())})
        assert made.status_code == 303, made.text[-2000:]
        study_id = made.headers["location"].rsplit("/", 1)[1]
        await services.runner.wait(study_id)
        routes = ui_routes()
        assert ("GET", "/ui/studies/{study_id}/events") in routes
        assert ("GET", "/ui/studies/{study_id}/export.xlsx") in routes
        assert (await client.get(f"/ui/studies/{study_id}/export.xlsx")).status_code == 200
        csrf = csrf_of(await client.get("/ui/studies/new"))

        end_by(how, coord, ann.analyst.id)
        for method, path in routes:
            url = filled(path, study_id)
            if method == "GET":
                answer = await client.get(url)
            else:
                answer = await client.post(url, data={"csrf_token": csrf, "action": "submit"},
                                           files={"toml_file": ("s.toml", STUDY_TOML.encode())})
            assert answer.status_code in (303, 401, 403), (how, method, url, answer.status_code)
            if answer.status_code == 303:  # /ui itself always points at the studies page
                assert answer.headers["location"] == (
                    "/ui/studies" if url == "/ui" else "/ui/login"), (how, method, url)
        # Nothing was submitted with the old cookie, so nothing was spent.
        assert [s.id for s in services.store.list_studies(visible_to=None)] == [study_id]
        # The new token (after a rotation) signs in as usual.
        if how == "rotate":
            fresh = services.accounts.rotate(ann.analyst.id)
            assert (await sign_in(client, fresh.token)).status_code == 303
            assert (await client.get("/ui/studies")).status_code == 200


async def test_a_session_ending_ends_its_open_event_stream(tmp_path: Path,
                                                           federation: Federations) -> None:
    """A running study's stream (no change, heartbeats only) stops at the first check after
    the session ends; counted in checks, not in seconds."""
    async with serving(tmp_path, counted(federation)) as coord:
        store = coord.app.state.services.store
        study = store.create_study("f" * 32, "{}", analyst_id="ann")
        checks = 0

        async def alive() -> bool:
            nonlocal checks
            checks += 1
            return checks < 4

        sent = [chunk async for chunk in feed.stream(store, study.id, heartbeat_s=0.05,
                                                     alive=alive)]
        assert checks == 4
        assert sent[0].startswith("id: 1\nevent: progress")
        assert all(chunk == ": heartbeat\n\n" for chunk in sent[1:]) and len(sent) == 4


async def test_a_session_of_before_bindings_is_over(tmp_path: Path,
                                                    federation: Federations) -> None:
    """A sign-in stored by an older coordinator (no token binding) is not taken as valid."""
    from coordinator.db import sessions as table
    from coordinator.ui.sessions import SESSION_COOKIE, digest

    async with serving(tmp_path, counted(federation)) as coord:
        ann = coord.app.state.services.accounts.add("ann")
        await sign_in(coord.client, ann.token)
        assert (await coord.client.get("/ui/studies")).status_code == 200
        cookie = coord.client.cookies[SESSION_COOKIE]
        with coord.app.state.services.store.engine.begin() as conn:
            conn.execute(update(table).where(table.c.id_hash == digest(cookie))
                         .values(token_binding=None))
        answer = await coord.client.get("/ui/studies")
        assert answer.status_code == 303 and answer.headers["location"] == "/ui/login"


def test_every_console_route_is_enumerated() -> None:
    """Every path parameter of the console's routes has a value above (a new one fails here)."""
    paths = {r.path for r in router.routes if isinstance(r, APIRoute)}
    assert len(paths) >= 15
    assert all(set(re.findall(r"\{(\w+)\}", p)) <= set(FILL) for p in paths), paths
