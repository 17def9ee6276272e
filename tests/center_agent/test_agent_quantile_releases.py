"""YJ moment sums (always ε-DP, paid, capped per dataset and per token) and quantile-loss values
(refused unless switched on), end to end in process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from fastapi import FastAPI

from center_agent.core.config import load_settings
from center_agent.main import create_app
from shared.quantiles import quantile_loss, yj_moments
from shared.quantiles.wire import QuantileLossRelease, YJMomentsRelease
from shared.releases import yj_moments_sensitivity
from tests.helpers.center import AUTH, OTHER_TOKEN
from tests.helpers.config import write_toml

pytestmark = pytest.mark.anyio
YJ = "/v1/datasets/cohort/yj-moments"
LOSS = "/v1/datasets/cohort/quantile-loss"
NOISY = {"variable": "x", "epsilon": 0.05, "bounds": [0, 100]}


async def test_un_noised_yj_moments_are_never_released(client: httpx.AsyncClient) -> None:
    """From exact sums at a few λ the values of a small sample can be solved for: ε and public
    bounds are required, whatever else the request says."""
    for body in ({"variable": "y", "lmbda": 0.3},
                 {"variable": "y", "lmbda": 0.3, "study": "invented-1"},
                 {"variable": "y", "lmbda": 0.3, "epsilon": 0.5}):
        r = await client.post(YJ, json=body, headers=AUTH)
        assert r.status_code == 422, r.text


async def test_noised_yj_moments_are_paid_calibrated_and_repeat_for_free(
    client: httpx.AsyncClient, app: FastAPI
) -> None:
    body = {**NOISY, "lmbda": 1.0, "epsilon": 0.5}
    r = await client.post(YJ, json=body, headers=AUTH)
    assert r.status_code == 200, r.text
    budget = (await client.get("/v1/budget", headers=AUTH)).json()["datasets"]["cohort"]
    assert budget["spent_epsilon"] == pytest.approx(0.5)
    assert (await client.post(YJ, json=body, headers=AUTH)).json() == r.json()
    x = np.clip(app.state.services.datasets["cohort"].population().pooled("x"), 0, 100)
    exact = yj_moments(x, 1.0)
    noisy = YJMomentsRelease.model_validate_json(r.content)
    assert noisy.n == exact.n
    scale = yj_moments_sensitivity(1.0, (0.0, 100.0), "add_remove") / 0.5
    assert abs(noisy.sum_yj - exact.sum_yj) < 40 * scale  # Laplace(scale): far inside 40 scales
    assert noisy.sum_yj != exact.sum_yj
    # λ = 1 on [0, 100]: YJ(x) = x, so Δ = log(101) + 100 + 100² under add/remove.
    assert scale * 0.5 == pytest.approx(np.log(101) + 100 + 100**2)


async def test_a_sensitivity_that_overflows_is_a_422(client: httpx.AsyncClient) -> None:
    """Bounds [-1e15, 0] at λ = -10: YJ(-1e15)² overflows; [0, 1e30] is beyond any public
    bound. Decided from the request: 422, not a 500 from an infinite noise scale."""
    r = await client.post(YJ, json={**NOISY, "bounds": [-1e15, 0], "lmbda": -10.0},
                          headers=AUTH)
    assert r.status_code == 422, r.text
    assert "bounds" in r.json()["detail"]
    r = await client.post(YJ, json={**NOISY, "bounds": [0, 1e30], "lmbda": 3.0,
                                    "epsilon": 1e-6}, headers=AUTH)
    assert r.status_code == 422, r.text


async def test_yj_moments_are_capped_per_dataset_and_per_token(
    tmp_path: Path, base_config: dict[str, Any]
) -> None:
    config = {**base_config, "yj_max_calls": 5, "yj_max_calls_per_token": 3}
    app = create_app(load_settings(write_toml(tmp_path / "cap.toml", config)))
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    other = {"Authorization": f"Bearer {OTHER_TOKEN}"}
    async with httpx.AsyncClient(transport=transport, base_url="http://center") as c:
        for lam in (0.1, 0.2, 0.3):
            assert (await c.post(YJ, json={**NOISY, "lmbda": lam}, headers=AUTH)
                    ).status_code == 200
        again = await c.post(YJ, json={**NOISY, "lmbda": 0.2}, headers=AUTH)
        assert again.status_code == 200  # a repeat is the stored answer, not a new call
        over = await c.post(YJ, json={**NOISY, "lmbda": 0.4}, headers=AUTH)
        assert over.status_code == 403 and over.json()["error"] == "call_cap_exceeded"
        # Another token has calls of its own, until the dataset's cap.
        for lam in (0.4, 0.5):
            assert (await c.post(YJ, json={**NOISY, "lmbda": lam}, headers=other)
                    ).status_code == 200
        over = await c.post(YJ, json={**NOISY, "lmbda": 0.6}, headers=other)
        assert over.status_code == 403 and over.json()["error"] == "call_cap_exceeded"
    app.state.services.close()


async def test_quantile_loss_is_off_by_default(client: httpx.AsyncClient) -> None:
    r = await client.post(LOSS, json={"variable": "x", "u": 50, "level": 0.5}, headers=AUTH)
    assert r.status_code == 403 and r.json()["error"] == "release_disabled"


async def test_quantile_loss_when_switched_on(tmp_path: Path, base_config: dict[str, Any]) -> None:
    config = {**base_config, "allow_quantile_loss": True}
    app = create_app(load_settings(write_toml(tmp_path / "loss.toml", config)))
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://center") as c:
        r = await c.post(LOSS, json={"variable": "x", "group": "a", "u": 50, "level": 0.25},
                         headers=AUTH)
        assert r.status_code == 200, r.text
        x = app.state.services.datasets["cohort"].population().level("x", "a")
        assert QuantileLossRelease.model_validate_json(r.content).to_result() == quantile_loss(
            x, 50.0, 0.25)
    app.state.services.close()
