"""YJ moment sums (capped per study, optionally noised and paid) and quantile-loss values
(refused unless switched on), end to end in process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from center_helpers import AUTH, write_toml
from fastapi import FastAPI

from center_agent.core.config import load_settings
from center_agent.main import create_app
from shared.quantiles import quantile_loss, yj_moments
from shared.quantiles.wire import QuantileLossRelease, YJMomentsRelease
from shared.releases import yj_moments_sensitivity

pytestmark = pytest.mark.anyio
YJ = "/v1/datasets/cohort/yj-moments"
LOSS = "/v1/datasets/cohort/quantile-loss"


async def test_yj_moments_equal_the_core_and_repeat_for_free(
    client: httpx.AsyncClient, app: FastAPI
) -> None:
    body = {"variable": "y", "study": "s1", "lmbda": 0.3}
    r = await client.post(YJ, json=body, headers=AUTH)
    assert r.status_code == 200, r.text
    x = app.state.services.datasets["cohort"].values("y", None)
    assert YJMomentsRelease.model_validate_json(r.content).to_result() == yj_moments(x, 0.3)
    assert (await client.post(YJ, json=body, headers=AUTH)).json() == r.json()


async def test_yj_moments_calls_are_capped_per_study(
    tmp_path: Path, base_config: dict[str, Any]
) -> None:
    config = {**base_config, "yj_max_calls_per_study": 3}
    app = create_app(load_settings(write_toml(tmp_path / "cap.toml", config)))
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://center") as c:
        for lam in (0.1, 0.2, 0.3):
            body = {"variable": "x", "study": "s1", "lmbda": lam}
            assert (await c.post(YJ, json=body, headers=AUTH)).status_code == 200
        again = await c.post(YJ, json={"variable": "x", "study": "s1", "lmbda": 0.2},
                             headers=AUTH)
        assert again.status_code == 200  # a repeat is the stored answer, not a new call
        over = await c.post(YJ, json={"variable": "x", "study": "s1", "lmbda": 0.4},
                            headers=AUTH)
        assert over.status_code == 403 and over.json()["error"] == "call_cap_exceeded"
        other = await c.post(YJ, json={"variable": "x", "study": "s2", "lmbda": 0.4},
                             headers=AUTH)
        assert other.status_code == 200
    app.state.services.close()


async def test_noised_yj_moments_are_paid_and_calibrated(
    client: httpx.AsyncClient, app: FastAPI
) -> None:
    body = {"variable": "x", "study": "s1", "lmbda": 1.0, "epsilon": 0.5, "bounds": [0, 100]}
    r = await client.post(YJ, json=body, headers=AUTH)
    assert r.status_code == 200, r.text
    budget = (await client.get("/v1/budget", headers=AUTH)).json()["datasets"]["cohort"]
    assert budget["spent_epsilon"] == pytest.approx(0.5)
    x = np.clip(app.state.services.datasets["cohort"].values("x", None), 0, 100)
    exact = yj_moments(x, 1.0)
    noisy = YJMomentsRelease.model_validate_json(r.content)
    assert noisy.n == exact.n
    scale = yj_moments_sensitivity(1.0, (0.0, 100.0), "add_remove") / 0.5
    assert abs(noisy.sum_yj - exact.sum_yj) < 40 * scale  # Laplace(scale): far inside 40 scales
    # λ = 1 on [0, 100]: YJ(x) = x, so Δ = log(101) + 100 + 100² under add/remove.
    assert scale * 0.5 == pytest.approx(np.log(101) + 100 + 100**2)


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
        x = app.state.services.datasets["cohort"].values("x", "a")
        assert QuantileLossRelease.model_validate_json(r.content).to_result() == quantile_loss(
            x, 50.0, 0.25)
    app.state.services.close()
