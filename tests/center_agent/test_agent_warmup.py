"""Start-up's warm-up (``center_agent.warmup``): every release route and the batch route are
asked once, in process, and refuse by validation; nothing is read, spent or audited."""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI

from center_agent.warmup import warm_routes
from tests.helpers.center import AUTH, TOKEN

pytestmark = pytest.mark.anyio

OPERATOR = "op-" + "0123456789abcdef0123"


@pytest.fixture
def base_config(base_config: dict[str, object]) -> dict[str, object]:
    return {**base_config, "operator_tokens": [OPERATOR]}


async def test_warming_the_routes_touches_nothing(client: httpx.AsyncClient, app: FastAPI,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    """No route takes the warm-up's empty body (a warning would be logged), and nothing is
    spent or audited."""
    with caplog.at_level("INFO", logger="center_agent.warmup"):
        await warm_routes(app, TOKEN)
    assert [r.levelname for r in caplog.records] == ["INFO"]
    assert "routes warmed" in caplog.records[0].getMessage()
    budget = (await client.get("/v1/budget", headers=AUTH)).json()
    assert budget["datasets"]["cohort"]["spent_epsilon"] == 0.0
    r = await client.get("/v1/audit", headers={"Authorization": f"Bearer {OPERATOR}"})
    assert r.json()["records"] == []
