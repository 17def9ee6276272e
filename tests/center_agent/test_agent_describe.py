"""The ε-DP describe release (``POST /v1/datasets/{d}/dp/describe``): paid before it is computed,
refused from public information (no bounds anywhere, a level below K, a budget too small) with
nothing spent, one stored answer per question (whatever the wording of its bounds), and numbers
those of the exact statistics when ε is large (noise → 0)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pyarrow as pa
import pytest
from fastapi import FastAPI

from shared.describe import EPSILON_SPLIT
from shared.protocol import DescribeRelease
from tests.helpers.center import AUTH, write_csv

pytestmark = pytest.mark.anyio
URL = "/v1/datasets/cohort/dp/describe"


@pytest.fixture
def csv_path(tmp_path: Path) -> Path:
    """120 records in level a, 5 in level b (below K = 10: left out of the population)."""
    rng = np.random.default_rng(7)
    x = np.round(rng.normal(50, 10, 125) * 2) / 2  # recorded at its declared resolution 0.5
    y = np.round(rng.exponential(2.0, 125), 2)
    arm = ["a"] * 120 + ["b"] * 5
    return write_csv(pa.table({"x": x, "y": y, "arm": arm}), tmp_path / "cohort.csv")


@pytest.fixture
def base_config(base_config: dict[str, Any]) -> dict[str, Any]:
    cohort = base_config["datasets"]["cohort"]
    cohort["epsilon_total"] = 1000.0
    cohort["epsilon_per_request"] = 100.0
    cohort["metadata"] = {"x": {"bounds": [0.0, 100.0], "unit": "kg", "resolution": 0.5}}
    return base_config


async def spent(client: httpx.AsyncClient) -> float:
    r = await client.get("/v1/budget", headers=AUTH)
    return float(r.json()["datasets"]["cohort"]["spent_epsilon"])


async def test_describe_numbers_at_large_epsilon(client: httpx.AsyncClient,
                                                 app: FastAPI) -> None:
    r = await client.post(URL, json={"variable": "x", "group": "a", "epsilon": 100.0,
                                     "bins": 5}, headers=AUTH)
    assert r.status_code == 200, r.text
    release = DescribeRelease.model_validate_json(r.content)
    x = app.state.services.datasets["cohort"].population().level("x", "a")
    assert release.bounds == (0.0, 100.0)  # the declared bounds
    assert release.epsilon == pytest.approx(100.0)
    assert sum(p.epsilon for p in release.parts) == pytest.approx(100.0, rel=1e-12)
    assert [p.name for p in release.parts] == [n for n, _ in EPSILON_SPLIT]
    # Each Laplace part states b = Δ/ε (add/remove: count 1, sum h = 50, squares h² = 2500).
    by_name = {p.name: p for p in release.parts}
    assert by_name["sum"].scale == pytest.approx(50.0 / by_name["sum"].epsilon)
    assert by_name["sum of squares"].scale == pytest.approx(2500.0 / by_name["sum of squares"]
                                                            .epsilon)
    # The declared resolution: JointExp's values lie on its grid (the multiples of 0.5).
    assert release.resolution == 0.5
    assert all(v * 2 == round(v * 2) for v in release.quantiles)
    summary = release.to_result().summary()
    # The center's noise is the OS's, so each tolerance is a stated multiple of its scale at
    # ε = 100 over these 75 values (count 0.1; sum 3.3, i.e. 0.044 on the mean; squares 100,
    # about 0.076 on the SD). n: 2.5 scales of the count short of 25 (e^-25). Mean: 22 scales
    # (P ≈ e^-22.5 ≈ 2e-10; at 0.5, 11 scales, it was 1.3e-5). SD: 26 scales (below 1e-11 in
    # 4·10^7 draws of the three sums; at 1.0 it was 2e-6). Quartiles (JointExp at ε = 30 on
    # the 0.5 grid): Q1 strays beyond 1.0 in 28 % of draws, beyond 1.5 in 3 %, beyond 2.0 in
    # none of 3·10^6, each rank further out costing a factor of about 10; a grid point 3 off
    # any quartile is 6 to 11 ranks out.
    assert summary.n == pytest.approx(x.size, abs=2)
    assert summary.mean == pytest.approx(x.mean(), abs=1.0)
    assert summary.sd == pytest.approx(x.std(ddof=1), abs=2.0)
    q1, med, q3 = np.quantile(x, [0.25, 0.5, 0.75])
    assert summary.median == pytest.approx(med, abs=3.0)
    assert summary.q1 == pytest.approx(q1, abs=3.0)
    assert summary.q3 == pytest.approx(q3, abs=3.0)
    exact, _ = np.histogram(x, bins=np.linspace(0, 100, 6))
    assert np.allclose(summary.counts, exact, atol=3)


async def test_same_question_one_answer_paid_once(client: httpx.AsyncClient) -> None:
    before = await spent(client)
    implicit = await client.post(URL, json={"variable": "x", "epsilon": 2.0}, headers=AUTH)
    explicit = await client.post(URL, json={"variable": "x", "epsilon": 2.0,
                                            "bounds": [0, 100]}, headers=AUTH)
    assert implicit.status_code == explicit.status_code == 200
    assert implicit.json() == explicit.json()
    assert await spent(client) == pytest.approx(before + 2.0)
    other = await client.post(URL, json={"variable": "x", "epsilon": 2.0, "bounds": [0, 90]},
                              headers=AUTH)
    assert other.status_code == 200 and other.json() != implicit.json()
    assert await spent(client) == pytest.approx(before + 4.0)


async def test_no_bounds_anywhere_refused_nothing_spent(client: httpx.AsyncClient) -> None:
    before = await spent(client)
    r = await client.post(URL, json={"variable": "y", "epsilon": 1.0}, headers=AUTH)
    assert r.status_code == 422 and r.json()["error"] == "invalid_request"
    assert "bounds" in r.json()["detail"]
    assert await spent(client) == before
    ok = await client.post(URL, json={"variable": "y", "epsilon": 1.0, "bounds": [0, 20]},
                           headers=AUTH)
    assert ok.status_code == 200, ok.text


async def test_bounds_too_wide_for_the_resolution_refused(client: httpx.AsyncClient) -> None:
    before = await spent(client)
    r = await client.post(URL, json={"variable": "x", "epsilon": 1.0, "bounds": [0, 1e15]},
                          headers=AUTH)
    assert r.status_code == 422 and r.json()["error"] == "invalid_request"
    assert "resolution" in r.json()["detail"]
    assert await spent(client) == before


async def test_level_below_k_refused_nothing_spent(client: httpx.AsyncClient) -> None:
    before = await spent(client)
    r = await client.post(URL, json={"variable": "x", "group": "b", "epsilon": 1.0},
                          headers=AUTH)
    assert r.status_code == 403 and r.json()["error"] == "k_anonymity_refused"
    assert await spent(client) == before


@pytest.mark.parametrize("body", [
    {"variable": "x", "epsilon": 0.0},
    {"variable": "x", "epsilon": 1.0, "bins": 0},
    {"variable": "x", "epsilon": 1.0, "bins": 201},
    {"variable": "x", "epsilon": 1.0, "bounds": [5, 5]},
    {"variable": "nope", "epsilon": 1.0},
    {"variable": "x", "group": "zz", "epsilon": 1.0},
])
async def test_bad_requests_are_4xx(client: httpx.AsyncClient, body: dict[str, Any]) -> None:
    before = await spent(client)
    r = await client.post(URL, json=body, headers=AUTH)
    assert 400 <= r.status_code < 500, r.text
    assert await spent(client) == before


async def test_budget_exceeded_refuses_and_spends_nothing(client: httpx.AsyncClient) -> None:
    # Spend all but 50 of the 1000, then ask for 60: refused, nothing spent, nothing computed.
    for i in range(9):
        r = await client.post(URL, json={"variable": "x", "epsilon": 100.0, "bins": i + 1},
                              headers=AUTH)
        assert r.status_code == 200, r.text
    r = await client.post(URL, json={"variable": "x", "epsilon": 50.0, "bins": 20},
                          headers=AUTH)
    assert r.status_code == 200
    before = await spent(client)
    assert before == pytest.approx(950.0)
    r = await client.post(URL, json={"variable": "x", "epsilon": 60.0, "bins": 30},
                          headers=AUTH)
    assert r.status_code == 403 and r.json()["error"] == "budget_exceeded"
    assert await spent(client) == pytest.approx(before)
    # A question answered before is still answered, at no cost.
    again = await client.post(URL, json={"variable": "x", "epsilon": 50.0, "bins": 20},
                              headers=AUTH)
    assert again.status_code == 200
    assert await spent(client) == pytest.approx(before)
