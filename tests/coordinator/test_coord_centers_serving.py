"""``/v1/centers`` (and ``fedstats centers``, the console's page) tells a center that answers
its health but cannot serve — its info or budget fails, so the catalog and the dry run leave
it out — from one that can, instead of calling both healthy."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedstats_cli.catalog import health_cell, render_centers
from tests.coordinator.test_coord_catalog import AUTH, Down, counted, serving
from tests.helpers.coordinator import Federations

pytestmark = pytest.mark.anyio


async def test_a_healthy_center_that_cannot_serve_says_so(
        tmp_path: Path, federation: Federations) -> None:
    async with serving(tmp_path, counted(federation, gamma=Down)) as coord:
        admin = coord.app.state.services.accounts.add("root", "admin")
        auth = {"Authorization": f"Bearer {admin.token}"}
        statuses = {s["id"]: s for s in (await coord.client.get("/v1/centers",
                                                                 headers=auth)).json()}
        catalog = (await coord.client.get("/v1/catalog", headers=AUTH)).json()
        from tests.console.test_console_pages import sign_in

        await sign_in(coord.client, admin.token)
        page = (await coord.client.get("/ui/centers")).text
    gamma, alpha = statuses["gamma"], statuses["alpha"]
    assert gamma["healthy"] is True and gamma["serving"] is False
    assert gamma["problem"]["kind"] == "unreachable"
    assert alpha["healthy"] is True and alpha["serving"] is True
    # the catalog says the same of it
    assert "gamma" in {c["id"] for c in catalog["centers"] if c["problem"] is not None}
    text = render_centers(list(statuses.values()))
    line = next(x for x in text.splitlines() if x.startswith("gamma"))
    assert "up, cannot serve" in line and "unreachable" in line
    assert "up, cannot serve" not in next(x for x in text.splitlines()
                                          if x.startswith("alpha"))
    assert page.count("up, cannot serve") == 1


def test_the_health_cell() -> None:
    base = {"healthy": True, "serving": True, "problem": None}
    assert health_cell(base) == "yes"
    assert health_cell({**base, "serving": False, "problem": {"kind": "x"}}) == \
        "up, cannot serve"
    assert health_cell({**base, "healthy": False, "serving": False}) == "no"
    # an older coordinator without `serving`: its problem decides
    assert health_cell({"healthy": True, "problem": {"kind": "x"}}) == "up, cannot serve"
